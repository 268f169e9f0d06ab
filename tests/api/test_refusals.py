"""What the API would otherwise misread silently: an unknown format, a second file, no token.

`GET /api/sessions?format=nonsense` listed no session, as if the workspace had
none of that format; an upload with two `file` parts stored the last and
dropped the first; `{"kind": "repair", "kind": "export"}` started an export.
All are refused by name. OPTIONS (DRF's metadata) needs a
token as every other method of an operation does; the schema is public.
"""

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework import parsers
from rest_framework.test import APIClient

from tests.api.conftest import error_of
from tests.helpers import sample
from transcripts.api import urls
from transcripts.api.parsers import JSONParser
from transcripts.formats import FORMATS
from transcripts.models import FaultKinds, Job, Session, WorkspacePolicy

URL = "/api/sessions"
pytestmark = pytest.mark.django_db


def test_an_unknown_format_filter_is_refused_with_the_formats_known(api, workspace, ingest):
    ingest(workspace, "faulty.jsonl", sample("formats/claude_code.jsonl"))
    response = api.get(URL, {"format": "nonsense"})
    assert error_of(response) == (400, "bad_request")
    (message,) = response.json()["error"]["fields"]["format"]
    assert "nonsense" in message
    for format_id in [*FORMATS, "unknown"]:
        assert format_id in message


def test_an_empty_format_filter_is_refused_as_an_empty_fault_is(api, workspace, ingest):
    ingest(workspace, "faulty.jsonl", sample("formats/claude_code.jsonl"))
    response = api.get(URL, {"format": ""})
    assert error_of(response) == (400, "bad_request")
    assert set(response.json()["error"]["fields"]) == {"format"}


def test_a_known_format_filter_still_lists_its_sessions(api, workspace, ingest):
    chat = ingest(workspace, "chat.json", sample("formats/openai_chat.json"))
    broken = ingest(workspace, "broken.jsonl", b"not json\n")
    assert [s["id"] for s in api.get(URL, {"format": "openai_chat"}).json()["results"]] == [chat.pk]
    # An unreadable file's format is "unknown": the session list's filter offers it too.
    assert [s["id"] for s in api.get(URL, {"format": "unknown"}).json()["results"]] == [broken.pk]
    assert api.get(URL, {"format": "codex"}).json()["count"] == 0


def test_a_job_filter_with_an_unknown_format_starts_nothing(api, workspace, ingest):
    ingest(workspace, "faulty.jsonl", sample("formats/claude_code.jsonl"))
    body = {"kind": "export", "filter": {"format": "nonsense"}}
    response = api.post("/api/jobs", body, format="json")
    assert error_of(response) == (400, "bad_request")
    (message,) = response.json()["error"]["fields"]["filter"]["format"]
    assert "nonsense" in message and "claude_code" in message
    assert Job.objects.count() == 0


def test_the_schema_lists_the_formats_a_filter_and_an_upload_take():
    schema = APIClient().get("/api/schema").json()
    components = schema["components"]["schemas"]
    [parameter] = [
        p for p in schema["paths"]["/api/sessions"]["get"]["parameters"] if p["name"] == "format"
    ]
    assert sorted(parameter["schema"]["enum"]) == sorted([*FORMATS, "unknown"])
    assert sorted(components["SessionFormatEnum"]["enum"]) == sorted([*FORMATS, "unknown"])
    job_filter = components["SessionFilterRequest"]["properties"]["format"]
    assert job_filter["allOf"] == [{"$ref": "#/components/schemas/SessionFormatEnum"}]
    upload = components["SessionUploadRequest"]["properties"]["format"]
    assert upload["allOf"] == [{"$ref": "#/components/schemas/FormatEnum"}]
    assert sorted(components["FormatEnum"]["enum"]) == sorted(FORMATS)


def test_an_upload_naming_an_unknown_format_lists_the_formats(api):
    body = {"file": SimpleUploadedFile("a.jsonl", b"{}\n"), "format": "rot13"}
    response = api.post(URL, body, format="multipart")
    assert error_of(response) == (400, "bad_request")
    (message,) = response.json()["error"]["fields"]["format"]
    assert message == f"“rot13” is no format; the formats are {', '.join(sorted(FORMATS))}."
    assert Session.objects.count() == 0


