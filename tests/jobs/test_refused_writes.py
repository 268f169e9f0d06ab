"""A session whose write the database refuses costs only itself; a dead chunk is retried.

The refusal is the database's own: a trigger on the audit table raises for
one session's tool call id, as PostgreSQL raised DataError for an id longer
than its column (SQLite raises IntegrityError from a trigger).
"""

from __future__ import annotations

import pytest
from django.db import connection

from tests.helpers import run_inline, sample, wait_for_job
from tests.sync.conftest import call, user
from transcripts import actions
from transcripts.models import AuditRecord, Job

POISON = "toolu_poison"
SAMPLES = ["formats/claude_code.jsonl", "formats/openclaw.jsonl", "formats/openai_chat.json"]


def _refuse_audit_of(tool_call_id: str, *, errcode: str = "22001", once: bool = False) -> None:
    """Make the database refuse audit rows of `tool_call_id` (on PostgreSQL with `errcode`).

    `once` (PostgreSQL): only the first such insert; a sequence counts, as it
    is not rolled back with the refused insert.
    """
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("CREATE SEQUENCE IF NOT EXISTS pairfix_refusals")
            first = "AND nextval('pairfix_refusals') = 1" if once else ""
            cursor.execute(
                f"""
                CREATE OR REPLACE FUNCTION pairfix_refuse() RETURNS trigger AS $$
                BEGIN
                    IF NEW.tool_call_id = '{tool_call_id}' {first} THEN
                        RAISE EXCEPTION 'value too long for the column'
                            USING ERRCODE = '{errcode}';
                    END IF;
                    RETURN NEW;
                END $$ LANGUAGE plpgsql
                """
            )
            cursor.execute(
                "CREATE TRIGGER pairfix_refuse BEFORE INSERT ON transcripts_auditrecord "
                "FOR EACH ROW EXECUTE FUNCTION pairfix_refuse()"
            )
        else:
            assert not once
            cursor.execute(
                "CREATE TRIGGER pairfix_refuse BEFORE INSERT ON transcripts_auditrecord "
                f"WHEN NEW.tool_call_id = '{tool_call_id}' "
                "BEGIN SELECT RAISE(ABORT, 'value too long for the column'); END"
            )


def _accept_again() -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("DROP TRIGGER pairfix_refuse ON transcripts_auditrecord")
        else:
            cursor.execute("DROP TRIGGER pairfix_refuse")


@pytest.fixture
def sessions(workspace, ingest):
    good = [ingest(workspace, name.split("/")[-1], sample(name)) for name in SAMPLES]
    poisoned = ingest(
        workspace, "poisoned.jsonl", user("u1", None, "go") + call("a1", "u1", POISON)
    )
    return good, poisoned


@pytest.mark.django_db
def test_a_session_the_database_refuses_is_failed_with_the_reason_and_the_rest_written(
    alice, alice_client, workspace, sessions
):
    good, poisoned = sessions
    _refuse_audit_of(POISON)
    job = actions.do_start_job(workspace, [*good, poisoned], policy="synthesize", acting_user=alice)

    job = run_inline(job)

    assert (job.status, job.done, job.failed) == ("done", len(good), 1)
    item = job.items.get(session=poisoned)
    assert item.status == "failed"
    assert item.error.startswith("the database refused the session's new revision: ")
    assert "value too long for the column" in item.error
    poisoned.refresh_from_db()
    assert poisoned.head.number == 0
    assert not AuditRecord.objects.filter(job=job, session=poisoned).exists()
    for session in good:
        session.refresh_from_db()
        assert (job.items.get(session=session).status, session.head.number) == ("repaired", 1)
    page = alice_client.get(job.get_absolute_url()).content.decode()
    assert "value too long for the column" in page

    # Retry, once the database takes the row.
    _accept_again()
    response = alice_client.post(f"/jobs/{job.pk}/retry/")
    assert response.status_code == 302
    job = run_inline(Job.objects.get(pk=job.pk))
    assert (job.status, job.done, job.failed) == ("done", len(good) + 1, 0)
    assert job.items.get(session=poisoned).status == "repaired"
    assert AuditRecord.objects.get(job=job, session=poisoned).tool_call_id == POISON


@pytest.mark.usefixtures("celery_worker")
def test_a_chunk_that_dies_on_a_database_error_is_retried_after_the_lease(
    alice, workspace, sessions, settings
):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: a trigger raises a cancelled statement (57014) once")
    good, poisoned = sessions
    settings.JOB_CLAIM_LEASE = 1
    _refuse_audit_of(POISON, errcode="57014", once=True)
    job = actions.do_start_job(workspace, [*good, poisoned], policy="synthesize", acting_user=alice)

    job = wait_for_job(job, timeout=60)

    assert (job.done, job.failed) == (len(good) + 1, 0)
    assert set(job.items.values_list("status", flat=True)) == {"repaired"}
    assert AuditRecord.objects.get(job=job, session=poisoned).tool_call_id == POISON
