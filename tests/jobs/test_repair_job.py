"""Bulk repair jobs, run by a real Celery worker against the configured broker."""

import pytest

from tests.helpers import ORPHANED_CALL, run_inline, sample, wait_for_job
from transcripts import actions
from transcripts.engine import ENGINE_VERSION, analyze
from transcripts.models import AuditRecord, Job, JobItem, Revision

FAULTY = ["formats/claude_code.jsonl", "formats/openclaw.jsonl", "formats/openai_chat.json"]
HEALTHY = "cases/02_cc-parallel-results-split-lines.jsonl"


@pytest.mark.usefixtures("celery_worker")
def test_the_worker_repairs_each_session_and_audits_every_op(alice, workspace, ingest):
    faulty = {name: ingest(workspace, name.split("/")[1], sample(name)) for name in FAULTY}
    healthy = ingest(workspace, "healthy.jsonl", sample(HEALTHY))
    unreadable = ingest(workspace, "broken.jsonl", b"not json at all\n")
    sessions = [*faulty.values(), healthy, unreadable]

    job = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    job = wait_for_job(job)

    assert (job.total, job.done, job.failed) == (5, 4, 1)
    assert job.finished_at is not None
    statuses = dict(job.items.values_list("session__name", "status"))
    assert statuses == {
        "claude_code.jsonl": "repaired",
        "openclaw.jsonl": "repaired",
        "openai_chat.json": "repaired",
        "healthy.jsonl": "unchanged",
        "broken.jsonl": "failed",
    }
    assert job.items.get(session=unreadable).error.startswith("broken.jsonl")

    for name, session in faulty.items():
        raw = sample(name)
        session.refresh_from_db()
        head = session.head
        assert head.number == 1
        assert (head.parent.number, head.policy, head.engine_version) == (
            0,
            "synthesize",
            ENGINE_VERSION,
        )
        assert head.created_by == alice
        # Raw is sacred: revision 0 still holds the uploaded bytes.
        assert session.revisions.get(number=0).read() == raw
        expected = analyze(raw, session.name, "synthesize")
        assert head.read() == expected.repaired
        # Left in the list: only the marker of the result the repair synthesized (none in
        # Claude Code's file, where the result is Claude Code's own interrupt text).
        left = {} if name.endswith("claude_code.jsonl") else {"existing_synthetic": 1}
        assert session.fault_counts == left
        audit = AuditRecord.objects.filter(job=job, session=session)
        assert [(a.op, a.fault_kind, a.tool_call_id, a.record) for a in audit] == [
            (str(op.kind), str(op.fault.kind), op.tool_call_id, op.record or op.fault.record)
            for op in expected.plan.ops
        ]
        assert all(a.revision_from == head.parent and a.revision_to == head for a in audit)
        assert all(a.acting_user == alice for a in audit)

    claude = AuditRecord.objects.get(job=job, session=faulty["formats/claude_code.jsonl"])
    assert (claude.op, claude.fault_kind, claude.tool_call_id) == (
        "insert_result",
        "missing_result",
        ORPHANED_CALL,
    )
    assert claude.policy_row
    assert not Revision.objects.filter(session__in=[healthy, unreadable], number__gt=0).exists()


@pytest.mark.usefixtures("celery_worker")
def test_a_second_job_on_repaired_sessions_changes_nothing(alice, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    wait_for_job(actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice))

    second = wait_for_job(
        actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    )

    assert second.items.get().status == "unchanged"
    assert session.revisions.count() == 2
    assert not AuditRecord.objects.filter(job=second).exists()


@pytest.mark.django_db
def test_running_a_job_twice_repairs_once(alice, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    job = actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)

    # A redelivered task (acks_late) runs the same job again.
    run_inline(job)
    run_inline(job)

    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == ("done", 1, 0)
    assert session.revisions.count() == 2
    assert AuditRecord.objects.filter(job=job).count() == 1