def test_an_upload_with_two_file_parts_is_refused_and_stores_nothing(api):
    first = sample("formats/claude_code.jsonl")
    body = {"file": [SimpleUploadedFile("a.jsonl", first), SimpleUploadedFile("b.jsonl", b"{}\n")]}
    response = api.post(URL, body, format="multipart")
    assert error_of(response) == (400, "bad_request")
    assert response.json()["error"]["fields"] == {
        "file": [
            "2 files were sent as “file”: an upload stores one session; "
            "send each file in a request of its own."
        ]
    }
    assert Session.objects.count() == 0


def test_an_upload_with_one_file_part_is_stored(api):
    body = {"file": SimpleUploadedFile("a.jsonl", sample("formats/claude_code.jsonl"))}
    assert api.post(URL, body, format="multipart").status_code == 201
    assert Session.objects.get().name == "a.jsonl"


@pytest.mark.parametrize("path", [URL, f"{URL}/1", f"{URL}/1/faults", "/api/jobs", "/api/policies"])
def test_options_needs_a_token_as_the_operation_does(path):
    # DRF checks permissions before it answers OPTIONS: its metadata (the fields a POST
    # takes) is for those who may call the operation. The schema is public for the rest.
    response = APIClient().options(path)
    assert error_of(response) == (401, "not_authenticated")
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    assert APIClient().options("/api/schema").status_code == 200


def test_options_with_a_token_describes_the_operation(api):
    response = api.options(URL)
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "Session List"
    assert set(response["Allow"].replace(" ", "").split(",")) >= {"GET", "POST", "OPTIONS"}
    assert set(body["actions"]["POST"]) == {"file", "name", "format", "live"}


def test_options_describes_a_job_by_the_fields_that_start_one(api):
    body = api.options("/api/jobs").json()
    assert set(body["actions"]["POST"]) == {"kind", "policy", "force", "sessions", "filter"}


def test_a_format_sent_as_a_file_part_is_refused_not_read_by_its_file_name(api):
    # A ChoiceField reads a value by its str, and a file's is its name: this chose Codex.
    body = {
        "file": SimpleUploadedFile("a.jsonl", sample("formats/claude_code.jsonl")),
        "format": SimpleUploadedFile("codex", b"claude_code"),
    }
    response = api.post(URL, body, format="multipart")
    assert error_of(response) == (400, "bad_request")
    assert response.json()["error"]["fields"] == {
        "format": ["A file was sent as this field: send its value as text."]
    }
    assert Session.objects.count() == 0


ONCE = "Given 2 times: send it once."


def post_json(client: APIClient, path: str, body: str) -> Any:
    """POST `body`, JSON text as written (a dict could not give a key twice)."""
    return client.generic("POST", path, body, content_type="application/json")


def test_a_job_whose_json_gives_a_key_twice_is_refused(api, workspace, ingest):
    ingest(workspace, "faulty.jsonl", sample("formats/claude_code.jsonl"))
    response = post_json(api, "/api/jobs", '{"kind": "repair", "kind": "export", "filter": {}}')
    assert error_of(response) == (400, "bad_request")
    assert response.json()["error"]["message"] == f"kind: {ONCE}"
    assert response.json()["error"]["fields"] == {"kind": [ONCE]}
    assert Job.objects.count() == 0


def test_a_json_key_given_twice_is_refused_as_a_form_field_given_twice_is(api):
    form = api.post(
        URL,
        {"file": SimpleUploadedFile("a.jsonl", b"{}\n"), "live": ["true", "false"]},
        format="multipart",
    )
    body = post_json(api, "/api/jobs", '{"kind": "export", "force": true, "force": false}')
    assert form.json()["error"]["fields"] == {"live": [ONCE]}
    assert body.json()["error"]["fields"] == {"force": [ONCE]}
    assert (form.status_code, body.status_code) == (400, 400)


