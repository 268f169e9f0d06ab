"""The audit page: filters, CSV and JSON Lines exports, append-only records."""

import base64
import csv
import io
import json

import pytest
from django.urls import reverse

from tests.helpers import ORPHANED_CALL, run_inline, sample
from transcripts import actions, views
from transcripts.models import AuditRecord

URL = reverse("transcripts:audit_list")
CSV_URL = reverse("transcripts:audit_export_csv")
JSONL_URL = reverse("transcripts:audit_export_jsonl")
DISPLACED = "cases/10_openclaw-displaced-dup-orphan-results.jsonl"

pytestmark = pytest.mark.django_db


@pytest.fixture
def trail(alice, bob, workspace, other_workspace, membership, ingest):
    """Two repair jobs in alice's workspace (one by bob) and one in bob's."""
    claude = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    displaced = ingest(workspace, "displaced.jsonl", sample(DISPLACED))
    first = run_inline(
        actions.do_start_job(workspace, [claude], policy="synthesize", acting_user=alice)
    )
    second = run_inline(
        actions.do_start_job(workspace, [displaced], policy="synthesize", acting_user=bob)
    )
    return {"claude": claude, "displaced": displaced, "first": first, "second": second}


def ops(client, **query):
    """Return (op, tool call id) of each record the audit page shows for `query`."""
    html = client.get(URL, query).content.decode()
    found = []
    for row in html.split('<tr class="audit-record')[1:]:
        op = row.split("</td>")[5].rsplit(">", 1)[1]
        call = row.split("<code>", 1)[1].split("</code>", 1)[0]
        found.append((op, call))
    return found


def test_it_requires_login(client):
    assert client.get(URL).status_code == 302
    assert client.get(CSV_URL).status_code == 302


def test_it_shows_every_change_of_the_users_workspaces(alice_client, trail):
    found = ops(alice_client)
    # Two uploads, then one op for claude_code and three for the displaced session.
    assert found == [
        ("ingest", ""),
        ("ingest", ""),
        ("insert_result", ORPHANED_CALL),
        ("move_result", "call_syn_cat_02"),
        ("drop_result", "call_syn_cat_02"),
        ("drop_result", "call_syn_old_99"),
    ]


def test_it_hides_other_workspaces_records(client, bob, trail, other_workspace, ingest):
    ingest(other_workspace, "bobs.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    charlie = type(bob).objects.create_user("charlie", password="x")
    client.force_login(charlie)
    assert ops(client) == []
    assert client.get(JSONL_URL).getvalue() == b""


def test_it_filters_by_job_session_fault_kind_and_user(alice_client, alice, bob, trail):
    assert ops(alice_client, job=trail["first"].pk) == [("insert_result", ORPHANED_CALL)]
    assert len(ops(alice_client, session=trail["displaced"].pk)) == 4
    assert ops(alice_client, fault_kind="missing_result") == [("insert_result", ORPHANED_CALL)]
    assert len(ops(alice_client, user=bob.pk)) == 3
    assert ops(alice_client, user=bob.pk, fault_kind="orphaned_result") == [
        ("drop_result", "call_syn_old_99")
    ]
    assert ops(alice_client, user=alice.pk, fault_kind="orphaned_result") == []


def test_it_refuses_a_user_outside_the_users_workspaces(alice_client, trail, django_user_model):
    stranger = django_user_model.objects.create_user("stranger", password="x")
    html = alice_client.get(URL, {"user": stranger.pk}).content.decode()
    assert "Select a valid choice." in html


def test_it_shows_a_page_at_a_time(alice_client, trail, monkeypatch):
    monkeypatch.setattr(views, "AUDIT_PER_PAGE", 4)
    assert len(ops(alice_client)) == 4
    assert ops(alice_client, page=2) == [
        ("drop_result", "call_syn_cat_02"),
        ("drop_result", "call_syn_old_99"),
    ]
    html = alice_client.get(URL, {"fault_kind": "", "page": 1}).content.decode()
    assert 'href="?fault_kind=&amp;page=2">next</a>' in html


def test_it_escapes_transcript_content(alice_client, alice, workspace, ingest):
    hostile = sample("formats/claude_code.jsonl").replace(
        ORPHANED_CALL.encode(), b"<img src=x onerror=alert(1)>"
    )
    session = ingest(workspace, "<b>name</b>.jsonl", hostile)
    run_inline(actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice))
    html = alice_client.get(URL).content.decode()
    assert "<img src=x" not in html and "<b>name</b>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_it_exports_csv_with_the_filters(alice_client, trail):
    response = alice_client.get(CSV_URL, {"session": trail["displaced"].pk})
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="pairfix-audit.csv"'
    table = list(csv.reader(io.StringIO(response.getvalue().decode())))
    assert tuple(table[0]) == AuditRecord.EXPORT_FIELDS
    records = [dict(zip(table[0], row, strict=True)) for row in table[1:]]
    assert [r["op"] for r in records] == [
        "ingest",
        *AuditRecord.objects.filter(job=trail["second"]).values_list("op", flat=True),
    ]
    dropped = next(r for r in records if r["tool_call_id"] == "call_syn_old_99")
    line = sample(DISPLACED).splitlines()[7]
    assert base64.b64decode(dropped["removed_bytes_base64"]) == line
    assert dropped["removed_size"] == str(len(line))
    assert (dropped["revision_from"], dropped["revision_to"]) == ("0", "1")
    assert (dropped["acting_user"], dropped["policy"]) == ("bob", "synthesize")
    assert dropped["job"] == str(trail["second"].pk)
    assert dropped["session_name"] == "displaced.jsonl"


