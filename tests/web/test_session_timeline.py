"""The session page's timeline: windows of rows, jumps, faults, filters, expanding a block."""

import base64
import json
import re

import pytest
from django.urls import reverse

from tests.helpers import generated_session, sample
from transcripts import timeline
from transcripts.core.align import RowStatus
from transcripts.engine import analyze
from transcripts.models import Timeline

pytestmark = pytest.mark.django_db

ROW = re.compile(r'<tr id="([rp]-\d+)" data-pos="(\d+)" tabindex="-1" class="row ([^"]*)">')


def rows_in(html):
    """Return [(element id, position, classes)] of the timeline rows in `html`."""
    return [(anchor, int(pos), classes.split()) for anchor, pos, classes in ROW.findall(html)]


@pytest.fixture(scope="module")
def long_file():
    return generated_session(1000, seed=11, fault_rate=0.3)


@pytest.fixture
def long_session(workspace, ingest, long_file):
    return ingest(workspace, long_file.name, long_file.read_bytes())


@pytest.fixture(scope="module")
def expected(long_file):
    """Return the side-by-side rows of the long session, straight from the engine."""
    return analyze(long_file.read_bytes(), long_file.name).rows


def rows_url(session, **params):
    query = "&".join(f"{k}={v}" for k, v in {"policy": "synthesize", **params}.items())
    return f"{reverse('transcripts:session_rows', args=[session.pk])}?{query}"


def test_the_page_shows_the_first_window_and_a_loader_for_the_next(
    alice_client, long_session, expected
):
    html = alice_client.get(long_session.get_absolute_url()).content.decode()
    rows = rows_in(html)
    assert [pos for _, pos, _ in rows] == list(range(timeline.WINDOW_ROWS))
    assert [status for _, _, (status, *_) in rows] == [
        str(row.status) for row in expected[: timeline.WINDOW_ROWS]
    ]
    assert f"after={timeline.WINDOW_ROWS - 1}" in html
    assert 'hx-trigger="revealed"' in html
    assert 'class="more before"' not in html


def test_the_next_window_follows_the_last_row(alice_client, long_session):
    alice_client.get(long_session.get_absolute_url())
    html = alice_client.get(rows_url(long_session, after=99), headers={"HX-Request": "true"})
    rows = rows_in(html.content.decode())
    assert [pos for _, pos, _ in rows] == list(range(100, 200))
    assert 'class="more before"' not in html.content.decode()
    assert "after=199" in html.content.decode()


def test_the_last_window_has_no_loader(alice_client, long_session, expected):
    alice_client.get(long_session.get_absolute_url())
    last = len(expected) - 1
    html = alice_client.get(rows_url(long_session, after=last - 10)).content.decode()
    assert [pos for _, pos, _ in rows_in(html)] == list(range(last - 9, last + 1))
    assert 'class="more after"' not in html


def test_the_previous_window_ends_before_the_first_row(alice_client, long_session):
    alice_client.get(long_session.get_absolute_url())
    html = alice_client.get(rows_url(long_session, before=300)).content.decode()
    assert [pos for _, pos, _ in rows_in(html)] == list(range(200, 300))
    assert "before=200" in html
    assert 'class="more after"' not in html


def test_a_record_opens_its_window_with_a_few_rows_above(alice_client, long_session, expected):
    position = next(i for i, row in enumerate(expected) if row.left and row.left.index == 600)
    html = alice_client.get(long_session.get_absolute_url(), {"record": 600}).content.decode()
    rows = rows_in(html)
    assert rows[timeline.CONTEXT_ROWS][:2] == ("r-600", position)
    assert rows[0][1] == position - timeline.CONTEXT_ROWS
    assert 'data-focus="r-600"' in html
    assert f"before={position - timeline.CONTEXT_ROWS}" in html


def test_the_rows_of_a_record_name_the_row_to_focus(alice_client, long_session):
    alice_client.get(long_session.get_absolute_url())
    response = alice_client.get(rows_url(long_session, record=750))
    assert response["X-Pairfix-Focus"] == "r-750"
    assert 'id="r-750"' in response.content.decode()


