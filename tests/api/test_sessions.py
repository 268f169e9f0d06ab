import hashlib
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.api.conftest import error_of
from tests.helpers import ORPHANED_CALL, sample
from tests.sync.conftest import call, user
from transcripts import actions
from transcripts import timeline as timeline_module
from transcripts.engine import ENGINE_VERSION
from transcripts.models import ApiToken, AuditRecord, Session, Timeline
from transcripts.queue import BrokerUnavailable

URL = "/api/sessions"
pytestmark = pytest.mark.django_db


def upload(api, data, filename="claude_code.jsonl", **fields):
    body = {"file": SimpleUploadedFile(filename, data), **fields}
    return api.post(URL, body, format="multipart")


def test_it_stores_an_upload_as_revision_0(api, alice, workspace):
    data = sample("formats/claude_code.jsonl")
    response = upload(api, data)
    session = Session.objects.get()
    assert response.status_code == 201
    assert response.json() == {
        "id": session.pk,
        "name": "claude_code.jsonl",
        "format": "claude_code",
        "record_count": 11,
        "fault_counts": {"missing_result": 1},
        "analysed": True,
        "error": "",
        "head": 0,
        "live": False,
        "last_write": None,
        "live_until": None,
        "created": session.created.isoformat().replace("+00:00", "Z"),
    }
    assert session.head.read() == data
    assert (session.workspace, session.created_by) == (workspace, alice)
    assert session.api_token == ApiToken.objects.get()
    audit = AuditRecord.objects.get()
    assert (audit.op, audit.acting_user, audit.revision_to) == ("ingest", alice, session.head)


def test_it_takes_a_name_and_a_format(api):
    data = sample("formats/claude_code.jsonl")
    response = upload(api, data, filename="upload.bin", name="dir/agent.jsonl", format="codex")
    body = response.json()
    assert response.status_code == 201
    # As Codex, the Claude Code file is unreadable: the chosen format is kept, with the reason.
    assert (body["name"], body["format"]) == ("agent.jsonl", "codex")
    assert body["error"].startswith("agent.jsonl")


def test_it_marks_a_live_upload(api):
    data = user("u1", None, "list the files") + call("a1", "u1", "toolu_1")
    response = upload(api, data, live="true")
    session = Session.objects.get()
    assert response.status_code == 201
    assert response.json()["live"] is True
    assert session.is_live()
    # Its last call awaits its result within the grace period; an upload not live has none.
    assert session.fault_counts == {"pending_result": 1}
    assert upload(api, data).json()["fault_counts"] == {"missing_result": 1}


def test_it_keeps_an_unreadable_file_and_says_why(api):
    data = b'{"type":"user"\n\xff\xfe not even utf-8'
    body = upload(api, data, filename="broken.jsonl").json()
    assert body["format"] == "unknown"
    assert body["error"].startswith("broken.jsonl")
    assert Session.objects.get().head.read() == data


def test_it_keeps_an_empty_file(api):
    body = upload(api, b"", filename="empty.jsonl").json()
    assert (body["name"], body["record_count"]) == ("empty.jsonl", 0)
    assert body["error"].startswith("empty.jsonl")
    assert Session.objects.get().head.read() == b""


@pytest.mark.parametrize(("field", "value"), [("format", ""), ("format", "rot13"), ("live", "")])
def test_it_refuses_an_empty_or_unknown_choice(api, field, value):
    response = upload(api, b"{}\n", **{field: value})
    assert error_of(response) == (400, "bad_request")
    assert set(response.json()["error"]["fields"]) == {field}


def test_it_refuses_a_field_given_twice(api):
    body = {"file": SimpleUploadedFile("a.jsonl", b"{}\n"), "live": ["true", "false"]}
    response = api.post(URL, body, format="multipart")
    assert error_of(response) == (400, "bad_request")
    assert set(response.json()["error"]["fields"]) == {"live"}
    assert error_of(api.get(URL, {"q": ["a", "b"]})) == (400, "bad_request")


def test_it_requires_a_file(api):
    response = api.post(URL, {"name": "x.jsonl"}, format="multipart")
    status, code = error_of(response)
    assert (status, code) == (400, "bad_request")
    (message,) = response.json()["error"]["fields"]["file"]
    assert message.startswith("No file was submitted: send the session as the multipart field")


def test_it_refuses_json_for_an_upload(api):
    assert error_of(api.post(URL, {"file": "x"}, format="json")) == (415, "unsupported_media_type")


