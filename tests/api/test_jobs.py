import io
import json
import zipfile

import pytest

from project.celery import app as celery_app
from tests.api.conftest import error_of
from tests.helpers import run_inline, sample
from transcripts import actions
from transcripts.models import ApiToken, Job, JobItem

URL = "/api/jobs"
pytestmark = pytest.mark.django_db


@pytest.fixture
def sessions(workspace, ingest):
    return [
        ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl")),
        ingest(workspace, "openclaw.jsonl", sample("formats/openclaw.jsonl")),
        ingest(
            workspace, "healthy.jsonl", sample("cases/02_cc-parallel-results-split-lines.jsonl")
        ),
    ]


def test_it_starts_a_repair_of_one_session(api, alice, workspace, sessions):
    response = api.post(
        f"/api/sessions/{sessions[0].pk}/repair", {"policy": "discard"}, format="json"
    )
    job = Job.objects.get()
    assert response.status_code == 202
    assert response.json()["id"] == job.pk
    assert (response.json()["kind"], response.json()["status"]) == ("repair", "queued")
    assert (job.workspace, job.created_by, job.policy, job.force) == (
        workspace,
        alice,
        "discard",
        False,
    )
    assert job.api_token == ApiToken.objects.get()
    assert list(job.items.values_list("session_id", flat=True)) == [sessions[0].pk]

    job = run_inline(job)
    body = api.get(f"{URL}/{job.pk}").json()
    assert (body["status"], body["total"], body["done"], body["failed"]) == ("done", 1, 1, 0)
    session = api.get(f"/api/sessions/{sessions[0].pk}").json()
    assert (session["head"], session["fault_counts"]) == (1, {})


def test_it_starts_a_dry_run_of_one_session(api, sessions):
    response = api.post(f"/api/sessions/{sessions[0].pk}/repair", {"dry_run": True}, format="json")
    assert response.status_code == 202
    job = Job.objects.get()
    assert (job.kind, job.policy) == ("dry_run", "synthesize")


def test_it_starts_a_job_of_sessions_by_id(api, sessions):
    ids = [sessions[0].pk, sessions[2].pk]
    response = api.post(URL, {"kind": "dry_run", "sessions": ids, "force": True}, format="json")
    job = Job.objects.get()
    assert response.status_code == 202
    assert (job.kind, job.force, job.selection) == ("dry_run", True, {})
    assert sorted(job.items.values_list("session_id", flat=True)) == sorted(ids)


def test_it_starts_a_job_of_the_sessions_a_filter_matches(api, sessions):
    body = {"kind": "repair", "filter": {"fault": "missing_result", "q": "claude"}}
    response = api.post(URL, body, format="json")
    job = Job.objects.get()
    assert response.status_code == 202
    assert job.selection == {"fault": "missing_result", "q": "claude"}
    assert list(job.items.values_list("session_id", flat=True)) == [sessions[0].pk]


def test_it_refuses_a_filter_that_matches_nothing(api, sessions):
    response = api.post(URL, {"kind": "repair", "filter": {"q": "nothing"}}, format="json")
    assert error_of(response) == (404, "not_found")
    assert Job.objects.count() == 0


def test_it_refuses_other_workspaces_sessions(api, sessions, other_workspace, ingest, bob):
    theirs = ingest(other_workspace, "theirs.jsonl", b"{}\n", user=bob)
    body = {"kind": "repair", "sessions": [sessions[0].pk, theirs.pk]}
    response = api.post(URL, body, format="json")
    assert error_of(response) == (404, "not_found")
    assert (
        response.json()["error"]["message"] == f"There is no session {theirs.pk} in this workspace."
    )
    assert Job.objects.count() == 0


def test_it_narrows_by_ids_and_filter_together(api, sessions):
    ids = [sessions[0].pk, sessions[1].pk]
    body = {"kind": "export", "sessions": ids, "filter": {"format": "openclaw"}}
    response = api.post(URL, body, format="json")
    job = Job.objects.get()
    assert response.status_code == 202
    assert job.selection == {"format": "openclaw"}
    assert list(job.items.values_list("session_id", flat=True)) == [sessions[1].pk]


def test_it_takes_every_session_without_ids_or_filter(api, sessions):
    response = api.post(URL, {"kind": "dry_run"}, format="json")
    assert response.status_code == 202
    assert Job.objects.get().total == 3


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"kind": "rollback"},
        {"kind": "repair", "sessions": []},
        {"kind": "repair", "sessions": [0]},
        {"kind": "repair", "force": "yes"},
        {"kind": "repair", "filter": {"fault": "lost_socks"}},
    ],
)
def test_it_refuses_a_job_request_that_does_not_add_up(api, sessions, body):
    assert error_of(api.post(URL, body, format="json")) == (400, "bad_request")
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ({"kind": "repair", "session_ids": [1]}, "session_ids"),
        ({"kind": "repair", "session": 1}, "session"),
        ({"kind": "repair", "filters": {"q": "x"}}, "filters"),
        ({"kind": "repair", "filter": {"name": "nomatch"}}, "filter"),
    ],
)
def test_a_mistyped_key_is_refused_by_name_not_dropped(api, sessions, body, key):
    # Dropped, each of these would have started a repair of every session of the workspace.
    response = api.post(URL, body, format="json")
    assert error_of(response) == (400, "bad_request")
    assert Job.objects.count() == 0
    text = json.dumps(response.json())
    assert "Unknown field; the fields are" in text
    assert ("name" if key == "filter" else key) in text