def test_a_record_that_is_not_there(alice_client, long_session):
    html = alice_client.get(long_session.get_absolute_url(), {"record": 5000}).content.decode()
    assert "There is no record 5000 in this session." in html
    assert rows_in(html)[0][1] == 0
    assert alice_client.get(rows_url(long_session, record=5000)).status_code == 204


def test_next_and_previous_fault_go_to_the_rows_with_faults(alice_client, long_session, expected):
    alice_client.get(long_session.get_absolute_url())
    faulty = [i for i, row in enumerate(expected) if row.faults]
    after = faulty[20] + 1
    response = alice_client.get(rows_url(long_session, fault_after=faulty[20]))
    target = expected[faulty[21]]
    assert response["X-Pairfix-Focus"] == f"r-{target.left.index}"
    response = alice_client.get(rows_url(long_session, fault_before=after))
    assert response["X-Pairfix-Focus"] == f"r-{expected[faulty[20]].left.index}"
    assert alice_client.get(rows_url(long_session, fault_after=faulty[-1])).status_code == 204
    assert alice_client.get(rows_url(long_session, fault_before=faulty[0])).status_code == 204


def test_the_fault_panel_lists_every_fault_with_its_provider_error(
    alice_client, long_session, expected
):
    html = alice_client.get(long_session.get_absolute_url()).content.decode()
    panel = html[html.index('<aside class="fault-panel"') : html.index("</aside>")]
    listed = re.findall(
        r'data-pos="(\d+)" data-anchor="(r-\d+)">\s*<span class="badge fault-kind (\w+)', panel
    )
    wanted = [
        (str(i), f"r-{row.left.index}", str(fault.kind))
        for i, row in enumerate(expected)
        for fault in row.faults
    ]
    assert listed == wanted
    assert len(listed) == 67
    first = next(row.faults[0] for row in expected if row.faults)
    assert first.error[:60] in panel


def test_only_faults_shows_the_rows_with_faults_or_changes(alice_client, long_session, expected):
    html = alice_client.get(long_session.get_absolute_url(), {"faults": "1"}).content.decode()
    wanted = [i for i, row in enumerate(expected) if row.faults or row.status != RowStatus.SAME]
    assert [pos for _, pos, _ in rows_in(html)] == wanted[: timeline.WINDOW_ROWS]
    assert "faults=1" in html


def test_only_tool_traffic_shows_calls_and_results(alice_client, long_session, expected):
    html = alice_client.get(long_session.get_absolute_url(), {"tools": "1"}).content.decode()
    wanted = [
        i
        for i, row in enumerate(expected)
        if any(c is not None and (c.calls or c.results) for c in (row.left, row.right))
    ]
    assert [pos for _, pos, _ in rows_in(html)] == wanted[: timeline.WINDOW_ROWS]


def test_search_finds_a_tool_call_id(alice_client, long_session, expected):
    row = next(r for r in expected[500:] if r.left and r.left.calls)
    call_id, _ = row.left.calls[0]
    html = alice_client.get(long_session.get_absolute_url(), {"q": call_id}).content.decode()
    anchors = [anchor for anchor, _, _ in rows_in(html)]
    assert f"r-{row.left.index}" in anchors
    # The call and its result, nothing else.
    assert len(anchors) <= 3


def test_search_with_no_match(alice_client, long_session):
    html = alice_client.get(long_session.get_absolute_url(), {"q": "no-such-text-anywhere"}).content
    assert "No rows match the filters." in html.decode()


