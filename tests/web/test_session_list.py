import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.helpers import run_inline, sample
from transcripts import actions, views
from transcripts.models import Session

URL = reverse("transcripts:session_list")
pytestmark = pytest.mark.django_db


def test_it_requires_login(client):
    response = client.get(URL)
    assert response.status_code == 302
    assert response.url == f"/accounts/login/?next={URL}"


def test_it_shows_fault_counts_by_kind(alice_client, workspace, ingest):
    ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    html = alice_client.get(URL).content.decode()
    assert "claude_code.jsonl" in html
    assert "claude_code" in html
    # The badge names the kind in text, not by colour alone.
    assert '<span class="badge fault-kind missing_result" title="1 × missing_result">' in html
    assert "missing_result <b>1</b>" in html


def test_it_hides_other_workspaces_sessions(alice_client, other_workspace, bob, ingest):
    ingest(other_workspace, "secret-bob.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    response = alice_client.get(URL)
    assert response.status_code == 200
    assert b"secret-bob.jsonl" not in response.content


def test_it_shows_sessions_of_every_workspace_of_the_user(
    alice_client, other_workspace, membership, bob, ingest
):
    ingest(other_workspace, "shared.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    assert b"shared.jsonl" in alice_client.get(URL).content


def test_it_filters_by_fault_kind(alice_client, workspace, ingest):
    ingest(workspace, "orphan-call.jsonl", sample("formats/claude_code.jsonl"))
    ingest(workspace, "healthy.jsonl", sample("cases/02_cc-parallel-results-split-lines.jsonl"))
    html = alice_client.get(URL, {"fault": "missing_result"}).content.decode()
    assert "orphan-call.jsonl" in html
    assert "healthy.jsonl" not in html


def test_it_marks_unreadable_sessions(alice_client, workspace, ingest):
    ingest(workspace, "broken.jsonl", b"{not json\n")
    html = alice_client.get(URL).content.decode()
    assert '<span class="badge unreadable">unreadable</span>' in html


def test_it_rejects_post(alice_client):
    assert alice_client.post(URL).status_code == 405


def test_it_shows_done_failed_and_total_of_recent_jobs(alice_client, alice, workspace, ingest):
    sessions = [
        ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl")),
        ingest(
            workspace, "healthy.jsonl", sample("cases/02_cc-parallel-results-split-lines.jsonl")
        ),
        ingest(workspace, "broken-1.jsonl", b"not json\n"),
        ingest(workspace, "broken-2.jsonl", b"{oops\n"),
        ingest(workspace, "broken-3.json", b"[\n"),
    ]
    job = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    run_inline(job)
    html = alice_client.get(URL).content.decode()
    assert f"Job {job.pk}</a>: synthesize, done: " in html
    assert '<span class="job-counts">2 done · 3 failed · 5 total</span>' in html
    assert "5 of 5" not in html


def test_it_shows_an_earlier_repairs_synthetic_result_as_information(
    alice_client, alice, workspace, ingest
):
    session = ingest(workspace, "openai_chat.json", sample("formats/openai_chat.json"))
    job = actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    run_inline(job)
    html = alice_client.get(URL).content.decode()
    assert (
        '<span class="badge fault-kind existing_synthetic info" '
        'title="1 × existing_synthetic (informational: synthesized by an earlier repair)">'
        "existing_synthetic <b>1</b></span>"
    ) in html


def names(response):
    return re.findall(r'aria-label="Select ([^"]+)"', response.content.decode())


def test_it_filters_by_workspace_format_date_and_name(
    alice_client, workspace, other_workspace, membership, bob, ingest
):
    old = ingest(workspace, "old-chat.json", sample("formats/openai_chat.json"))
    Session.objects.filter(pk=old.pk).update(created=timezone.now() - timedelta(days=10))
    ingest(workspace, "claude-a.jsonl", sample("formats/claude_code.jsonl"))
    ingest(other_workspace, "claude-b.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    today = timezone.now().date()

    assert names(alice_client.get(URL, {"workspace": other_workspace.pk})) == ["claude-b.jsonl"]
    assert names(alice_client.get(URL, {"format": "openai_chat"})) == ["old-chat.json"]
    # Formats by their names, in the list and in its filter, as the upload form names them.
    page = alice_client.get(URL).content.decode()
    assert '<td title="claude_code">Claude Code JSONL</td>' in page
    assert '<option value="openai_chat">OpenAI Chat Completions' in page
    assert sorted(names(alice_client.get(URL, {"created_after": today}))) == [
        "claude-a.jsonl",
        "claude-b.jsonl",
    ]
    before = today - timedelta(days=1)
    assert names(alice_client.get(URL, {"created_before": before})) == ["old-chat.json"]
    assert names(alice_client.get(URL, {"q": "CLAUDE-A"})) == ["claude-a.jsonl"]
    combined = {"q": "claude", "workspace": workspace.pk, "fault": "missing_result"}
    assert names(alice_client.get(URL, combined)) == ["claude-a.jsonl"]


def test_it_ignores_another_workspace_as_a_filter(alice_client, other_workspace, bob, ingest):
    ingest(other_workspace, "secret-bob.jsonl", sample("formats/claude_code.jsonl"), user=bob)
    response = alice_client.get(URL, {"workspace": other_workspace.pk})
    assert "Select a valid choice." in response.content.decode()
    assert "secret-bob.jsonl" not in response.content.decode()


def test_it_carries_the_filter_into_the_job_form(alice_client, workspace, ingest):
    ingest(workspace, "claude-a.jsonl", sample("formats/claude_code.jsonl"))
    html = alice_client.get(URL, {"q": '"><b>x', "fault": "missing_result"}).content.decode()
    assert '<input type="hidden" name="fault" value="missing_result">' in html
    assert '<input type="hidden" name="q" value="&quot;&gt;&lt;b&gt;x">' in html
    assert "all 0 matching the filter" in html


def test_it_shows_a_page_of_sessions_at_a_time(alice_client, workspace, ingest, monkeypatch):
    monkeypatch.setattr(views, "SESSIONS_PER_PAGE", 2)
    for n in range(5):
        ingest(workspace, f"s{n}.jsonl", sample("formats/claude_code.jsonl"))
    first = alice_client.get(URL, {"q": "s"})
    assert names(first) == ["s4.jsonl", "s3.jsonl"]
    assert "5 sessions match the filter." in first.content.decode()
    assert 'href="?q=s&amp;page=2">next</a>' in first.content.decode()
    assert names(alice_client.get(URL, {"q": "s", "page": 3})) == ["s0.jsonl"]
