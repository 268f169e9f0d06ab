"""Fencing: a job writes a session only from the head it was created on, and leaves live ones."""

import os
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.utils import timezone

from tests.helpers import run_inline, sample
from tests.sessions import Script, Turn, claude_code
from transcripts import actions
from transcripts.actions import runner
from transcripts.engine import analyze
from transcripts.models import AuditRecord, Revision, Session

pytestmark = pytest.mark.django_db


def live_session_bytes():
    """Return a Claude Code session whose last line is a tool call still waiting for its result."""
    lines = claude_code(Script([Turn(["call_1"], ["ok"]), Turn(["call_2"], ["missing"])]))
    return b"".join(lines.splitlines(keepends=True)[:-1])


@pytest.fixture
def live(workspace, alice):
    return actions.do_ingest_session(
        workspace,
        "live.jsonl",
        live_session_bytes(),
        acting_user=alice,
        last_write=timezone.now() - timedelta(seconds=30),
    )


def test_it_skips_a_session_still_being_written(alice, workspace, live):
    job = run_inline(
        actions.do_start_job(workspace, [live], policy="synthesize", acting_user=alice)
    )

    item = job.items.get()
    assert (job.status, job.done, job.pending) == ("done", 0, 1)
    assert item.status == "pending"
    assert item.error.startswith("1 pending result(s): the session was last written at ")
    assert item.error.endswith("and may still be running; a forced job repairs it anyway")
    assert live.revisions.count() == 1
    assert not AuditRecord.objects.filter(job=job).exists()


def test_a_forced_job_repairs_the_live_session(alice, workspace, live):
    job = actions.do_start_job(
        workspace, [live], policy="synthesize", force=True, acting_user=alice
    )
    job = run_inline(job)

    item = job.items.get()
    assert (item.status, job.done, job.pending) == ("repaired", 1, 0)
    expected = analyze(live_session_bytes(), "live.jsonl", "synthesize")
    assert item.revision.read() == expected.repaired
    audit = AuditRecord.objects.get(job=job)
    assert (audit.op, audit.fault_kind, audit.tool_call_id) == (
        "insert_result",
        "missing_result",
        "call_2",
    )


def test_a_session_written_long_ago_is_not_live(alice, workspace):
    session = actions.do_ingest_session(
        workspace,
        "old.jsonl",
        live_session_bytes(),
        acting_user=alice,
        last_write=timezone.now() - timedelta(days=1),
    )
    job = run_inline(
        actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    )
    assert job.items.get().status == "repaired"


def test_a_dry_run_reports_live_sessions_too(alice, workspace, live):
    job = actions.do_start_job(
        workspace, [live], kind="dry_run", policy="synthesize", acting_user=alice
    )
    assert run_inline(job).items.get().status == "pending"


def test_an_upload_has_no_last_write_so_it_is_never_live(alice_client, alice, workspace):
    alice_client.post(
        "/sessions/upload/",
        {
            "workspace": workspace.pk,
            "files": [SimpleUploadedFile("up.jsonl", live_session_bytes())],
        },
    )
    session = Session.objects.get()
    assert session.last_write is None
    job = run_inline(
        actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    )
    assert job.items.get().status == "repaired"


def test_ingest_records_the_files_modification_time(tmp_path):
    path = tmp_path / "live.jsonl"
    path.write_bytes(live_session_bytes())
    written = time.time() - 42
    os.utime(path, (written, written))

    call_command("ingest", str(path))

    assert Session.objects.get().last_write == datetime.fromtimestamp(written, UTC)


def test_a_session_repaired_after_the_job_was_created_is_not_written_again(
    alice, workspace, ingest
):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    slow = actions.do_start_job(workspace, [session], policy="discard", acting_user=alice)
    run_inline(actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice))

    slow = run_inline(slow)

    item = slow.items.get()
    assert (slow.status, slow.done, slow.fence_lost) == ("done", 0, 1)
    assert (item.status, item.revision) == ("fence_lost", None)
    assert item.error == (
        "the session's head moved from revision 0 to revision 1 since the job was created"
    )
    session.refresh_from_db()
    assert (session.head.number, session.head.policy) == (1, "synthesize")
    assert not AuditRecord.objects.filter(job=slow).exists()


def test_a_head_that_moves_while_the_job_repairs_it_is_not_overwritten(
    alice, workspace, ingest, monkeypatch
):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    job = actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    store_repaired = runner.store_repaired

    def meanwhile(analysis, **options):
        # Another writer commits revision 1 after the job read the head.
        raw = session.revisions.get(number=0)
        other = Revision.objects.create(
            session=session,
            number=1,
            sha256=raw.sha256,
            size=raw.size,
            engine_version="x",
            parent=raw,
        )
        Session.objects.filter(pk=session.pk).update(head=other)
        return store_repaired(analysis, **options)

    monkeypatch.setattr(runner, "store_repaired", meanwhile)
    job = run_inline(job)

    item = job.items.get()
    assert (item.status, item.error) == (
        "fence_lost",
        "another writer took revision 1 of the session",
    )
    assert (job.done, job.fence_lost) == (0, 1)
    assert session.revisions.count() == 2
    assert not AuditRecord.objects.filter(job=job).exists()
