"""A repair job on S3 reads a chunk's bases ahead and stores its repairs behind (runner.ChunkBlobs).

The same revisions, blobs and audit as one chunk processed an item at a
time; an outage on a read ahead or on a store behind leaves the items from
the one it hit on claimed and unwritten; never more than JOB_BLOB_WINDOW bases
held, nor stores under way, at once.
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from django.db import connection

from tests.helpers import generated_sessions
from tests.storage.conftest import keys
from transcripts import actions
from transcripts.actions import runner
from transcripts.engine import analyze
from transcripts.models import AuditRecord, Job, JobItem, Revision, Session, blob_name
from transcripts.storage import S3BlobStorage

pytestmark = [pytest.mark.s3, pytest.mark.usefixtures("s3_settings")]

SESSIONS = 8


def ingest_faulty(workspace: Any, user: Any) -> list[Session]:
    """Ingest the generated sessions that have a fault into `workspace`, in name order."""
    sessions = [
        actions.do_ingest_session(workspace, path.name, path.read_bytes(), acting_user=user)
        for path in generated_sessions(2 * SESSIONS, seed=41)
    ]
    faulty = [s for s in sessions if s.fault_counts]
    assert len(faulty) >= SESSIONS, "the generator made too few faulty sessions"
    return faulty[:SESSIONS]


def start(workspace: Any, sessions: list[Session], user: Any) -> tuple[Job, list[int]]:
    """Start a repair of `sessions` as one chunk; return the job and its item ids in order."""
    job = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=user)
    [ids] = actions.do_fan_out_job(job.pk)
    return job, ids


def what_a_user_sees(workspace: Any) -> dict[str, Any]:
    """Return, per session name of a job of `workspace`, its revisions, audit and job item."""
    seen = {}
    for item in JobItem.objects.filter(job__workspace=workspace).select_related("session"):
        session = item.session
        revisions = list(
            session.revisions.order_by("number").values_list("number", "sha256", "size", "origin")
        )
        audit = list(
            AuditRecord.objects.filter(session=session)
            .order_by("pk")
            .values_list(
                "op",
                "fault_kind",
                "tool_call_id",
                "record",
                "span_start",
                "span_end",
                "removed_bytes",
                "revision_to__number",
            )
        )
        seen[session.name] = (revisions, audit, item.status, item.op_count, session.fault_counts)
    return seen


def assert_every_revision_is_stored(endpoint: str, bucket: str) -> None:
    stored = keys(endpoint, bucket)
    for sha256, size in Revision.objects.values_list("sha256", "size"):
        assert stored.get(blob_name(sha256)) == size, sha256


def threads_of(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[str]:
    """Record the name of the thread of every call of `owner.name` (left working as it is)."""
    seen: list[str] = []
    real = getattr(owner, name)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        seen.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, recorded)
    return seen


def repaired_name(session: Session) -> str:
    """Return the blob name of `session`'s repair under the synthesize policy."""
    repaired = analyze(session.head.read(), session.name, "synthesize", format=session.format)
    return blob_name(hashlib.sha256(repaired.repaired).hexdigest())


def test_a_chunk_on_s3_is_repaired_as_one_item_at_a_time_would_be(
    alice, bob, workspace, other_workspace, s3_endpoint, bucket, monkeypatch
):
    sequential = ingest_faulty(workspace, alice)
    pipelined = ingest_faulty(other_workspace, bob)
    with monkeypatch.context() as one_at_a_time:
        one_at_a_time.setattr(S3BlobStorage, "remote_io", False)
        job, ids = start(workspace, sequential, alice)
        assert actions.do_run_job_items(job.pk, ids) == []
    stored_by_the_first = keys(s3_endpoint, bucket)
    reads = threads_of(monkeypatch, runner, "read_revision")
    puts = threads_of(monkeypatch, S3BlobStorage, "_save")

    job, ids = start(other_workspace, pipelined, bob)
    assert actions.do_run_job_items(job.pk, ids) == []

    assert what_a_user_sees(other_workspace) == what_a_user_sees(workspace)
    # The same bytes: the second job stored exactly the blobs the first did.
    assert keys(s3_endpoint, bucket) == stored_by_the_first
    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == (Job.Status.DONE, SESSIONS, 0)
    assert len(reads) == SESSIONS and len(puts) == SESSIONS
    assert all(name.startswith("pairfix-blob") for name in reads + puts), reads + puts


