import pytest
from django.urls import reverse

from tests.helpers import sample
from transcripts import actions

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
    job = actions.do_start_repair_job(workspace, sessions, "synthesize", acting_user=alice)
    actions.do_run_repair_job(job.pk)
    html = alice_client.get(URL).content.decode()
    assert f"Job {job.pk}</a>: synthesize, done: " in html
    assert '<span class="job-counts">2 done · 3 failed · 5 total</span>' in html
    assert "5 of 5" not in html


def test_it_shows_an_earlier_repairs_synthetic_result_as_information(
    alice_client, alice, workspace, ingest
):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    job = actions.do_start_repair_job(workspace, [session], "synthesize", acting_user=alice)
    actions.do_run_repair_job(job.pk)
    html = alice_client.get(URL).content.decode()
    assert (
        '<span class="badge fault-kind existing_synthetic info" '
        'title="1 × existing_synthetic (informational: synthesized by an earlier repair)">'
        "existing_synthetic <b>1</b></span>"
    ) in html