def test_csv_defuses_text_a_spreadsheet_would_run(alice_client, workspace, ingest):
    ingest(workspace, '=HYPERLINK("http://x")', sample("formats/claude_code.jsonl"))
    table = list(csv.reader(io.StringIO(alice_client.get(CSV_URL).getvalue().decode())))
    assert table[1][table[0].index("session_name")] == '\'=HYPERLINK("http://x")'
    # JSON Lines keeps the exact name.
    line = json.loads(alice_client.get(JSONL_URL).getvalue())
    assert line["session_name"] == '=HYPERLINK("http://x")'


def test_it_exports_json_lines(alice_client, trail):
    response = alice_client.get(JSONL_URL, {"job": trail["first"].pk})
    assert response["Content-Type"] == "application/x-ndjson"
    [line] = response.getvalue().decode().splitlines()
    record = json.loads(line)
    audit = AuditRecord.objects.get(job=trail["first"])
    assert record == {
        "id": audit.pk,
        "created_at": audit.created_at.isoformat(),
        "job": trail["first"].pk,
        "source": None,
        "acting_user": "alice",
        "workspace": trail["claude"].workspace_id,
        "session": trail["claude"].pk,
        "session_name": "claude_code.jsonl",
        "revision_from": 0,
        "revision_to": 1,
        "op": "insert_result",
        "fault_kind": "missing_result",
        "tool_call_id": ORPHANED_CALL,
        "record": audit.record,
        "block": audit.block,
        "anchor": audit.anchor,
        "target": audit.target,
        "span_start": None,
        "span_end": None,
        "policy": "synthesize",
        "policy_row": "synthesize: missing_result -> synthesize",
        "engine_version": audit.engine_version,
        "removed_size": None,
        "removed_bytes_base64": None,
        "note": "",
    }
    assert record["anchor"] == 8


def test_audit_records_have_no_update_or_delete_path(trail):
    record = AuditRecord.objects.filter(job=trail["first"]).get()
    with pytest.raises(ValueError, match="append-only"):
        AuditRecord.objects.filter(pk=record.pk).update(op="drop_call")
    with pytest.raises(ValueError, match="append-only"):
        AuditRecord.objects.filter(pk=record.pk).delete()
    with pytest.raises(ValueError, match="append-only"):
        record.delete()
    with pytest.raises(ValueError, match="append-only"):
        record.save()
    record.refresh_from_db()
    assert record.op == "insert_result"


def test_the_admin_shows_audit_records_read_only(client, django_user_model, trail):
    admin = django_user_model.objects.create_superuser("root", password="x")
    client.force_login(admin)
    record = AuditRecord.objects.filter(job=trail["first"]).get()
    change = reverse("admin:transcripts_auditrecord_change", args=[record.pk])
    delete = reverse("admin:transcripts_auditrecord_delete", args=[record.pk])
    page = client.get(change).content.decode()
    assert 'type="submit"' not in page.split('id="auditrecord_form"', 1)[1]
    assert client.post(change, {"op": "drop_call"}).status_code == 403
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert AuditRecord.objects.filter(pk=record.pk, op="insert_result").exists()
