"""Bulk jobs: dry run, fan-out in chunks, claims, cancel and retry, as the tasks run them."""

from datetime import timedelta

import pytest
from django.core.files.storage import Storage
from django.utils import timezone

from tests.helpers import ORPHANED_CALL, run_inline, sample
from transcripts import actions
from transcripts.actions import runner
from transcripts.engine import analyze
from transcripts.models import AuditRecord, Job, JobItem, Revision, Session, blob_name

pytestmark = pytest.mark.django_db

FAULTY = ["formats/claude_code.jsonl", "formats/openclaw.jsonl", "formats/openai_chat.json"]
HEALTHY = "cases/02_cc-parallel-results-split-lines.jsonl"


@pytest.fixture
def faulty(workspace, ingest):
    return [ingest(workspace, name.split("/")[1], sample(name)) for name in FAULTY]


def snapshot():
    """Return everything a job may write to sessions: heads, revisions, audit records."""
    return (
        sorted(Session.objects.values_list("pk", "head_id", "fault_counts", "record_count")),
        Revision.objects.count(),
        AuditRecord.objects.count(),
    )


def test_a_dry_run_plans_the_repair_and_writes_nothing(alice, workspace, ingest, faulty):
    healthy = ingest(workspace, "healthy.jsonl", sample(HEALTHY))
    broken = ingest(workspace, "broken.jsonl", b"not json\n")
    before = snapshot()

    job = actions.do_start_job(
        workspace,
        [*faulty, healthy, broken],
        kind=Job.Kind.DRY_RUN,
        policy="synthesize",
        acting_user=alice,
    )
    job = run_inline(job)

    assert snapshot() == before
    assert (job.status, job.total, job.done, job.failed) == ("done", 5, 4, 1)
    statuses = dict(job.items.values_list("session__name", "status"))
    assert statuses == {
        "claude_code.jsonl": "would_repair",
        "openclaw.jsonl": "would_repair",
        "openai_chat.json": "would_repair",
        "healthy.jsonl": "unchanged",
        "broken.jsonl": "failed",
    }
    for session, name in zip(faulty, FAULTY, strict=True):
        item = job.items.get(session=session)
        plan = analyze(sample(name), session.name, "synthesize").plan
        assert item.op_count == len(plan.ops) > 0
        assert sum(item.op_counts.values()) == item.op_count
        assert item.diff.startswith(f"--- {session.name} (before)\n+++ {session.name} (after)\n@@")
    claude = job.items.get(session=faulty[0])
    assert claude.op_counts == {"insert_result": 1}
    raw = sample(FAULTY[0]).decode().splitlines()
    repaired = analyze(sample(FAULTY[0]), "claude_code.jsonl", "synthesize").repaired
    new = [line for line in repaired.decode().splitlines() if line not in raw]
    added = [line for line in claude.diff.splitlines() if line.startswith("+{")]
    # The inserted result and the line re-pointed at it, each cut to about 300 characters:
    # its start, then the part from just before where it differs from the line it replaces
    # (the inserted result's tool_use_id lies past the first 300 of the line).
    assert len(added) == len(new) == 2 and all(len(line) <= 302 for line in added)
    assert ORPHANED_CALL in new[0] and ORPHANED_CALL not in new[0][:300]
    assert added[0].startswith(("+" + new[0])[:75] + "…") and ORPHANED_CALL in added[0]


def test_a_repair_from_a_dry_run_is_fenced_on_the_revisions_the_dry_run_read(
    alice, workspace, faulty
):
    dry_run = run_inline(
        actions.do_start_job(
            workspace, faulty, kind=Job.Kind.DRY_RUN, policy="synthesize", acting_user=alice
        )
    )
    # Someone repairs one of the sessions between the dry run and the real run.
    run_inline(actions.do_start_job(workspace, faulty[:1], policy="discard", acting_user=alice))

    job = run_inline(actions.do_start_repair_from_dry_run(dry_run, acting_user=alice))

    assert (job.kind, job.policy, job.source_job) == ("repair", "synthesize", dry_run)
    assert (job.total, job.done, job.fence_lost) == (3, 2, 1)
    lost = job.items.get(session=faulty[0])
    assert lost.status == "fence_lost"
    assert lost.error == (
        "the session's head moved from revision 0 to revision 1 since the job was created"
    )
    assert faulty[0].revisions.count() == 2  # the discard repair only


def test_only_a_finished_dry_run_can_be_applied(alice, workspace, faulty):
    dry_run = actions.do_start_job(
        workspace, faulty, kind=Job.Kind.DRY_RUN, policy="synthesize", acting_user=alice
    )
    with pytest.raises(actions.JobStateError):
        actions.do_start_repair_from_dry_run(dry_run, acting_user=alice)
    repair = run_inline(
        actions.do_start_job(workspace, faulty, policy="discard", acting_user=alice)
    )
    with pytest.raises(actions.JobStateError):
        actions.do_start_repair_from_dry_run(repair, acting_user=alice)