def test_it_lists_sessions_newest_first_with_filters(api, workspace, ingest):
    faulty = ingest(workspace, "faulty.jsonl", sample("formats/claude_code.jsonl"))
    healthy = ingest(
        workspace, "healthy.jsonl", sample("cases/02_cc-parallel-results-split-lines.jsonl")
    )
    chat = ingest(workspace, "chat.json", sample("formats/openai_chat.json"))

    body = api.get(URL).json()
    assert body["count"] == 3
    assert [s["id"] for s in body["results"]] == [chat.pk, healthy.pk, faulty.pk]
    by_fault = api.get(URL, {"fault": "missing_result"}).json()["results"]
    assert {s["id"] for s in by_fault} == {faulty.pk, chat.pk}
    assert [s["id"] for s in api.get(URL, {"format": "openai_chat"}).json()["results"]] == [chat.pk]
    assert [s["id"] for s in api.get(URL, {"q": "HEALTH"}).json()["results"]] == [healthy.pk]


def test_it_pages_the_list(api, workspace, ingest):
    sessions = [ingest(workspace, f"s{n}.jsonl", b"{}\n") for n in range(3)]
    page = api.get(URL, {"page_size": 2, "page": 2}).json()
    assert page["count"] == 3
    assert [s["id"] for s in page["results"]] == [sessions[0].pk]
    assert page["next"] is None and page["previous"] is not None
    assert error_of(api.get(URL, {"page": 9})) == (404, "not_found")


@pytest.mark.parametrize("fault", ["lost_socks", ""])
def test_it_refuses_an_unknown_fault_kind(api, fault):
    response = api.get(URL, {"fault": fault})
    assert error_of(response) == (400, "bad_request")
    assert "fault" in response.json()["error"]["fields"]


@pytest.mark.parametrize("param", ["page", "page_size"])
@pytest.mark.parametrize("value", ["0", "-1", "ten", ""])
def test_it_refuses_a_page_that_is_no_positive_integer(api, param, value):
    assert error_of(api.get(URL, {param: value})) == (400, "bad_request")


def test_it_shows_one_session(api, workspace, ingest):
    session = ingest(workspace, "faulty.jsonl", sample("formats/claude_code.jsonl"))
    body = api.get(f"{URL}/{session.pk}").json()
    assert (body["id"], body["head"], body["fault_counts"]) == (
        session.pk,
        0,
        {"missing_result": 1},
    )


def test_it_lists_a_sessions_faults(api, workspace, ingest):
    session = ingest(workspace, "faulty.jsonl", sample("formats/claude_code.jsonl"))
    body = api.get(f"{URL}/{session.pk}/faults").json()
    assert (body["session"], body["revision"], body["format"], body["error"]) == (
        session.pk,
        0,
        "claude_code",
        "",
    )
    [fault] = body["faults"]
    assert (fault["kind"], fault["tool_call_id"]) == ("missing_result", ORPHANED_CALL)
    assert "tool_use" in fault["error"]


def test_it_hides_other_workspaces_sessions(api, other_workspace, ingest, bob):
    theirs = ingest(other_workspace, "theirs.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    for path in ("", "/faults", "/revisions", "/revisions/0/content"):
        assert error_of(api.get(f"{URL}/{theirs.pk}{path}")) == (404, "not_found")
    assert error_of(api.post(f"{URL}/{theirs.pk}/repair", {}, format="json")) == (404, "not_found")


# One set of upload limits for every way in, applied while the bytes arrive.


def test_it_refuses_a_file_over_the_size_limit_unstored(api, settings):
    settings.UPLOAD_MAX_FILE_SIZE = 1000
    response = upload(api, b"x" * 5000, filename="big.jsonl")
    assert error_of(response) == (413, "too_large")
    assert response.json()["error"]["message"] == (
        "“big.jsonl” is more than 1000 bytes; each session may be at most 1000 bytes. "
        "Nothing was stored."
    )
    assert Session.objects.count() == 0


def test_an_archive_is_stored_as_sent_within_the_size_of_one_session(api, settings):
    settings.UPLOAD_MAX_FILE_SIZE = 1000
    settings.UPLOAD_MAX_TOTAL_SIZE = 100_000
    assert error_of(upload(api, b"z" * 5000, filename="s.zip")) == (413, "too_large")
    body = upload(api, b"z" * 900, filename="s.zip").json()
    assert (body["name"], body["format"]) == ("s.zip", "unknown")
    assert Session.objects.get().head.read() == b"z" * 900


def test_it_refuses_more_files_than_the_limit(api, settings):
    settings.UPLOAD_MAX_FILES = 1
    body = {"file": [SimpleUploadedFile(f"{n}.jsonl", b"{}\n") for n in range(2)]}
    response = api.post(URL, body, format="multipart")
    assert error_of(response) == (413, "too_large")
    assert (
        "This upload holds more than 1 files; one upload may hold at most 1."
        in (response.json()["error"]["message"])
    )
    assert Session.objects.count() == 0


def test_it_says_what_is_wrong_with_a_name_that_names_nothing(api):
    boundary = "pairfix-boundary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename=".."\r\n'
        "Content-Type: application/octet-stream\r\n\r\n{}\n\r\n"
        f"--{boundary}--\r\n"
    ).encode()
    response = api.generic(
        "POST", URL, body, content_type=f"multipart/form-data; boundary={boundary}"
    )
    assert error_of(response) == (400, "bad_request")
    assert "“..” is not a usable file name" in response.json()["error"]["message"]
    assert Session.objects.count() == 0


