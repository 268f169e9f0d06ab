import json
import re

import pytest
from django.urls import reverse

from tests.helpers import ORPHANED_CALL, run_inline, sample
from transcripts import actions
from transcripts.core.policy import INTERRUPTED_TEXT
from transcripts.models import TimelineRow, WorkspacePolicy

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(workspace, ingest):
    return ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))


def test_it_shows_the_fault_kind_and_tool_call_id(alice_client, session):
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert '<div class="fault missing_result">' in html
    assert f'<code class="tool-call-id">{ORPHANED_CALL}</code>' in html
    assert "Provider error: " in html
    assert "tool_use" in html


def test_it_marks_the_inserted_result(alice_client, session):
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert re.search(r'<tr id="p-\d+" data-pos="\d+" tabindex="-1" class="row inserted">', html)
    assert '<span class="label">inserted</span>' in html
    assert '<span class="op insert_result"' in html


def test_it_renders_the_repaired_side_under_the_chosen_policy(alice_client, session):
    html = alice_client.get(session.get_absolute_url(), {"policy": "discard"}).content.decode()
    assert "Repaired (discard)" in html
    assert 'class="row inserted"' not in html
    assert "?policy=discard" in html


def test_it_renders_only_the_timeline_for_htmx(alice_client, session):
    response = alice_client.get(
        session.get_absolute_url(), {"policy": "discard"}, headers={"HX-Request": "true"}
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="timeline">')
    assert "<html" not in html
    assert "Repaired (discard)" in html


def test_it_rejects_an_unknown_policy(alice_client, session):
    response = alice_client.get(session.get_absolute_url(), {"policy": "nope"})
    assert response.status_code == 400


def test_it_escapes_transcript_content(alice_client, workspace, ingest):
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": hostile},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_<b>x</b>",
                        "type": "function",
                        "function": {"name": "run", "arguments": "{}"},
                    }
                ],
            },
        ],
    }
    session = ingest(workspace, "hostile.json", json.dumps(body).encode())
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert "<script>alert(1)" not in html
    assert "<img src=x" not in html
    assert "<b>x</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_it_hides_other_workspaces_sessions(alice_client, other_workspace, bob, ingest):
    theirs = ingest(other_workspace, "b.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    assert alice_client.get(theirs.get_absolute_url()).status_code == 404


def test_it_lists_the_revisions(alice_client, session):
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert "0 (raw)" in html
    assert reverse("transcripts:download_revision", args=[session.pk, 0]) in html


def test_it_rejects_post(alice_client, session):
    assert alice_client.post(session.get_absolute_url()).status_code == 405


def test_it_labels_the_raw_upload_when_the_head_is_revision_0(alice_client, session):
    html = alice_client.get(session.get_absolute_url()).content.decode()
    raw = reverse("transcripts:download_revision", args=[session.pk, 0])
    assert '<th scope="col">Raw upload (revision 0)</th>' in html
    assert f'<a href="{raw}" download>Download revision 0 (original)</a>' in html
    assert "Download the original" not in html
    assert ">Download repaired (synthesize)</a>" in html


def test_it_labels_the_revision_the_left_side_shows_after_a_repair(
    alice_client, alice, workspace, session
):
    job = actions.do_start_job(workspace, [session], policy="discard", acting_user=alice)
    run_inline(job)
    html = alice_client.get(session.get_absolute_url(), {"policy": "native"}).content.decode()
    head = reverse("transcripts:download_revision", args=[session.pk, 1])
    raw = reverse("transcripts:download_revision", args=[session.pk, 0])
    assert '<th scope="col">Before: revision 1</th>' in html
    assert "Raw upload (revision 0)</th>" not in html
    assert f'<a href="{head}" download>Download revision 1</a>' in html
    assert f'<a href="{raw}" download>Download the original (revision 0)</a>' in html
    assert ">Download repaired (native)</a>" in html
    # The revisions table says what made each one: an upload, then a repair under discard.
    rows = re.findall(r"<td>(\d+)(?: \(raw\))?</td>\s*<td>([^<]*)</td>\s*<td>([^<]*)</td>", html)
    assert rows == [("0", "uploaded on the web", "-"), ("1", "written by a repair", "discard")]


def test_it_shows_an_earlier_repairs_synthetic_result_as_information(
    alice_client, alice, workspace, session
):
    # In Claude Code's own file the default writes Claude Code's interrupt text, no
    # marker of a repair: a workspace policy writes the generic receipt instead.
    WorkspacePolicy.objects.create(
        workspace=workspace,
        name="receipt",
        actions={"missing_result": "synthesize"},
        synthetic_text=INTERRUPTED_TEXT,
    )
    job = actions.do_start_job(workspace, [session], policy="receipt", acting_user=alice)
    run_inline(job)
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert '<div class="fault existing_synthetic info">' in html
    assert (
        '<span class="badge fault-kind existing_synthetic info" '
        'title="informational: synthesized by an earlier repair">existing_synthetic</span>'
    ) in html
    assert '<span class="note">informational</span>' in html
    assert '<div class="fault existing_synthetic">' not in html


def fault_box(html, kind):
    boxes = re.findall(rf'<div class="fault {kind}">(.*?)</div>', html, re.DOTALL)
    assert len(boxes) == 1
    return boxes[0]


@pytest.fixture
def malformed(workspace, ingest):
    lines = sample("formats/claude_code.jsonl").splitlines(keepends=True)
    data = b"".join([*lines[:3], b'{"type":"user", oops\n', *lines[3:]])
    return ingest(workspace, "malformed.jsonl", data)


def test_it_shows_a_malformed_records_message_as_a_parse_error(alice_client, malformed):
    html = alice_client.get(malformed.get_absolute_url()).content.decode()
    box = fault_box(html, "malformed_record")
    assert re.search(r'<p class="parse-error">Parse error: malformed.jsonl: line 4: \S', box)
    assert "Provider error" not in box
    assert "Provider error: " in fault_box(html, "missing_result")


def test_it_shows_a_parse_error_carried_in_the_error_field_once(alice_client, malformed):
    # The engine may carry the parser's message in `error` instead of `detail`.
    alice_client.get(malformed.get_absolute_url())
    row = TimelineRow.objects.get(timeline__revision=malformed.head, text__contains="malformed")
    data = json.loads(row.data)
    [fault] = [f for f in data["f"] if f["k"] == "malformed_record"]
    message = fault["d"]
    fault.update(e=message, d="")
    TimelineRow.objects.filter(pk=row.pk).update(data=json.dumps(data))
    html = alice_client.get(malformed.get_absolute_url()).content.decode()
    box = fault_box(html, "malformed_record")
    assert box.count(message) == 1
    assert f'<p class="parse-error">Parse error: {message}</p>' in box
    assert "Provider error" not in box


def test_it_hides_the_policy_chooser_for_an_unreadable_session(alice_client, workspace, ingest):
    unreadable = ingest(workspace, "broken.jsonl", b"{not json\n")
    html = alice_client.get(unreadable.get_absolute_url()).content.decode()
    assert "This file could not be read" in html
    assert 'name="policy"' not in html


def test_it_shows_the_policy_chooser_for_a_readable_session(alice_client, session):
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert '<select name="policy" id="id_policy"' in html


def test_it_explains_an_unknown_policy_on_a_page(alice_client, session):
    response = alice_client.get(session.get_absolute_url(), {"policy": "<nope>"})
    html = response.content.decode()
    assert response.status_code == 400
    assert "<title>Unknown policy · Pairfix</title>" in html
    assert "There is no policy named “&lt;nope&gt;”. The policies are: synthesize, " in html
    assert f'<a href="{session.get_absolute_url()}">Back to claude_code.jsonl</a>' in html


def test_the_comparison_names_the_fields_a_changed_record_differs_in(
    alice_client, alice, workspace, ingest
):
    # Dropping the orphaned result after the compaction re-points the next line's
    # parentUuid: a change no cell shows, so the row names the field.
    raw = sample("cases/01_cc-compaction-orphan-result.jsonl")
    session = ingest(workspace, "cc.jsonl", raw)
    run_inline(actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice))
    url = reverse("transcripts:session_compare", args=[session.pk])
    html = alice_client.get(url, {"a": 0, "b": 1, "full": 1}).content.decode()
    changed = re.findall(r'<tr id="a-(\d+)" class="row changed">.*?</tr>', html, re.S)
    assert changed == ["10"]
    row = re.search(r'<tr id="a-10" class="row changed">.*?</tr>', html, re.S)
    assert row is not None
    assert '<span class="changed-fields">in <code class="field">parentUuid</code></span>' in row[0]
    # An unchanged row says so on the right ("=" by the style sheet).
    same = re.search(r'<tr id="a-0" class="row same">.*?</tr>', html, re.S)
    assert same is not None
    assert '<td class="right"><span class="unchanged" title="the same in revision 1">' in same[0]