def test_the_kickoff_fans_the_items_out_in_chunks(alice, workspace, faulty, ingest, settings):
    settings.JOB_CHUNK_SIZE = 2
    sessions = [*faulty, *(ingest(workspace, f"h{n}.jsonl", sample(HEALTHY)) for n in range(2))]
    job = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)

    chunks = actions.do_fan_out_job(job.pk)

    ids = list(job.items.order_by("pk").values_list("pk", flat=True))
    assert chunks == [ids[0:2], ids[2:4], ids[4:5]]
    job.refresh_from_db()
    assert job.status == "running" and job.started_at is not None
    for chunk in chunks:
        assert actions.do_run_job_items(job.pk, chunk) == []
    job.refresh_from_db()
    assert (job.status, job.done) == ("done", 5)
    # A redelivered kickoff and chunk find nothing left to do.
    assert actions.do_fan_out_job(job.pk) == []
    assert actions.do_run_job_items(job.pk, ids) == []
    assert Revision.objects.filter(number=1).count() == 3
    assert AuditRecord.objects.filter(job=job).count() == 3


def test_chunks_of_large_sessions_are_cut_by_their_bytes(alice, workspace, ingest, settings):
    settings.JOB_CHUNK_SIZE = 10
    body = sample("formats/claude_code.jsonl")
    sizes = [1, 1, 3, 1, 1, 1]  # in multiples of the sample's size
    sessions = [
        ingest(workspace, f"s{n}.jsonl", body + b"\n" * (len(body) * (k - 1)))
        for n, k in enumerate(sizes)
    ]
    settings.JOB_CHUNK_BYTES = int(len(body) * 2.5)
    job = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)

    chunks = actions.do_fan_out_job(job.pk)

    ids = list(job.items.order_by("pk").values_list("pk", flat=True))
    # Two small ones fill a chunk; the large one passes the cap alone; three small ones
    # would pass it, so two, then the last.
    assert chunks == [ids[0:2], ids[2:3], ids[3:5], ids[5:6]]
    for chunk in chunks:
        assert actions.do_run_job_items(job.pk, chunk) == []
    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == ("done", 6, 0)

    # A rollback is cut by the bytes it restores: the parents, the sizes above again.
    settings.JOB_CHUNK_SIZE = 4
    rollback = actions.do_start_rollback_job(job, acting_user=alice)
    back = list(rollback.items.order_by("pk").values_list("pk", flat=True))
    assert actions.do_fan_out_job(rollback.pk) == [back[0:2], back[2:3], back[3:5], back[5:6]]


def test_the_chunk_cap_in_items_holds_for_small_sessions(settings):
    settings.JOB_CHUNK_SIZE = 3
    settings.JOB_CHUNK_BYTES = 100
    assert runner.chunked([(n, 10) for n in range(7)]) == [[0, 1, 2], [3, 4, 5], [6]]
    # One over the cap is alone; one with nothing to read (None) weighs nothing.
    assert runner.chunked([(1, 500), (2, None), (3, 0), (4, 101), (5, 50), (6, 50)]) == [
        [1],
        [2, 3],
        [4],
        [5, 6],
    ]
    assert runner.chunked([]) == []


def test_an_item_claimed_by_a_live_worker_is_left_to_it(alice, workspace, faulty):
    job = actions.do_start_job(workspace, faulty[:1], policy="synthesize", acting_user=alice)
    actions.do_fan_out_job(job.pk)
    item = job.items.get()
    JobItem.objects.filter(pk=item.pk).update(
        status="running", claim="00000000-0000-0000-0000-000000000001", claimed_at=timezone.now()
    )

    assert actions.do_run_job_items(job.pk, [item.pk]) == [item.pk]

    item.refresh_from_db()
    assert item.status == "running"
    assert faulty[0].revisions.count() == 1


def test_a_claim_whose_lease_has_passed_is_taken_over(alice, workspace, faulty, settings):
    job = actions.do_start_job(workspace, faulty[:1], policy="synthesize", acting_user=alice)
    actions.do_fan_out_job(job.pk)
    item = job.items.get()
    # Its worker died long ago.
    dead = timezone.now() - timedelta(seconds=settings.JOB_CLAIM_LEASE + 1)
    JobItem.objects.filter(pk=item.pk).update(
        status="running", claim="00000000-0000-0000-0000-000000000001", claimed_at=dead
    )

    assert actions.do_run_job_items(job.pk, [item.pk]) == []

    item.refresh_from_db()
    job.refresh_from_db()
    assert (item.status, item.revision.number) == ("repaired", 1)
    assert (job.status, job.done) == ("done", 1)


