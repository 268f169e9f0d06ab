"""A job's sessions whose stored file is missing or damaged: the page says a retry cannot
help them and offers it only for the failures it can mend, for every kind of job."""

import pytest
from django.core.files.storage import default_storage
from django.urls import reverse

from tests.helpers import run_inline, sample
from transcripts import actions
from transcripts.models import Job, JobItem, blob_name

pytestmark = pytest.mark.django_db

FAULTY = "formats/claude_code.jsonl"
ONE_UNREADABLE = (
    "1 session cannot be read: its stored file is missing or damaged, so a retry would fail again."
)


def retry_url(job):
    return reverse("transcripts:retry_job", args=[job.pk])


def start(alice, workspace, sessions, kind):
    return run_inline(
        actions.do_start_job(workspace, sessions, kind=kind, policy="synthesize", acting_user=alice)
    )


@pytest.mark.parametrize("kind", ["dry_run", "export", "repair"])
def test_it_offers_no_retry_when_every_failed_session_cannot_be_read(
    alice_client, alice, workspace, ingest, kind
):
    session = ingest(workspace, "gone.jsonl", sample(FAULTY))
    default_storage.delete(blob_name(session.head.sha256))
    job = start(alice, workspace, [session], kind)
    item = job.items.get()
    assert (job.status, job.failed, item.status, item.unreadable) == ("done", 1, "failed", True)
    assert "is missing from storage" in item.error

    html = alice_client.get(job.get_absolute_url()).content.decode()

    assert ONE_UNREADABLE in html
    assert retry_url(job) not in html and "Retry 1 failed" not in html
    response = alice_client.post(retry_url(job), follow=True)
    assert "Nothing to retry: the failed sessions&#x27; stored files are missing or damaged" in (
        response.content.decode()
    )
    job.refresh_from_db()
    assert (job.status, job.failed) == ("done", 1)
    assert job.items.get().status == "failed"


def test_a_rollback_whose_earlier_file_is_gone_offers_no_retry(
    alice_client, alice, workspace, ingest
):
    session = ingest(workspace, "s.jsonl", sample(FAULTY))
    raw = blob_name(session.head.sha256)
    repair = start(alice, workspace, [session], "repair")
    assert repair.done == 1
    default_storage.delete(raw)

    rollback = run_inline(actions.do_start_rollback_job(repair, acting_user=alice))

    item = rollback.items.get()
    assert (rollback.failed, item.unreadable) == (1, True)
    html = alice_client.get(rollback.get_absolute_url()).content.decode()
    assert ONE_UNREADABLE in html and retry_url(rollback) not in html


def test_the_retry_leaves_out_the_sessions_that_cannot_be_read(
    alice_client, alice, workspace, ingest
):
    gone = [ingest(workspace, f"gone{n}.jsonl", sample(FAULTY) + b"\n" * n) for n in range(2)]
    for session in gone:
        default_storage.delete(blob_name(session.head.sha256))
    # Fails on an unknown format: a newer engine may read it, so a retry is offered.
    broken = ingest(workspace, "broken.jsonl", b"not json\n")
    job = start(alice, workspace, [*gone, broken], "dry_run")
    assert job.failed == 3

    html = alice_client.get(job.get_absolute_url()).content.decode()
    assert "Retry 1 failed" in html and retry_url(job) in html
    assert (
        "2 sessions cannot be read: their stored file is missing or damaged, so a retry would "
        "fail again. The retry leaves them out."
    ) in html

    response = alice_client.post(retry_url(job), follow=True)
    assert "Retrying 1 failed session." in response.content.decode()
    job.refresh_from_db()
    assert (job.status, job.failed) == ("queued", 2)
    assert dict(job.items.values_list("session__name", "status")) == {
        "gone0.jsonl": "failed",
        "gone1.jsonl": "failed",
        "broken.jsonl": "queued",
    }
    job = run_inline(job)
    assert (job.status, job.failed, job.total) == ("done", 3, 3)
    assert set(job.items.filter(unreadable=True).values_list("session__name", flat=True)) == {
        "gone0.jsonl",
        "gone1.jsonl",
    }


def test_a_failure_that_is_not_about_the_stored_file_is_retried(alice, workspace, ingest):
    broken = ingest(workspace, "broken.jsonl", b"not json\n")
    job = start(alice, workspace, [broken], "repair")
    assert JobItem.objects.get(job=job).unreadable is False
    assert actions.do_retry_failed_items(job, acting_user=alice) == 1
    assert Job.objects.get(pk=job.pk).status == "queued"
