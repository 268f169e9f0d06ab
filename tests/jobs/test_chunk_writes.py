"""A chunk's results are written together; one session that cannot be written costs only itself."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.core.files.storage import FileSystemStorage
from django.db import connection, connections, transaction
from django.utils import timezone

from tests.helpers import run_inline, sample
from transcripts import actions
from transcripts.actions import common, runner
from transcripts.engine import analyze
from transcripts.models import AuditRecord, JobItem, Revision, Session

FAULTY = [
    "formats/claude_code.jsonl",
    "formats/openclaw.jsonl",
    "formats/openai_chat.json",
    "formats/gemini.json",
    "formats/responses.json",
    "cases/10_openclaw-displaced-dup-orphan-results.jsonl",
]


@pytest.fixture
def faulty(workspace, ingest):
    return [ingest(workspace, name.split("/")[-1], sample(name)) for name in FAULTY]


def revisions_of(session: Session) -> list[int]:
    return list(session.revisions.values_list("number", flat=True))


@pytest.mark.django_db
@pytest.mark.parametrize("policy", ["synthesize", "discard", "openmaic"])
def test_each_new_head_has_the_counts_of_its_own_bytes(alice, workspace, faulty, policy):
    # Where the plan accounts for them and where the repaired bytes are read again.
    job = run_inline(actions.do_start_job(workspace, faulty, policy=policy, acting_user=alice))

    assert job.done == len(FAULTY)
    for session in Session.objects.filter(pk__in=[s.pk for s in faulty]):
        again = analyze(session.head.read(), session.name, policy, format=session.format)
        assert (session.record_count, session.fault_counts) == (
            again.record_count,
            again.fault_counts,
        )


@pytest.mark.django_db
def test_a_head_that_moved_costs_only_its_own_session(alice, workspace, faulty, monkeypatch):
    job = actions.do_start_job(workspace, faulty, policy="synthesize", acting_user=alice)
    moved = faulty[1]
    store_repaired = runner.store_repaired

    def meanwhile(analysis, **options):
        # Another writer moves one session's head while the chunk is being repaired.
        if not moved.revisions.filter(number=1).exists():
            raw = moved.revisions.get(number=0)
            other = Revision.objects.create(
                session=moved, number=1, sha256=raw.sha256, size=raw.size, parent=raw
            )
            Session.objects.filter(pk=moved.pk).update(head=other)
        return store_repaired(analysis, **options)

    monkeypatch.setattr(runner, "store_repaired", meanwhile)
    job = run_inline(job)

    assert (job.done, job.fence_lost) == (len(FAULTY) - 1, 1)
    lost = job.items.get(session=moved)
    assert (lost.status, lost.error, lost.revision) == (
        "fence_lost",
        "another writer took revision 1 of the session",
        None,
    )
    assert revisions_of(moved) == [0, 1]
    assert not AuditRecord.objects.filter(job=job, session=moved).exists()
    for session in faulty:
        if session != moved:
            assert job.items.get(session=session).status == "repaired"
            assert revisions_of(session) == [0, 1]


@pytest.mark.django_db
def test_a_revision_number_taken_under_the_chunk_costs_only_its_session(
    alice, workspace, faulty, monkeypatch
):
    job = actions.do_start_job(workspace, faulty, policy="synthesize", acting_user=alice)
    taken = faulty[2]
    store_repaired = runner.store_repaired

    def meanwhile(analysis, **options):
        # A writer that takes revision 1 without moving the head: the chunk's
        # transaction fails on (session, number), and each session is written alone.
        if not taken.revisions.filter(number=1).exists():
            raw = taken.revisions.get(number=0)
            Revision.objects.create(
                session=taken, number=1, sha256=raw.sha256, size=raw.size, parent=raw
            )
        return store_repaired(analysis, **options)

    monkeypatch.setattr(runner, "store_repaired", meanwhile)
    job = run_inline(job)

    assert (job.done, job.fence_lost) == (len(FAULTY) - 1, 1)
    item = job.items.get(session=taken)
    assert (item.status, item.error) == (
        "fence_lost",
        "another writer took revision 1 of the session",
    )
    assert not AuditRecord.objects.filter(job=job, session=taken).exists()
    audited = AuditRecord.objects.filter(job=job).values_list("session", flat=True)
    assert set(audited) == {s.pk for s in faulty} - {taken.pk}
    assert JobItem.objects.filter(job=job, status="repaired").count() == len(FAULTY) - 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="needs PostgreSQL: SQLite's write lock holds the whole database, never one row",
)
def test_an_item_a_cancel_is_writing_is_left_to_the_cancel(alice, workspace, faulty):
    job = actions.do_start_job(workspace, faulty, policy="synthesize", acting_user=alice)
    [ids] = actions.do_fan_out_job(job.pk)
    claim = runner._claim(ids)
    items = list(JobItem.objects.filter(pk__in=ids).select_related("session__head", "base__parent"))
    locked, release = threading.Event(), threading.Event()

    def cancel_in_progress() -> None:
        # A cancel's UPDATE has reached one item of the chunk and not committed yet.
        try:
            with transaction.atomic():
                JobItem.objects.filter(pk=ids[0]).update(status="cancelled", claim=None)
                locked.set()
                release.wait(30)
        finally:
            connections.close_all()

    thread = threading.Thread(target=cancel_in_progress)
    thread.start()
    assert locked.wait(30)
    try:
        written = runner._run_claimed(job, claim, items)
        # Written without waiting for the cancel (two such waits can deadlock).
        assert thread.is_alive()
    finally:
        release.set()
        thread.join()

    assert sorted(written) == sorted(ids[1:])
    statuses = dict(JobItem.objects.filter(pk__in=ids).values_list("pk", "status"))
    assert statuses[ids[0]] == "cancelled"
    assert {statuses[pk] for pk in ids[1:]} == {"repaired"}
    job.refresh_from_db()
    assert job.done == len(FAULTY) - 1


class Killed(BaseException):
    """Stands in for SIGKILL: nothing after it runs, no `except Exception` catches it."""


@pytest.mark.django_db
def test_a_chunk_redelivered_after_its_worker_died_counts_its_items_once(
    alice, workspace, ingest, settings, monkeypatch
):
    sessions = [
        ingest(workspace, f"{i}.jsonl", sample("formats/claude_code.jsonl")) for i in range(4)
    ]
    job = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    [chunk] = runner.do_fan_out_job(job.pk)
    first, second = chunk[:2], chunk[2:]

    def killed(*args, **kwargs):
        raise Killed

    # The worker dies after counting its first item processed (at once, the job's first
    # here), before writing the chunk, which would have counted the second.
    monkeypatch.setattr(runner, "PROGRESS_INTERVAL", 3600)
    monkeypatch.setattr(runner.Progress, "last", None)
    with monkeypatch.context() as m:
        m.setattr(runner, "_write", killed)
        with pytest.raises(Killed):
            runner.do_run_job_items(job.pk, first)
    job.refresh_from_db()
    assert job.processed == 1
    # Redis redelivers the chunk once its lease has passed (acks_late).
    JobItem.objects.filter(pk__in=first).update(
        claimed_at=timezone.now() - timedelta(seconds=settings.JOB_CLAIM_LEASE + 1)
    )
    assert runner.do_run_job_items(job.pk, first) == []
    job.refresh_from_db()
    finished = JobItem.objects.filter(job=job).exclude(status__in=runner.UNFINISHED).count()
    assert finished == 2 and len(second) == 2
    assert job.processed == finished, (job.processed, finished, job.total, job.progress)
    assert job.progress == 2  # "2 of 4 sessions processed", not every one of them
    assert runner.do_run_job_items(job.pk, second) == []
    job.refresh_from_db()
    assert (job.status, job.processed, job.done) == (job.Status.DONE, 4, 4)


@pytest.mark.django_db
def test_write_heads_moves_only_the_heads_still_at_their_fence(alice, workspace, ingest):
    data = sample("formats/claude_code.jsonl")
    kept, moved, deleted = (ingest(workspace, f"{i}.jsonl", data) for i in range(3))
    raw = {s.pk: s.head for s in (kept, moved, deleted)}
    new = {
        s.pk: Revision.objects.create(
            session=s, number=1, sha256=raw[s.pk].sha256, size=raw[s.pk].size, parent=raw[s.pk]
        )
        for s in (kept, moved, deleted)
    }
    # Another writer moved one head; another session was deleted.
    other = Revision.objects.create(
        session=moved, number=2, sha256=raw[moved.pk].sha256, size=raw[moved.pk].size
    )
    Session.objects.filter(pk=moved.pk).update(head=other)
    Session.objects.filter(pk=deleted.pk).update(deleted_at=timezone.now())
    state = common.HeadState("claude_code", 7, {"missing_result": 2}, "", None)

    with transaction.atomic():
        written = common.write_heads(
            [common.HeadMove(s, new[s.pk], state, raw[s.pk]) for s in (kept, moved, deleted)]
        )

    assert written == [True, False, False]
    heads = dict(Session._base_manager.values_list("pk", "head"))  # the deleted one too
    assert heads == {kept.pk: new[kept.pk].pk, moved.pk: other.pk, deleted.pk: raw[deleted.pk].pk}
    kept.refresh_from_db()
    assert (kept.record_count, kept.fault_counts, kept.head) == (
        7,
        {"missing_result": 2},
        new[kept.pk],
    )


@pytest.mark.django_db
def test_a_chunk_on_local_storage_reads_and_stores_in_the_workers_own_thread(
    alice, workspace, faulty, monkeypatch
):
    # Local files answer at once: no blob threads (runner.ChunkBlobs) for them.
    threads = []
    for name in ("_open", "exists", "_save"):
        real = getattr(FileSystemStorage, name)

        def recorded(self, *args, real=real):
            threads.append((real.__name__, threading.current_thread().name))
            return real(self, *args)

        monkeypatch.setattr(FileSystemStorage, name, recorded)
    job = actions.do_start_job(workspace, faulty, policy="synthesize", acting_user=alice)
    job = run_inline(job)

    assert job.done == len(FAULTY)
    # Each base read; each repair stored, or found stored already (local files are not
    # overwritten: `exists` is asked first).
    assert {"_open", "exists"} <= {call for call, _ in threads}
    assert {thread for _, thread in threads} == {threading.current_thread().name}
