"""A query parameter an operation does not take, or a body where none is taken, is a 400."""

import json

import pytest
from django.urls import resolve
from rest_framework.test import APIClient

from tests.api.conftest import error_of
from tests.helpers import run_inline, sample
from transcripts import actions
from transcripts.models import Job

pytestmark = pytest.mark.django_db


def test_each_operation_takes_the_query_parameters_its_schema_documents():
    schema = APIClient().get("/api/schema").json()
    for path, operations in schema["paths"].items():
        view = resolve(path.replace("{id}", "1").replace("{number}", "0")).func.view_class
        for method, operation in operations.items():
            documented = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
            taken = set(view.query_keys.get(method.upper(), ()))
            assert taken == documented, (method, path)


@pytest.fixture
def sessions(workspace, ingest, alice):
    return [
        ingest(workspace, "a.jsonl", sample("formats/claude_code.jsonl")),
        ingest(workspace, "b.jsonl", sample("formats/openclaw.jsonl")),
    ]


def _named(response, key):
    assert error_of(response) == (400, "bad_request")
    return key in json.dumps(response.json())


def test_a_mistyped_query_parameter_starts_nothing(api, sessions):
    first = sessions[0]
    # Dropped, each would have started a job of every session, or a real repair.
    assert _named(api.post("/api/jobs?sessions=2", {"kind": "repair"}, format="json"), "sessions")
    assert _named(
        api.post(f"/api/sessions/{first.pk}/repair?dry_run=true", {}, format="json"), "dry_run"
    )
    assert Job.objects.count() == 0
    assert first.revisions.count() == 1
    # Dropped, `haed` would have appended with no check of the head.
    line = sample("formats/claude_code.jsonl").splitlines(keepends=True)[0]
    response = api.post(
        f"/api/sessions/{first.pk}/records?haed=0", line, content_type="application/x-ndjson"
    )
    assert _named(response, "haed") and first.revisions.count() == 1
    # Reads too, and a page's keys are the paginator's, not a job filter's.
    assert _named(api.get("/api/jobs?stauts=done"), "stauts")
    # A preflight asks of the URL as it will be sent, query and all.
    assert api.options("/api/sessions?page=1").status_code == 200
    assert api.get("/api/sessions", {"page": 1, "page_size": 5}).status_code == 200
    body = {"kind": "repair", "filter": {"page_size": 1}}
    assert _named(api.post("/api/jobs", body, format="json"), "page_size")
    assert Job.objects.count() == 0


def test_apply_and_rollback_take_no_body(api, alice, workspace, sessions):
    dry_run = run_inline(
        actions.do_start_job(
            workspace, sessions, kind="dry_run", policy="synthesize", acting_user=alice
        )
    )
    response = api.post(
        f"/api/jobs/{dry_run.pk}/apply", {"sessions": [sessions[0].pk]}, format="json"
    )
    assert _named(response, "sessions")
    assert Job.objects.count() == 1
    assert api.post(f"/api/jobs/{dry_run.pk}/apply", {}, format="json").status_code == 202