def test_filters_and_the_view_swap_the_timeline_for_htmx(alice_client, long_session):
    response = alice_client.get(
        long_session.get_absolute_url(), {"faults": "1"}, headers={"HX-Request": "true"}
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="timeline">')
    assert response["Vary"] == "HX-Request, Cookie" or "HX-Request" in response["Vary"]


@pytest.mark.parametrize(
    "params",
    [{"record": "-1"}, {"after": "x"}, {"record": "3", "at": "4"}, {"q": "x" * 2001}],
)
def test_it_refuses_a_bad_place_or_filter(alice_client, long_session, params):
    assert alice_client.get(long_session.get_absolute_url(), params).status_code == 400
    assert alice_client.get(rows_url(long_session), params).status_code == 400


def test_other_workspaces_timelines_are_not_found(alice_client, other_workspace, bob, ingest):
    theirs = ingest(other_workspace, "b.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    assert alice_client.get(rows_url(theirs)).status_code == 404
    url = reverse("transcripts:record_detail", args=[theirs.pk, 1])
    assert alice_client.get(url).status_code == 404


def claude_code(**replacements):
    """Return the Claude Code sample with texts replaced (JSON-escaped)."""
    data = sample("formats/claude_code.jsonl").decode()
    for old, new in replacements.items():
        escaped = json.dumps(new)[1:-1]
        assert old in data
        data = data.replace(old, escaped)
    return data.encode()


def test_a_long_tool_result_is_cut_and_expands(alice_client, workspace, ingest):
    output = "\n".join(f"line {n} of the output" for n in range(40))
    session = ingest(workspace, "long.jsonl", claude_code(**{"1 failed, 9 passed": output}))
    html = alice_client.get(session.get_absolute_url()).content.decode()
    row = html[html.index('id="r-5"') :]
    row = row[: row.index("</tr>")]
    assert "line 5 of the output" in row
    assert "line 6 of the output" not in row
    assert "Show all 40 lines" in row
    url = reverse("transcripts:record_detail", args=[session.pk, 5])
    assert f'hx-get="{url}?policy=synthesize&amp;block=0"' in row

    block = alice_client.get(url, {"block": "0"}, headers={"HX-Request": "true"}).content.decode()
    assert block.lstrip().startswith('<div class="block result">')
    assert "line 39 of the output" in block
    assert "Show less" in block
    cut = alice_client.get(url, {"block": "0", "cut": "1"}, headers={"HX-Request": "true"})
    assert "line 39 of the output" not in cut.content.decode()

    page = alice_client.get(url).content.decode()
    assert "<h1>Record #5 of long.jsonl</h1>" in page
    assert "line 39 of the output" in page


def test_a_record_block_that_is_not_there(alice_client, long_session):
    alice_client.get(long_session.get_absolute_url())
    url = reverse("transcripts:record_detail", args=[long_session.pk, 3])
    assert alice_client.get(url, {"block": "99"}, headers={"HX-Request": "true"}).status_code == 404
    url = reverse("transcripts:record_detail", args=[long_session.pk, 99999])
    assert alice_client.get(url).status_code == 404


def test_a_call_shows_its_name_and_arguments(alice_client, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert '<p class="block-head">tool call <b class="tool-name">Bash</b>' in html
    assert "&quot;command&quot;: &quot;pytest -q&quot;" in html
    assert "<summary>thinking (1 line)</summary>" in html
    assert '<time class="time">2025-11-01 10:00:02</time>' in html


def test_a_duplicate_result_is_gone_from_the_repaired_side(alice_client, workspace, ingest):
    data = sample("cases/05_anthropic-duplicate-tool-result-error-path.json")
    session = ingest(workspace, "dup.json", data)
    html = alice_client.get(session.get_absolute_url()).content.decode()
    row = html[html.index('id="r-2"') :]
    row = row[: row.index("</tr>")]
    left, right = row.split('<td class="right">')
    assert left.count("could not find the search block") == 1
    assert "could not find the search block" not in right
    assert "no match found for the SEARCH block" in right
    assert '<span class="label">changed</span>' in row


def test_a_synthetic_result_joins_the_next_message_on_the_repaired_side(
    alice_client, workspace, ingest
):
    data = sample("cases/19_anthropic-resume-orphan-mid-history.json")
    session = ingest(workspace, "resume.json", data)
    html = alice_client.get(session.get_absolute_url()).content.decode()
    row = html[html.index('id="r-2"') :]
    right = row[row.index('<td class="right">') : row.index("</tr>")]
    assert 'tool result for <code class="tool-call-id">toolu_syn_srv_01</code>' in right
    assert "Are you still there?" in right


def test_a_moved_result_says_where_it_came_from(alice_client, workspace, ingest):
    data = sample("cases/10_openclaw-displaced-dup-orphan-results.jsonl")
    session = ingest(workspace, "moved.jsonl", data)
    html = alice_client.get(session.get_absolute_url()).content.decode()
    moved = re.search(
        r'class="row moved_to">.*?moved from '
        r'<a href="[^"]*record=(\d+)#r-\1" data-record="\1">#\1</a>',
        html,
        re.S,
    )
    assert moved is not None
    origin = moved.group(1)
    assert re.search(
        rf'<tr id="r-{origin}" data-pos="\d+" tabindex="-1" class="row moved_from', html
    )


def test_transcript_content_stays_escaped_in_every_block(alice_client, workspace, ingest):
    hostile = "<script>alert(1)</script>"
    data = claude_code(
        **{
            "Run pytest quietly.": hostile,
            "pytest -q": hostile,
            "toolu_01AAAAAAAAAAAAAAAAAAAAAA": "toolu_<b>",
        }
    )
    session = ingest(workspace, "hostile.jsonl", data)
    html = alice_client.get(session.get_absolute_url(), {"q": "script"}).content.decode()
    assert "<script>alert" not in html
    assert "toolu_<b>" not in html
    assert "toolu_&lt;b&gt;" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert len(rows_in(html)) == 2


def test_bidi_controls_are_spelled_out_in_blocks(alice_client, workspace, ingest):
    data = claude_code(**{"Run the unit tests and show me failures.": "gnp\u202eexe"})
    session = ingest(workspace, "bidi.jsonl", data)
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert "gnp[U+202E]exe" in html
    assert "\u202e" not in html


def test_no_request_parses_the_whole_file_once_the_timeline_is_built(
    alice_client, long_session, monkeypatch
):
    alice_client.get(long_session.get_absolute_url())

    def refuse(*args, **kwargs):
        raise AssertionError("parsed the whole file")

    monkeypatch.setattr("transcripts.formats.load", refuse)
    monkeypatch.setattr("transcripts.engine.analyze", refuse)
    monkeypatch.setattr("transcripts.timeline.analyze", refuse)
    assert len(rows_in(alice_client.get(long_session.get_absolute_url()).content.decode())) == 100
    assert alice_client.get(rows_url(long_session, after=99)).status_code == 200
    assert alice_client.get(rows_url(long_session, fault_after=99)).status_code == 200
    assert alice_client.get(rows_url(long_session, record=900)).status_code == 200
    url = reverse("transcripts:record_detail", args=[long_session.pk, 4])
    assert alice_client.get(url).status_code == 200


def test_a_window_reads_only_its_records_bytes(alice_client, long_session, monkeypatch):
    alice_client.get(long_session.get_absolute_url())
    read = []
    original = timeline._read

    def counting(blob, start, end, limit):
        read.append(end - start)
        return original(blob, start, end, limit)

    monkeypatch.setattr(timeline, "_read", counting)
    alice_client.get(rows_url(long_session, after=499))
    assert len(read) <= timeline.WINDOW_ROWS
    assert sum(read) < long_session.head.size / 5


def test_each_policy_has_its_own_timeline(alice_client, long_session):
    alice_client.get(long_session.get_absolute_url())
    html = alice_client.get(long_session.get_absolute_url(), {"policy": "discard"}).content.decode()
    assert "Repaired (discard)" in html
    assert set(Timeline.objects.values_list("policy", flat=True)) == {"synthesize", "discard"}


def test_an_image_is_a_placeholder_with_its_size(alice_client, workspace, ingest):
    image = base64.b64encode(bytes(1000)).decode()
    data = sample("formats/claude_code.jsonl").replace(
        b'"content":"1 failed, 9 passed"',
        b'"content":[{"type":"text","text":"screenshot"},{"type":"image","source":'
        b'{"type":"base64","media_type":"image/png","data":"' + image.encode() + b'"}}]',
    )
    session = ingest(workspace, "image.jsonl", data)
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert '<p class="image-placeholder">[image image/png, 1000\xa0bytes]</p>' in html
    assert image[:40] not in html


def test_the_fault_panel_gives_a_malformed_lines_reason(alice_client, workspace, ingest):
    lines = sample("formats/claude_code.jsonl").splitlines(keepends=True)
    session = ingest(workspace, "cut.jsonl", b"".join(lines[:2] + [b'{"type": "us\n'] + lines[2:]))
    html = alice_client.get(session.get_absolute_url()).content.decode()
    panel = html[html.index('<aside class="fault-panel"') : html.index("</aside>")]
    assert "malformed_record</span>" in panel
    assert '<span class="fault-detail">cut.jsonl: line 3: column ' in panel