def test_a_key_given_twice_inside_a_nested_object_is_refused_by_its_path(api):
    body = '{"name": "lax", "actions": {"missing_result": "synthesize", "missing_result": "drop"}}'
    response = post_json(api, "/api/policies", body)
    assert error_of(response) == (400, "bad_request")
    assert response.json()["error"]["message"] == f"actions: missing_result: {ONCE}"
    assert response.json()["error"]["fields"] == {"actions": {"missing_result": [ONCE]}}
    assert not WorkspacePolicy.objects.exists()


def test_every_key_given_more_than_once_is_named_with_its_count_at_any_depth(api):
    body = (
        '{"kind": "export", "filter": {"q": "a", "q": "b", "q": "c"},'
        ' "sessions": [1, {"id": 2, "id": 3, "more": {"x": 1, "x": 1}}], "force": false}'
    )
    response = post_json(api, "/api/jobs", body)
    assert error_of(response) == (400, "bad_request")
    assert response.json()["error"]["fields"] == {
        "filter": {"q": ["Given 3 times: send it once."]},
        "sessions": {"1": {"id": [ONCE], "more": {"x": [ONCE]}}},
    }
    assert Job.objects.count() == 0


def test_a_repair_whose_json_gives_a_key_twice_is_refused(api, workspace, ingest):
    session = ingest(workspace, "faulty.jsonl", sample("formats/claude_code.jsonl"))
    body = '{"dry_run": true, "dry_run": false}'
    response = post_json(api, f"/api/sessions/{session.pk}/repair", body)
    assert error_of(response) == (400, "bad_request")
    assert response.json()["error"]["fields"] == {"dry_run": [ONCE]}
    assert Job.objects.count() == 0


def test_a_json_body_that_gives_each_key_once_is_taken(api, workspace, ingest):
    ingest(workspace, "faulty.jsonl", sample("formats/claude_code.jsonl"))
    body = (
        '{"kind": "dry_run", "filter": {"q": "faulty", "fault": "missing_result"}, "force": true}'
    )
    response = post_json(api, "/api/jobs", body)
    assert response.status_code == 202
    job = Job.objects.get()
    assert (job.kind, job.force) == ("dry_run", True)
    assert job.selection == {"q": "faulty", "fault": "missing_result"}
    policy = '{"name": "mine", "actions": {"missing_result": "drop"}, "description": "mine"}'
    created = post_json(api, "/api/policies", policy)
    assert created.status_code == 201
    assert created.json()["actions"] == {"missing_result": "drop"}


def test_a_key_given_once_in_each_of_two_objects_is_no_repeat(api):
    # The inner "kind" reaches the filter's fields, which do not take it.
    response = post_json(api, "/api/jobs", '{"kind": "export", "filter": {"kind": "repair"}}')
    assert error_of(response) == (400, "bad_request")
    (message,) = response.json()["error"]["fields"]["filter"]["kind"]
    assert message.startswith("Unknown field; the fields are ")


def test_every_api_operation_reads_json_with_the_parser_that_refuses_repeats():
    views = [p.callback.view_class for p in urls.urlpatterns if hasattr(p.callback, "view_class")]
    json_parsers = {
        parser
        for view in views
        for parser in getattr(view, "parser_classes", [])
        if issubclass(parser, parsers.JSONParser)
    }
    assert len(views) > 10
    assert json_parsers == {JSONParser}


def test_a_json_body_nested_deeper_than_python_reads_is_a_bad_request(api):
    response = post_json(api, "/api/jobs", "[" * 100_000)
    assert error_of(response) == (400, "bad_request")
    assert response.json()["error"]["message"] == "JSON parse error - the body is nested too deep."


def test_an_unknown_fault_filter_lists_the_fault_kinds(api):
    response = api.get("/api/sessions", {"fault": "missing_resutl"})
    assert response.status_code == 400
    kinds = ", ".join(sorted(k for k, _ in FaultKinds.choices))
    assert "missing_result" in kinds
    assert f"“missing_resutl” is no fault kind; the kinds are {kinds}." in json.dumps(
        response.json(), ensure_ascii=False
    )
