"""A chunk whose database connection the server dropped (as a restart does): the task retries
it after the lease, and the job page says so once the database answers again."""

import pytest
from django.db import DatabaseError, connection, connections
from django.utils.html import escape

from tests.helpers import sample
from transcripts import actions
from transcripts.models import Job
from transcripts.tasks import run_job_items


def drop_this_connection() -> None:
    """Have the server end this thread's database connection, from a connection of its own."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        [pid] = cursor.fetchone()
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        other.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="ends a server connection with pg_terminate_backend"
)
def test_a_chunk_the_database_dropped_says_on_the_page_when_it_is_retried(
    alice, workspace, ingest, client
):
    session = ingest(workspace, "s.jsonl", sample("formats/claude_code.jsonl"))
    job = actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    [ids] = actions.do_fan_out_job(job.pk)
    drop_this_connection()

    # Called directly, the task raises the error it would retry on.
    with pytest.raises(DatabaseError):
        run_job_items(job.pk, ids)

    job.refresh_from_db()
    assert (job.status, job.done, job.waiting_for) == (Job.Status.RUNNING, 0, "database")
    assert job.retry_at is not None and job.waiting_error
    alice.is_staff = True  # the operator: shown the database's own words
    alice.save(update_fields=["is_staff"])
    client.force_login(alice)
    html = client.get(job.get_absolute_url()).content.decode()
    error = escape(job.waiting_error)
    assert f'Waiting for the database: <span class="waiting-error">{error}</span>.' in html
    assert f"{job.retry_at:%H:%M:%S} UTC</time>" in html