@pytest.mark.parametrize("where", ["read_ahead", "store_behind"])
def test_an_outage_mid_chunk_leaves_that_item_and_the_rest_claimed(
    alice, workspace, s3_endpoint, bucket, settings, monkeypatch, where
):
    sessions = ingest_faulty(workspace, alice)
    hit = 3
    if where == "read_ahead":
        gone = blob_name(sessions[hit].head.sha256)
        owner, name = S3BlobStorage, "open_hashed"
    else:
        gone = repaired_name(sessions[hit])
        owner, name = S3BlobStorage, "_save"
    real = getattr(owner, name)

    def down_for_one(self: Any, blob: str, *args: Any) -> Any:
        if blob == gone:
            time.sleep(0.2)  # the later items are analysed meanwhile
            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9")
        return real(self, blob, *args)

    job, ids = start(workspace, sessions, alice)
    with monkeypatch.context() as outage:
        outage.setattr(owner, name, down_for_one)
        busy = actions.do_run_job_items(job.pk, ids)

    assert sorted(busy) == ids[hit:]
    items = {item.pk: item for item in JobItem.objects.filter(pk__in=ids)}
    assert [items[pk].status for pk in ids] == ["repaired"] * hit + ["running"] * (SESSIONS - hit)
    for session in sessions:
        session.refresh_from_db()
    assert [s.head.number for s in sessions] == [1] * hit + [0] * (SESSIONS - hit)
    assert not AuditRecord.objects.filter(job=job, session__in=sessions[hit:]).exists()
    assert_every_revision_is_stored(s3_endpoint, bucket)
    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == (Job.Status.RUNNING, hit, 0)

    settings.JOB_CLAIM_LEASE = 0  # the retry comes once the lease has passed
    assert actions.do_run_job_items(job.pk, ids) == []
    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == (Job.Status.DONE, SESSIONS, 0)
    assert_every_revision_is_stored(s3_endpoint, bucket)


def test_a_damaged_base_read_ahead_fails_only_its_own_session(
    alice, workspace, s3_endpoint, bucket
):
    from tests.storage.test_storage_failures import put_one_bit_flipped

    sessions = ingest_faulty(workspace, alice)
    damaged = sessions[2]
    put_one_bit_flipped(s3_endpoint, bucket, damaged.head.sha256, damaged.head.read())
    job, ids = start(workspace, sessions, alice)

    assert actions.do_run_job_items(job.pk, ids) == []

    statuses = dict(JobItem.objects.filter(pk__in=ids).values_list("session", "status"))
    assert statuses == {s.pk: "failed" if s is damaged else "repaired" for s in sessions}
    assert "does not hash to its name" in JobItem.objects.get(session=damaged).error
    assert_every_revision_is_stored(s3_endpoint, bucket)