def test_an_upload_is_stored_with_the_hash_taken_on_the_way(api):
    data = sample("formats/claude_code.jsonl")
    upload(api, data)
    head = Session.objects.get().head
    assert head.sha256 == hashlib.sha256(data).hexdigest()
    assert (head.size, head.read()) == (len(data), data)


@pytest.mark.parametrize(
    ("name", "shown"),
    [("..", ".."), (".", "."), ("x/..", "x/.."), ("\u200b\u200d", "[U+200B][U+200D]")],
)
def test_a_name_field_that_names_nothing_is_refused_as_a_file_name_is(api, name, shown):
    response = upload(api, sample("formats/claude_code.jsonl"), name=name)
    assert error_of(response) == (400, "bad_request")
    assert response.json()["error"]["fields"]["name"] == [
        f"“{shown}” is not a usable file name: once folders, invisible and control characters "
        "are taken out, nothing (or only “.” or “..”) is left. Rename the file and upload it again."
    ]
    assert Session.objects.count() == 0


def test_a_name_field_is_cleaned_as_a_file_name_is(api):
    response = upload(api, sample("formats/claude_code.jsonl"), name="a\\b/\u202egnp.exe\u200b ")
    assert response.status_code == 201
    assert response.json()["name"] == Session.objects.get().name == "gnp.exe"


def test_a_nul_only_name_is_refused(api):
    response = upload(api, sample("formats/claude_code.jsonl"), name="\x00\x00")
    assert error_of(response) == (400, "bad_request")
    assert "Only NUL characters were given" in response.json()["error"]["fields"]["name"][0]
    assert Session.objects.count() == 0


def test_a_name_longer_than_the_schema_allows_is_refused_as_sent(api):
    # 1,001 characters as sent, one a NUL: the schema's maxLength (1,000) counts them all.
    response = upload(api, sample("formats/claude_code.jsonl"), name="a\x00" + "b" * 999)
    assert error_of(response) == (400, "bad_request")
    assert response.json()["error"]["fields"]["name"] == [
        "Ensure this field has no more than 1000 characters."
    ]
    assert Session.objects.count() == 0
    # At the limit it is taken, the NUL dropped.
    assert (
        upload(api, sample("formats/claude_code.jsonl"), name="a\x00" + "b" * 998).status_code
        == 201
    )
    assert Session.objects.get().name.startswith("abbb")  # cut short as any long name is


def _timeline_of(session_id):
    """Return the default timeline of session `session_id`'s head, as its page would make it."""
    session = Session.objects.get(pk=session_id)
    return Timeline.objects.create(
        revision=session.head, policy="synthesize", live=False, engine_version=ENGINE_VERSION
    )


def test_a_large_upload_is_stored_first_and_counted_by_a_worker(
    api, settings, django_capture_on_commit_callbacks, monkeypatch
):
    settings.INGEST_INLINE_BYTES = 100
    sent = []
    monkeypatch.setattr(
        "transcripts.tasks.count_session.apply_async", lambda args, **_: sent.append(*args)
    )
    data = sample("formats/claude_code.jsonl")
    with django_capture_on_commit_callbacks(execute=True):
        response = upload(api, data)
    body = response.json()
    assert response.status_code == 201
    assert (body["analysed"], body["format"], body["record_count"], body["fault_counts"]) == (
        False,
        "unknown",
        0,
        {},
    )
    session = Session.objects.get()
    assert session.head.read() == data
    assert sent == [session.pk]

    assert actions.do_count_session(session.pk)
    assert not actions.do_count_session(session.pk)  # a task run twice counts once
    body = api.get(f"{URL}/{session.pk}").json()
    assert (body["analysed"], body["format"], body["record_count"], body["fault_counts"]) == (
        True,
        "claude_code",
        11,
        {"missing_result": 1},
    )


def test_a_large_upload_is_counted_by_its_timeline_build_if_its_page_comes_first(
    api, settings, monkeypatch
):
    settings.INGEST_INLINE_BYTES = 100
    monkeypatch.setattr("transcripts.tasks.count_session.apply_async", lambda *a, **k: None)
    session_id = upload(api, sample("formats/claude_code.jsonl")).json()["id"]
    assert actions.do_build_timeline(_timeline_of(session_id).pk)
    body = api.get(f"{URL}/{session_id}").json()
    assert (body["analysed"], body["format"], body["record_count"], body["fault_counts"]) == (
        True,
        "claude_code",
        11,
        {"missing_result": 1},
    )
    assert not actions.do_count_session(session_id)