@pytest.mark.django_db
def test_it_writes_nothing_when_the_fence_is_lost(alice, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    job = actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    # Another writer has taken revision 1 but not yet moved the head.
    Revision.objects.create(
        session=session, number=1, sha256=session.head.sha256, size=1, engine_version="x"
    )

    run_inline(job)

    job.refresh_from_db()
    item = job.items.get()
    assert (item.status, item.revision) == (JobItem.Status.FENCE_LOST, None)
    # Skipped, not failed: the session changed under the job.
    assert (job.status, job.done, job.failed, job.fence_lost) == (Job.Status.DONE, 0, 0, 1)
    session.refresh_from_db()
    assert session.head.number == 0
    assert not AuditRecord.objects.filter(job=job).exists()


@pytest.mark.django_db
def test_revisions_and_audit_records_cannot_be_rewritten(alice, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    with pytest.raises(ValueError, match="immutable"):
        session.head.save()
    with pytest.raises(ValueError, match="append-only"):
        AuditRecord.objects.get().save()


@pytest.mark.usefixtures("celery_worker")
def test_an_insert_into_a_message_and_a_reordering_are_audited_with_their_place(
    alice, workspace, ingest
):
    session = ingest(
        workspace, "19.json", sample("cases/19_anthropic-resume-orphan-mid-history.json")
    )
    job = wait_for_job(
        actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    )

    audit = AuditRecord.objects.get(job=job, session=session)
    assert (audit.op, audit.tool_call_id, audit.target) == (
        "insert_result",
        "toolu_syn_srv_01",
        2,
    )
    assert audit.position == "into record 2"
    assert audit.policy_row == "synthesize: missing_result -> synthesize"


READ_PATHS = [
    "cases/01_cc-compaction-orphan-result.jsonl",
    "cases/07_codex-interrupt-no-tool-output.jsonl",
    "cases/10_openclaw-displaced-dup-orphan-results.jsonl",
    "cases/12_openai-chat-parallel-partial-results.json",
    "formats/claude_code.jsonl",
]


def _job_result(workspace, alice, ingest, kind=Job.Kind.REPAIR):
    sessions = [ingest(workspace, name.split("/")[1], sample(name)) for name in READ_PATHS]
    job = run_inline(
        actions.do_start_job(workspace, sessions, kind=kind, policy="synthesize", acting_user=alice)
    )
    heads = {}
    for session in sessions:
        session.refresh_from_db()
        audit = AuditRecord.objects.filter(job=job, session=session).order_by("pk")
        heads[session.name] = (
            session.head.read(),
            session.head.sha256,
            session.record_count,
            session.fault_counts,
            list(
                audit.values_list(
                    "op", "fault_kind", "record", "span_start", "span_end", "removed_bytes"
                )
            ),
            job.items.get(session=session).status,
        )
    return job, heads


@pytest.mark.django_db
def test_a_session_read_whole_and_one_streamed_give_the_same_repair(
    alice, workspace, ingest, settings, monkeypatch
):
    other_workspace = actions.do_create_workspace("Gamma", acting_user=alice)
    streams = []
    source = Revision.source

    def counted(revision):
        streams.append(revision.pk)
        return source(revision)

    monkeypatch.setattr(Revision, "source", counted)
    settings.JOB_INLINE_BYTES = 0
    streamed, streamed_heads = _job_result(workspace, alice, ingest)
    assert len(streams) == len(READ_PATHS)
    settings.JOB_INLINE_BYTES = 1 << 20
    whole, whole_heads = _job_result(other_workspace, alice, ingest)
    assert len(streams) == len(READ_PATHS)  # each read whole, none streamed

    assert whole_heads == streamed_heads
    assert {name: head[-1] for name, head in whole_heads.items()} == dict.fromkeys(
        [name.split("/")[1] for name in READ_PATHS], "repaired"
    )
    for name in READ_PATHS:
        raw = sample(name)
        expected = analyze(raw, name.split("/")[1], "synthesize")
        assert whole_heads[name.split("/")[1]][0] == expected.repaired
    # Rolled back, each way: the raw bytes are the head again, with the raw counts.
    for job, size in ((streamed, 0), (whole, 1 << 20)):
        settings.JOB_INLINE_BYTES = size
        rollback = run_inline(actions.do_start_rollback_job(job, acting_user=alice))
        assert rollback.done == len(READ_PATHS)
        for item in rollback.items.select_related("session__head"):
            raw = sample(next(n for n in READ_PATHS if n.endswith("/" + item.session.name)))
            expected = analyze(raw, item.session.name, "synthesize")
            assert item.session.head.read() == raw
            assert item.session.fault_counts == expected.fault_counts
