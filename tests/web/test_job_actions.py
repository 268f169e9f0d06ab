"""The job page's buttons: cancel, retry failed items, apply a dry run."""

import pytest
from django.urls import reverse

from tests.helpers import run_inline, sample
from transcripts import actions
from transcripts.models import Job

pytestmark = pytest.mark.django_db


def url(name, job):
    return reverse(f"transcripts:{name}", args=[job.pk])


@pytest.fixture
def session(workspace, ingest):
    return ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))


@pytest.fixture
def job(alice, workspace, session):
    return actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)


@pytest.mark.parametrize("name", ["cancel_job", "retry_job", "rollback_job", "apply_dry_run"])
def test_it_rejects_get(alice_client, job, name):
    assert alice_client.get(url(name, job)).status_code == 405


@pytest.mark.parametrize("name", ["cancel_job", "retry_job", "rollback_job", "apply_dry_run"])
def test_it_hides_other_workspaces_jobs(client, bob, other_workspace, job, name):
    client.force_login(bob)
    assert client.post(url(name, job)).status_code == 404
    assert Job.objects.get().status == "queued"
    assert Job.objects.count() == 1


def test_cancel_stops_a_queued_job(alice_client, job):
    response = alice_client.post(url("cancel_job", job), follow=True)
    job.refresh_from_db()
    assert (job.status, job.cancelled) == ("cancelled", 1)
    assert f"Job {job.pk} cancelled." in response.content.decode()
    assert "Cancel job" not in response.content.decode()


def test_cancel_leaves_a_finished_job_alone(alice_client, job):
    run_inline(job)
    response = alice_client.post(url("cancel_job", job), follow=True)
    assert f"Job {job.pk} had already finished." in response.content.decode()
    job.refresh_from_db()
    assert job.status == "done"


def test_retry_queues_the_failed_items(alice_client, alice, workspace, ingest):
    broken = ingest(workspace, "broken.jsonl", b"not json\n")
    job = run_inline(
        actions.do_start_job(workspace, [broken], policy="synthesize", acting_user=alice)
    )
    response = alice_client.post(url("retry_job", job), follow=True)
    assert "Retrying 1 failed session." in response.content.decode()
    job.refresh_from_db()
    assert (job.status, job.failed) == ("queued", 0)


def test_retry_says_when_there_is_nothing_to_retry(alice_client, job):
    run_inline(job)
    response = alice_client.post(url("retry_job", job), follow=True)
    assert "Nothing to retry" in response.content.decode()


def test_apply_starts_the_repair_a_dry_run_planned(alice_client, alice, workspace, session):
    dry_run = run_inline(
        actions.do_start_job(
            workspace, [session], kind="dry_run", policy="discard", acting_user=alice
        )
    )
    response = alice_client.post(url("apply_dry_run", dry_run))
    repair = Job.objects.get(source_job=dry_run)
    assert response.url == repair.get_absolute_url()
    assert (repair.kind, repair.policy, repair.total) == ("repair", "discard", 1)


def test_apply_refuses_a_job_that_is_no_dry_run(alice_client, job):
    run_inline(job)
    response = alice_client.post(url("apply_dry_run", job), follow=True)
    assert "Only a finished dry run can be applied." in response.content.decode()
    assert Job.objects.count() == 1
