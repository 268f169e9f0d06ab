import pytest

from tests.helpers import ORPHANED_CALL, sample
from transcripts import actions
from transcripts.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(alice, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    return actions.do_start_repair_job(workspace, [session], "synthesize", acting_user=alice)


def test_it_polls_while_the_job_runs(alice_client, job):
    html = alice_client.get(job.get_absolute_url()).content.decode()
    assert 'data-status="queued"' in html
    assert f'hx-get="{job.get_absolute_url()}" hx-trigger="every 1s"' in html
    assert '<progress id="job-progress" max="1" value="0">' in html


def test_it_renders_only_the_progress_for_htmx(alice_client, job):
    response = alice_client.get(job.get_absolute_url(), headers={"HX-Request": "true"})
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="progress"')
    assert "<html" not in html


def test_it_stops_polling_and_shows_the_audit_when_done(alice_client, job):
    # The worker's work, done inline: this test is about the page, not the queue.
    actions.do_run_repair_job(job.pk)
    html = alice_client.get(job.get_absolute_url()).content.decode()
    assert 'data-status="done"' in html
    assert "hx-trigger" not in html
    assert '<progress id="job-progress" max="1" value="1">' in html
    assert '<tr class="audit-record missing_result">' in html
    assert f"<code>{ORPHANED_CALL}</code>" in html
    assert "insert_result" in html


def test_it_hides_other_workspaces_jobs(client, bob, other_workspace, job):
    client.force_login(bob)
    assert client.get(job.get_absolute_url()).status_code == 404


def test_it_rejects_post(alice_client, job):
    assert alice_client.post(job.get_absolute_url()).status_code == 405
    assert Job.objects.get().status == "queued"