def test_the_session_list_refuses_a_mistyped_filter_but_takes_its_pages(api, sessions):
    assert error_of(api.get("/api/sessions", {"nme": "x"})) == (400, "bad_request")
    response = api.get("/api/sessions", {"q": "claude", "page": 1, "page_size": 10})
    assert response.status_code == 200
    assert [s["name"] for s in response.json()["results"]] == ["claude_code.jsonl"]


def test_it_rolls_back_a_repair_job(api, alice, workspace, sessions):
    repair = run_inline(
        actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    )
    response = api.post(f"{URL}/{repair.pk}/rollback")
    assert response.status_code == 202
    rollback = run_inline(Job.objects.get(pk=response.json()["id"]))
    assert (rollback.kind, rollback.source_job, rollback.done) == ("rollback", repair, 2)
    sessions[0].refresh_from_db()
    assert sessions[0].head.number == 2
    assert sessions[0].head.read() == sample("formats/claude_code.jsonl")


def test_it_refuses_to_roll_back_an_unfinished_job(api, alice, workspace, sessions):
    repair = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    response = api.post(f"{URL}/{repair.pk}/rollback")
    assert error_of(response) == (409, "conflict")
    assert error_of(api.post(f"{URL}/{repair.pk}/apply")) == (409, "conflict")


def test_it_applies_a_dry_run(api, alice, workspace, sessions):
    dry_run = run_inline(
        actions.do_start_job(
            workspace, sessions, policy="synthesize", kind="dry_run", acting_user=alice
        )
    )
    response = api.post(f"{URL}/{dry_run.pk}/apply")
    job = Job.objects.get(pk=response.json()["id"])
    assert response.status_code == 202
    assert (job.kind, job.source_job, job.total) == ("repair", dry_run, 2)


def test_it_hides_other_workspaces_jobs(api, other_workspace, bob, ingest):
    theirs = ingest(other_workspace, "theirs.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    job = run_inline(
        actions.do_start_job(other_workspace, [theirs], policy="synthesize", acting_user=bob)
    )
    assert api.get(URL).json()["results"] == []
    assert error_of(api.get(f"{URL}/{job.pk}")) == (404, "not_found")
    assert error_of(api.post(f"{URL}/{job.pk}/rollback")) == (404, "not_found")
    assert error_of(api.post(f"{URL}/{job.pk}/apply")) == (404, "not_found")


def test_it_lists_jobs_newest_first(api, alice, workspace, sessions):
    first = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    second = actions.do_start_job(workspace, sessions[:1], policy="discard", acting_user=alice)
    body = api.get(URL).json()
    assert [j["id"] for j in body["results"]] == [second.pk, first.pk]
    assert body["results"][1]["total"] == 3


def test_it_sends_an_export_jobs_archive(api, sessions):
    response = api.post(URL, {"kind": "export", "sessions": [sessions[0].pk]}, format="json")
    job = Job.objects.get(pk=response.json()["id"])
    assert error_of(api.get(f"{URL}/{job.pk}/archive")) == (404, "not_found")
    run_inline(job)
    assert api.get(f"{URL}/{job.pk}").json()["archive"] is True
    archive = api.get(f"{URL}/{job.pk}/archive")
    assert archive.status_code == 200
    assert archive["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(b"".join(archive.streaming_content))) as zipped:
        manifest = json.loads(zipped.read("manifest.json"))
    assert [s["session"] for s in manifest["sessions"]] == [sessions[0].pk]


@pytest.mark.django_db(transaction=True)
def test_it_creates_nothing_when_the_broker_is_down(api, sessions, monkeypatch):
    # As in the web test: patch the setting first, so that undoing it restores the real value.
    dead = "redis://127.0.0.1:1/0"
    monkeypatch.setattr(celery_app.conf, "broker_url", dead)
    monkeypatch.setenv("CELERY_BROKER_URL", dead)

    response = api.post(f"/api/sessions/{sessions[0].pk}/repair", {}, format="json")

    assert error_of(response) == (503, "broker_unavailable")
    assert "Nothing was started" in response.json()["error"]["message"]
    assert (Job.objects.count(), JobItem.objects.count()) == (0, 0)


@pytest.mark.parametrize("key", ["q", "format"])
def test_a_filter_value_of_only_nul_characters_is_refused_not_widened(api, sessions, key):
    body = {"kind": "dry_run", "filter": {key: "\u0000"}}
    response = api.post(URL, body, format="json")
    assert error_of(response) == (400, "bad_request")
    [message] = response.json()["error"]["fields"]["filter"][key]
    assert message.startswith("Only NUL characters were given")
    assert Job.objects.count() == 0
    # The session list refuses it too, instead of listing every session.
    assert error_of(api.get("/api/sessions", {key: "\x00"})) == (400, "bad_request")