def test_a_worker_that_lost_its_claim_writes_nothing(alice, workspace, faulty):
    job = actions.do_start_job(workspace, faulty[:1], policy="synthesize", acting_user=alice)
    actions.do_fan_out_job(job.pk)
    item = job.items.select_related("session__head", "base__parent").get()
    claim = runner._claim([item.pk])
    # Another worker took the item over (this one stalled beyond its lease).
    JobItem.objects.filter(pk=item.pk).update(claim="00000000-0000-0000-0000-000000000002")

    assert runner._run_claimed(job, claim, [item]) == []

    assert faulty[0].revisions.count() == 1
    assert not AuditRecord.objects.filter(job=job).exists()
    job.refresh_from_db()
    assert job.done == 0


def test_cancel_stops_the_items_not_yet_written(alice, workspace, faulty):
    job = actions.do_start_job(workspace, faulty, policy="synthesize", acting_user=alice)
    chunks = actions.do_fan_out_job(job.pk)
    first, *rest = chunks[0]
    actions.do_run_job_items(job.pk, [first])
    # A worker is halfway through the second item when the operator cancels.
    working = job.items.select_related("session__head", "base__parent").get(pk=rest[0])
    claim = runner._claim([working.pk])

    assert actions.do_cancel_job(job, acting_user=alice)

    assert runner._run_claimed(job, claim, [working]) == []
    assert actions.do_run_job_items(job.pk, rest) == []
    job.refresh_from_db()
    assert (job.status, job.done, job.cancelled, job.finished_items) == ("cancelled", 1, 2, 3)
    assert job.finished_at is not None
    assert sorted(job.items.values_list("status", flat=True)) == [
        "cancelled",
        "cancelled",
        "repaired",
    ]
    assert Revision.objects.filter(number=1).count() == 1
    assert not actions.do_cancel_job(job, acting_user=alice)


def test_retry_runs_the_failed_items_again(alice, workspace, faulty, monkeypatch):
    real = Storage.open
    flaky_blob = blob_name(faulty[1].head.sha256)

    def flaky(storage, name, mode="rb"):
        if name == flaky_blob:
            raise RuntimeError("storage hiccup")
        return real(storage, name, mode)

    monkeypatch.setattr(Storage, "open", flaky)
    job = run_inline(
        actions.do_start_job(workspace, faulty, policy="synthesize", acting_user=alice)
    )
    assert (job.status, job.done, job.failed) == ("done", 2, 1)
    assert job.items.get(session=faulty[1]).error == "RuntimeError: storage hiccup"

    monkeypatch.setattr(Storage, "open", real)
    assert actions.do_retry_failed_items(job, acting_user=alice) == 1
    job.refresh_from_db()
    assert (job.status, job.failed, job.finished_at) == ("queued", 0, None)

    job = run_inline(job)
    assert (job.status, job.done, job.failed) == ("done", 3, 0)
    item = job.items.get(session=faulty[1])
    assert (item.status, item.error, item.revision.number) == ("repaired", "", 1)
    assert actions.do_retry_failed_items(job, acting_user=alice) == 0


def test_it_reports_the_rate_and_the_time_left(alice, workspace, faulty):
    job = actions.do_start_job(workspace, faulty, policy="synthesize", acting_user=alice)
    assert job.rate() is None and job.seconds_left() is None
    start = timezone.now()
    job.started_at, job.done, job.failed = start, 1, 1
    now = start + timedelta(seconds=4)
    assert job.rate(now) == 0.5
    assert job.seconds_left(now) == 2.0
    job.status, job.finished_at = "done", now
    assert job.seconds_left(now) is None


def test_a_job_with_nothing_left_finishes_at_once(alice, workspace):
    job = actions.do_start_job(workspace, [], policy="synthesize", acting_user=alice)
    job = run_inline(job)
    assert (job.status, job.total) == ("done", 0)


def test_a_dry_run_of_a_session_too_large_to_diff_gives_sizes_in_the_units_it_names(
    alice, workspace, faulty, monkeypatch
):
    monkeypatch.setattr(runner, "DIFF_MAX_BYTES", 4096)
    job = run_inline(
        actions.do_start_job(
            workspace, faulty[:1], kind=Job.Kind.DRY_RUN, policy="synthesize", acting_user=alice
        )
    )
    item = job.items.get()
    assert len(sample(FAULTY[0])) == 6075
    assert (item.status, item.diff) == (
        "would_repair",
        "(no diff: the session is 5.9 KiB, over 4.0 KiB)",
    )
