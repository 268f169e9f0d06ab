"""A repair job does not read a session whose stored counts show no fault: the engine plans nothing.

`runner.left_as_found` decides from the session's row (its head's fault
counts, error, format and engine version); these tests hold that decision to
the engine's, and show that a job then leaves the blob unread.
"""

from pathlib import Path

import pytest
from django.core.files.storage import default_storage

from tests.helpers import SAMPLES, generated_sessions, run_inline, sample
from transcripts import actions
from transcripts.actions.runner import left_as_found
from transcripts.core.policy import PRESETS
from transcripts.engine import analyze
from transcripts.models import AuditRecord, JobItem, Revision, blob_name

FAULTY = "formats/claude_code.jsonl"
HEALTHY = "cases/02_cc-parallel-results-split-lines.jsonl"
SHARED = Path("/work/shared/samples")


def _files() -> list[Path]:
    roots = [SAMPLES, SHARED]
    patterns = ("*.jsonl", "*.json")
    found = {p for root in roots if root.is_dir() for ext in patterns for p in root.rglob(ext)}
    return sorted(p for p in found if not p.name.endswith(".faults.json"))


@pytest.mark.django_db
def test_a_session_left_as_found_has_an_empty_plan_under_every_policy_it_is_skipped_for(
    alice, workspace, ingest
):
    files = _files() + generated_sessions(20, seed=7)
    skipped = 0
    for n, path in enumerate(files):
        data = path.read_bytes()
        session = ingest(workspace, f"{n}-{path.name}", data)
        for policy in PRESETS.values():
            if not left_as_found(session, session.head, policy):
                continue
            skipped += 1
            analysis = analyze(data, session.name, policy, format=session.format)
            assert analysis.error is None, path
            assert not analysis.faults, (path, policy.name)
            assert not analysis.plan.ops, (path, policy.name)
            assert analysis.repaired == data, (path, policy.name)
    # Enough healthy files among them for the check to mean something.
    assert skipped >= 10


@pytest.mark.django_db
def test_a_job_repairs_the_faulty_sessions_and_leaves_the_healthy_ones_unread(
    alice, workspace, ingest
):
    faulty = ingest(workspace, "claude_code.jsonl", sample(FAULTY))
    healthy = ingest(workspace, "healthy.jsonl", sample(HEALTHY))
    assert healthy.fault_counts == {} and faulty.fault_counts
    # Gone from storage: a job that read it would fail the item.
    default_storage.delete(blob_name(healthy.head.sha256))

    job = run_inline(
        actions.do_start_job(workspace, [faulty, healthy], policy="synthesize", acting_user=alice)
    )

    assert (job.total, job.done, job.failed) == (2, 2, 0)
    statuses = dict(job.items.values_list("session__name", "status"))
    assert statuses == {"claude_code.jsonl": "repaired", "healthy.jsonl": "unchanged"}
    assert not Revision.objects.filter(session=healthy, number__gt=0).exists()
    assert not AuditRecord.objects.filter(job=job, session=healthy).exists()
    assert AuditRecord.objects.filter(job=job, session=faulty).exists()


@pytest.mark.django_db
def test_a_dry_run_leaves_a_healthy_session_unread_too(alice, workspace, ingest):
    healthy = ingest(workspace, "healthy.jsonl", sample(HEALTHY))
    default_storage.delete(blob_name(healthy.head.sha256))

    job = run_inline(
        actions.do_start_job(
            workspace, [healthy], policy="synthesize", kind="dry_run", acting_user=alice
        )
    )

    assert job.items.get().status == JobItem.Status.UNCHANGED


@pytest.mark.django_db
def test_a_policy_that_replays_aborted_frames_reads_the_session(alice, workspace, ingest):
    healthy = ingest(workspace, "healthy.jsonl", sample(HEALTHY))
    assert PRESETS["openmaic"].replays_aborted
    default_storage.delete(blob_name(healthy.head.sha256))

    job = run_inline(
        actions.do_start_job(workspace, [healthy], policy="openmaic", acting_user=alice)
    )

    item = job.items.get()
    assert item.status == JobItem.Status.FAILED
    assert "missing from storage" in item.error


@pytest.mark.django_db
def test_a_head_read_by_another_engine_version_is_read_again(alice, workspace, ingest):
    healthy = ingest(workspace, "healthy.jsonl", sample(HEALTHY))
    # Revisions refuse save(): the version is changed as a migration would.
    Revision.objects.filter(pk=healthy.head_id).update(engine_version="0.0.1")
    default_storage.delete(blob_name(healthy.head.sha256))

    job = run_inline(
        actions.do_start_job(workspace, [healthy], policy="synthesize", acting_user=alice)
    )

    item = job.items.get()
    assert item.status == JobItem.Status.FAILED
    assert "missing from storage" in item.error


@pytest.mark.django_db
def test_a_session_with_faults_or_an_error_is_never_left_as_found(alice, workspace, ingest):
    faulty = ingest(workspace, "claude_code.jsonl", sample(FAULTY))
    broken = ingest(workspace, "broken.jsonl", b"not json at all\n")
    policy = PRESETS["synthesize"]

    assert not left_as_found(faulty, faulty.head, policy)
    assert broken.error
    assert not left_as_found(broken, broken.head, policy)
