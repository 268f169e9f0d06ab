"""The overview: faults by kind, format and source, over time, and the recent jobs."""

import re
from collections import Counter
from datetime import date, timedelta

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from tests.helpers import run_inline, sample
from transcripts import actions, overview
from transcripts.engine import analyze
from transcripts.models import Session

URL = reverse("transcripts:overview")
pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache():
    cache.clear()


@pytest.fixture
def stored(workspace, ingest):
    return [
        ingest(workspace, "cc.jsonl", sample("formats/claude_code.jsonl")),
        ingest(
            workspace, "dup.jsonl", sample("cases/10_openclaw-displaced-dup-orphan-results.jsonl")
        ),
        ingest(
            workspace, "healthy.jsonl", sample("cases/02_cc-parallel-results-split-lines.jsonl")
        ),
        ingest(workspace, "broken.jsonl", b"{not json\n"),
    ]


def row(html, label):
    """Return the cells of the figures row headed `label`."""
    match = re.search(
        rf"{re.escape(label)}</a>(?:\s*<span[^>]*>[^<]*</span>)?</th>(.*?)</tr>", html, re.S
    )
    assert match, label
    return re.findall(r'<td class="number">(\d+)</td>', match.group(1))


def test_it_counts_faults_by_kind_format_and_source(alice_client, stored):
    expected = Counter()
    for session in stored:
        expected.update(session.fault_counts)
    html = alice_client.get(URL).content.decode()
    assert "4 sessions" in html
    for kind, count in expected.items():
        sessions = sum(kind in s.fault_counts for s in stored)
        assert row(html, kind) == [str(count), str(sessions)]
    cc = [s for s in stored if s.format == "claude_code"]
    assert row(html, "Claude Code JSONL") == [  # formats by name, as the upload form says
        str(len(cc)),
        str(sum(bool(s.fault_counts) for s in cc)),
        str(sum(sum(s.fault_counts.values()) for s in cc)),
    ]
    assert "uploads (no source)" in html
    assert "1 unreadable" in html


def test_it_shows_only_the_users_workspaces(alice_client, other_workspace, bob, ingest):
    ingest(other_workspace, "secret.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    html = alice_client.get(URL).content.decode()
    assert "0 sessions" in html
    assert "missing_result" not in html


def test_faults_over_time_put_each_day_in_its_bar(alice_client, stored):
    today = timezone.localdate()
    Session.objects.filter(pk=stored[0].pk).update(created=timezone.now() - timedelta(days=3))
    html = alice_client.get(URL).content.decode()
    three_days_ago = (today - timedelta(days=3)).isoformat()
    assert f"<title>{three_days_ago}: 1 fault, 1 missing_result</title>" in html
    assert f'<th scope="row">{three_days_ago}</th><td class="number">1</td>' in html
    assert '<rect class="k missing_result"' in html


def test_it_lists_recent_jobs(alice_client, alice, workspace, stored):
    job = run_inline(
        actions.do_start_job(workspace, stored[:1], policy="discard", acting_user=alice)
    )
    html = alice_client.get(URL).content.decode()
    assert f'<a href="{job.get_absolute_url()}">Job {job.pk}</a>: repair under discard' in html


def test_the_figures_are_cached_for_a_while(alice_client, workspace, ingest, stored):
    alice_client.get(URL)
    ingest(workspace, "later.jsonl", sample("formats/claude_code.jsonl"))
    assert "4 sessions" in alice_client.get(URL).content.decode()
    cache.clear()
    assert "5 sessions" in alice_client.get(URL).content.decode()


def test_the_chart_stacks_kinds_and_scales_to_a_round_top():
    days = [
        (date(2026, 1, 1), Counter({"missing_result": 3, "orphaned_result": 2})),
        (date(2026, 1, 2), Counter()),
        (date(2026, 1, 3), Counter({"missing_result": 7})),
    ]
    chart = overview.chart(days, width=340, height=232)
    assert chart.peak == 7
    assert [value for _, value in chart.ticks] == [0, 2, 4, 6, 8]
    first, empty, last = chart.bars
    assert [s.kind for s in first.segments] == ["missing_result", "orphaned_result"]
    # 200 units of plot height, a scale of 8: 25 units a fault, stacked from y=208 up.
    assert [(s.y, s.height) for s in first.segments] == [(133.0, 75.0), (83.0, 50.0)]
    assert empty.segments == () and empty.total == 0
    assert last.segments[0].height == 175.0
    assert last.label == "Jan 03" and first.label == ""
    assert last.x > empty.x > first.x


@pytest.mark.parametrize(
    "peak, top", [(0, 4), (4, 4), (5, 8), (9, 20), (21, 40), (41, 80), (81, 200)]
)
def test_the_scale_top_is_round(peak, top):
    assert overview._round_up(peak) == top


def test_a_session_with_only_informational_findings_has_no_faults(alice_client, workspace, ingest):
    # A repaired file holds the synthetic results of the repair: `existing_synthetic`,
    # informational, nothing to fix.
    raw = sample("formats/openai_chat.json")
    repaired = analyze(raw, "openai_chat.json", "synthesize").repaired
    session = ingest(workspace, "repaired.json", repaired)
    assert set(session.fault_counts) == {"existing_synthetic"}
    html = alice_client.get(URL).content.decode()
    assert "0 with faults" in html
    assert row(html, "OpenAI Chat Completions messages") == ["1", "0", "0"]