def test_a_large_upload_keeps_the_format_it_names_and_gets_its_error_when_read(
    api, settings, monkeypatch
):
    settings.INGEST_INLINE_BYTES = 100
    monkeypatch.setattr("transcripts.tasks.count_session.apply_async", lambda *a, **k: None)
    body = upload(api, sample("formats/claude_code.jsonl"), format="codex").json()
    assert (body["analysed"], body["format"], body["error"]) == (False, "codex", "")
    assert actions.do_count_session(body["id"])
    session = Session.objects.get()
    assert (session.analysed, session.format) == (True, "codex")
    assert session.error.startswith("claude_code.jsonl")


def test_a_large_upload_is_stored_while_the_broker_is_down(api, settings, monkeypatch):
    settings.INGEST_INLINE_BYTES = 100

    def down() -> None:
        raise BrokerUnavailable("The task queue cannot be reached.")

    monkeypatch.setattr("transcripts.queue.check_broker", down)
    response = upload(api, sample("formats/claude_code.jsonl"))
    assert response.status_code == 201
    assert response.json()["analysed"] is False
    assert Session.objects.get().head.read() == sample("formats/claude_code.jsonl")


def test_a_live_upload_is_read_during_the_upload_whatever_its_size(api, settings):
    settings.INGEST_INLINE_BYTES = 100
    data = user("u1", None, "list the files") + call("a1", "u1", "toolu_1")
    body = upload(api, data, live="true").json()
    assert (body["analysed"], body["fault_counts"]) == (True, {"pending_result": 1})


def test_a_large_upload_whose_build_fails_says_so(api, settings, monkeypatch):
    settings.INGEST_INLINE_BYTES = 100
    monkeypatch.setattr("transcripts.tasks.count_session.apply_async", lambda *a, **k: None)
    session_id = upload(api, sample("formats/claude_code.jsonl")).json()["id"]

    def broken(*args, **kwargs):
        raise ValueError("engine bug")

    monkeypatch.setattr("transcripts.timeline.analyze", broken)
    assert actions.do_build_timeline(_timeline_of(session_id).pk)
    body = api.get(f"{URL}/{session_id}").json()
    assert body["analysed"] is True
    assert body["error"] == "claude_code.jsonl: not read (ValueError: engine bug)"


def test_a_build_out_of_memory_leaves_a_large_upload_to_be_counted(api, settings, monkeypatch):
    # The build holds more than the count: running out of it says nothing of the file.
    settings.INGEST_INLINE_BYTES = 100
    monkeypatch.setattr("transcripts.tasks.count_session.apply_async", lambda *a, **k: None)
    session_id = upload(api, sample("formats/claude_code.jsonl")).json()["id"]
    real = timeline_module.analyze

    def out_of_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr("transcripts.timeline.analyze", out_of_memory)
    assert actions.do_build_timeline(_timeline_of(session_id).pk)
    body = api.get(f"{URL}/{session_id}").json()
    assert (body["analysed"], body["error"]) == (False, "")
    monkeypatch.setattr("transcripts.timeline.analyze", real)
    assert actions.do_count_session(session_id)
    body = api.get(f"{URL}/{session_id}").json()
    assert (body["analysed"], body["format"], body["error"]) == (True, "claude_code", "")
    assert body["fault_counts"] == {"missing_result": 1}


@pytest.mark.django_db(transaction=True)
def test_a_worker_counts_a_large_upload(api, settings, celery_worker):
    settings.INGEST_INLINE_BYTES = 100
    session_id = upload(api, sample("formats/claude_code.jsonl")).json()["id"]
    deadline = time.monotonic() + 60
    while not Session.objects.get(pk=session_id).analysed:
        assert time.monotonic() < deadline, "no worker counted the session"
        time.sleep(0.1)
    body = api.get(f"{URL}/{session_id}").json()
    assert (body["format"], body["record_count"], body["fault_counts"]) == (
        "claude_code",
        11,
        {"missing_result": 1},
    )


def test_a_file_part_whose_name_is_not_utf8_is_refused_saying_so(api):
    boundary = "pairfix-boundary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="caf'.encode()
        + b'\xe9.jsonl"\r\nContent-Type: application/octet-stream\r\n\r\n{}\n\r\n'
        + f"--{boundary}--\r\n".encode()
    )
    response = api.generic(
        "POST", URL, body, content_type=f"multipart/form-data; boundary={boundary}"
    )
    assert error_of(response) == (400, "bad_request")
    assert response.json()["error"]["fields"]["file"] == [
        "No file was submitted: send the session as the multipart field “file”, with a UTF-8 "
        "file name (a part whose file name is not UTF-8 is dropped before Pairfix sees it: "
        "rename the file, or send it under another name and give its name in “name”)."
    ]
    assert Session.objects.count() == 0