def test_a_record_the_repair_only_relinks_is_marked_so_not_the_same(
    alice_client, workspace, ingest
):
    # The repair drops record 9 (an orphaned result) and re-points record 10's parentUuid
    # to record 8: its cells look the same, but the repaired file's line is not.
    raw = sample("cases/01_cc-compaction-orphan-result.jsonl")
    session = ingest(workspace, "cc.jsonl", raw)
    html = alice_client.get(session.get_absolute_url(), {"policy": "synthesize"}).content.decode()
    rows = dict(re.findall(r'<tr id="r-(\d+)"[^>]*class="row (\w+)', html))
    assert (rows["8"], rows["9"], rows["10"], rows["11"]) == ("same", "dropped", "relinked", "same")
    row = re.search(r'<tr id="r-10".*?</tr>', html, re.S)
    assert row is not None
    assert ">relinked</span>" in row[0]
    assert "the same but for its parent id, re-pointed to the record before it" in row[0]
    # The changes-only view keeps it.
    changes = alice_client.get(
        session.get_absolute_url(), {"policy": "synthesize", "view": "changes"}
    ).content.decode()
    assert 'id="r-10"' in changes


def test_a_pasted_error_naming_a_message_of_several_lines_lands_on_the_line_with_its_id(
    alice_client, workspace, ingest
):
    # Claude Code writes one API message as several lines (thinking, text, tool_use):
    # request message 1 is records 2-4. An error naming it and a tool_use id means the
    # line holding that id, not the message's first line (the trial landed on #2).
    session = ingest(workspace, "cc.jsonl", sample("formats/claude_code.jsonl"))
    error = (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately "
        "after: toolu_01AAAAAAAAAAAAAAAAAAAAAA. Each `tool_use` block must have a "
        "corresponding `tool_result` block in the next message."
    )
    html = alice_client.get(session.get_absolute_url(), {"q": error}).content.decode()
    assert "messages.1 of the request is record #4." in html
    # The page then shows every row (the error is no filter): its links carry no `q`.
    assert "?q=" not in html and "&amp;q=" not in html
    # Without an id, the message's first line, as before.
    html = alice_client.get(session.get_absolute_url(), {"q": "messages.1: bad"}).content.decode()
    assert "messages.1 of the request is record #2." in html