def test_no_more_than_the_window_is_held_or_stored_at_once(alice, workspace, monkeypatch):
    sessions = ingest_faulty(workspace, alice)
    lock = threading.Lock()
    held = putting = 0
    most_held = most_putting = 0
    read, base, save = runner.read_revision, runner.ChunkBlobs.base, S3BlobStorage._save

    def reading(revision: Revision) -> bytes:
        nonlocal held, most_held
        with lock:  # from the read's start until the bytes are handed to the engine
            held += 1
            most_held = max(most_held, held)
        return read(revision)

    def handing(self: Any, item: JobItem) -> bytes | None:
        nonlocal held
        data = base(self, item)
        with lock:
            held -= data is not None
        return data

    def slow_save(self: Any, *args: Any) -> Any:
        nonlocal putting, most_putting
        with lock:
            putting += 1
            most_putting = max(most_putting, putting)
        time.sleep(0.05)  # a PUT of 50 ms, as real S3 answers
        try:
            return save(self, *args)
        finally:
            with lock:
                putting -= 1

    monkeypatch.setattr(runner, "read_revision", reading)
    monkeypatch.setattr(runner.ChunkBlobs, "base", handing)
    monkeypatch.setattr(S3BlobStorage, "_save", slow_save)
    job = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    chunks = actions.do_fan_out_job(job.pk)
    pools = []
    for half in (chunks[0][: SESSIONS // 2], chunks[0][SESSIONS // 2 :]):
        assert actions.do_run_job_items(job.pk, half) == []
        pools.append(runner._blob_pool())

    job.refresh_from_db()
    assert (job.status, job.done) == (Job.Status.DONE, SESSIONS)
    assert 1 < most_held <= runner.blob_window()
    assert 1 < most_putting <= runner.blob_window()
    assert held == putting == 0
    # One pool for the process, its threads kept from one chunk to the next.
    assert pools[0] is pools[1]
    assert len(pools[0]._threads) <= runner.blob_window()


def test_the_blob_threads_never_ask_the_database(alice, workspace, monkeypatch):
    # Django's connections are per thread: one a blob thread opened would stay open for ever.
    from django.db.backends import utils

    sessions = ingest_faulty(workspace, alice)
    asking = threads_of(monkeypatch, utils.CursorWrapper, "_execute")
    reads = threads_of(monkeypatch, runner, "read_revision")

    repair, ids = start(workspace, sessions, alice)
    assert actions.do_run_job_items(repair.pk, ids) == []
    repair.refresh_from_db()
    rollback = actions.do_start_rollback_job(repair, acting_user=alice)
    [ids] = actions.do_fan_out_job(rollback.pk)
    assert actions.do_run_job_items(rollback.pk, ids) == []
    export = actions.do_start_job(
        workspace, sessions, policy="synthesize", kind=Job.Kind.EXPORT, acting_user=alice
    )
    [ids] = actions.do_fan_out_job(export.pk)
    assert actions.do_run_job_items(export.pk, ids) == []

    for job in (repair, rollback, export):
        job.refresh_from_db()
        assert (job.status, job.done, job.failed) == (Job.Status.DONE, SESSIONS, 0)
    # Every base of the three jobs was read ahead, and never a query from a blob thread.
    assert len(reads) == 3 * SESSIONS
    assert set(reads) <= {f"pairfix-blob_{n}" for n in range(runner.blob_window())}
    assert asking and not [name for name in asking if name.startswith("pairfix-blob")]


def test_a_store_behind_refused_fails_only_its_own_session(
    alice, workspace, s3_endpoint, bucket, monkeypatch
):
    sessions = ingest_faulty(workspace, alice)
    refused = sessions[2]
    gone = repaired_name(refused)
    save = S3BlobStorage._save

    def refusing(self: Any, name: str, *args: Any) -> Any:
        if name == gone:
            error = {"Code": "AccessDenied", "Message": "Access Denied"}
            raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 403}}, "Put")
        return save(self, name, *args)

    monkeypatch.setattr(S3BlobStorage, "_save", refusing)
    job, ids = start(workspace, sessions, alice)

    assert actions.do_run_job_items(job.pk, ids) == []

    statuses = dict(JobItem.objects.filter(pk__in=ids).values_list("session", "status"))
    assert statuses == {s.pk: "failed" if s is refused else "repaired" for s in sessions}
    assert "AccessDenied" in JobItem.objects.get(session=refused).error
    refused.refresh_from_db()
    assert refused.head.number == 0
    assert not AuditRecord.objects.filter(job=job, session=refused).exists()
    assert_every_revision_is_stored(s3_endpoint, bucket)
    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == (Job.Status.DONE, SESSIONS - 1, 1)


def test_a_cancel_while_repairs_are_stored_behind_writes_none_of_them(
    transactional_db, alice, workspace, monkeypatch
):
    sessions = ingest_faulty(workspace, alice)
    job, ids = start(workspace, sessions, alice)
    cancel_at = repaired_name(sessions[2])
    save = S3BlobStorage._save

    def cancelling(self: Any, name: str, *args: Any) -> Any:
        if name == cancel_at:  # from a blob thread, while the chunk goes on
            assert actions.do_cancel_job(job, acting_user=alice)
            connection.close()  # the thread's own, which would outlive the test
        return save(self, name, *args)

    monkeypatch.setattr(S3BlobStorage, "_save", cancelling)
    started = time.monotonic()

    assert actions.do_run_job_items(job.pk, ids) == []

    assert time.monotonic() - started < 30
    job.refresh_from_db()
    assert (job.status, job.done, job.cancelled) == (Job.Status.CANCELLED, 0, SESSIONS)
    assert set(JobItem.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"cancelled"}
    assert [s.revisions.count() for s in sessions] == [1] * SESSIONS
    assert not AuditRecord.objects.filter(job=job).exclude(op="").exists()
