import pytest

from tests import lone_surrogate
from tests.api.conftest import error_of
from tests.helpers import sample
from tests.sync.conftest import call, reply, result, user
from transcripts.models import AuditRecord, Revision

pytestmark = pytest.mark.django_db

START = user("u1", None, "list the files") + call("a1", "u1", "toolu_1")
ANSWER = result("u2", "a1", "toolu_1") + reply("a2", "u2")
NDJSON = "application/x-ndjson"


@pytest.fixture
def session(workspace, ingest):
    return ingest(workspace, "agent.jsonl", START)


def append(api, session, data, content_type=NDJSON):
    return api.post(f"/api/sessions/{session.pk}/records", data, content_type=content_type)


def test_it_appends_lines_as_a_new_head(api, alice, session, settings):
    settings.LIVE_GRACE = 60
    response = append(api, session, ANSWER)
    body = response.json()
    head = Revision.objects.get(session=session, number=1)
    assert response.status_code == 200
    assert (body["head"], body["record_count"], body["fault_counts"]) == (1, 4, {})
    assert body["live"] is True
    assert head.read() == START + ANSWER
    assert (head.origin, head.created_by, head.parent.number) == ("api", alice, 0)
    audit = AuditRecord.objects.get(op="append")
    assert (audit.acting_user, audit.revision_to) == (alice, head)
    assert (audit.span_start, audit.span_end) == (len(START), len(START + ANSWER))


def test_it_takes_application_jsonl_too(api, session):
    assert append(api, session, ANSWER, "application/jsonl").status_code == 200


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"", "empty"),
        (b'{"type":"user"}', "partial_line"),
        (b'{"a":1}\n{oops\n', "bad_record"),
        (b"[1]\n", "bad_record"),
    ],
)
def test_it_refuses_what_is_not_whole_json_object_lines(api, session, data, code):
    response = append(api, session, data)
    assert error_of(response) == (400, code)
    assert response.json()["error"]["message"].startswith("agent.jsonl: ")
    assert session.revisions.count() == 1


def test_it_refuses_to_append_to_a_json_document(api, workspace, ingest):
    chat = ingest(workspace, "chat.json", sample("formats/openai_chat.json"))
    response = append(api, chat, ANSWER)
    assert error_of(response) == (409, "not_appendable")
    assert "is one JSON document" in response.json()["error"]["message"]


def test_it_refuses_a_body_over_the_upload_limit(api, session, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = len(ANSWER) - 1
    assert error_of(append(api, session, ANSWER)) == (413, "too_large")
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = len(ANSWER)
    assert append(api, session, ANSWER).status_code == 200


def test_it_refuses_another_body_type(api, session):
    response = append(api, session, '{"a": 1}\n', "application/json")
    assert error_of(response) == (415, "unsupported_media_type")


def test_it_hides_other_workspaces_sessions(api, other_workspace, ingest, bob):
    theirs = ingest(other_workspace, "theirs.jsonl", START, user=bob)
    assert error_of(append(api, theirs, ANSWER)) == (404, "not_found")
    assert theirs.revisions.count() == 1


def test_a_retried_append_with_head_is_written_once(api, session):
    url = f"/api/sessions/{session.pk}/records?head=0"
    first = api.post(url, ANSWER, content_type=NDJSON)
    retry = api.post(url, ANSWER, content_type=NDJSON)

    assert first.status_code == 200 and first.json()["head"] == 1
    assert error_of(retry) == (409, "head_moved")
    assert "the head is revision 1, not 0: nothing was appended" in retry.json()["error"]["message"]
    assert session.revisions.count() == 2
    assert Revision.objects.get(session=session, number=1).read() == START + ANSWER


@pytest.mark.parametrize("head", ["-1", "x", "1.5", "٣", ""])
def test_a_head_that_is_no_revision_number_is_refused(api, session, head):
    response = api.post(
        f"/api/sessions/{session.pk}/records?head={head}", ANSWER, content_type=NDJSON
    )
    assert error_of(response) == (400, "bad_request")
    assert session.revisions.count() == 1


def test_a_line_with_a_lone_surrogate_escape_appends_and_reads_back(api, session):
    # Half an emoji, as JSON.stringify writes a string a Node program cut mid-pair.
    cut = ANSWER.replace(b'"content":"ok"', b'"content":"ok \\ud83d"', 1)
    assert cut != ANSWER
    response = append(api, session, cut)
    assert response.status_code == 200
    assert (response.json()["record_count"], response.json()["fault_counts"]) == (4, {})
    assert Revision.objects.get(session=session, number=1).read() == START + cut


def test_faults_of_a_call_whose_id_holds_a_lone_surrogate_are_served(api, workspace, ingest):
    data = lone_surrogate.session().replace(
        b"toolu_01CCCCCCCCCCCCCCCCCCCCCC", b"toolu_01C\\ud83dCC"
    )
    session = ingest(workspace, "cut.jsonl", data)
    response = api.get(f"/api/sessions/{session.pk}/faults")
    assert response.status_code == 200
    # The id comes back as the file holds it: JSON's escape of the lone surrogate.
    assert b'"tool_call_id":"toolu_01C\\ud83dCC"' in response.content
    faults = response.json()["faults"]
    assert [(f["kind"], f["tool_call_id"]) for f in faults] == [
        ("malformed_call", "toolu_01C\ud83dCC"),
        ("missing_result", "toolu_01C\ud83dCC"),
    ]
