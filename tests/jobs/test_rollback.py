"""Rollback: each session a repair job changed gets its previous bytes back, as a new revision."""

import pytest
from django.urls import reverse

from tests.helpers import run_inline, sample
from transcripts import actions
from transcripts.engine import analyze
from transcripts.models import AuditRecord, Job, Revision, Session

pytestmark = pytest.mark.django_db

FAULTY = ["formats/claude_code.jsonl", "formats/openclaw.jsonl"]
HEALTHY = "cases/02_cc-parallel-results-split-lines.jsonl"


@pytest.fixture
def repaired(alice, workspace, ingest):
    """Return a finished repair job over two faulty sessions and a healthy one."""
    sessions = [ingest(workspace, name.split("/")[1], sample(name)) for name in FAULTY]
    sessions.append(ingest(workspace, "healthy.jsonl", sample(HEALTHY)))
    return run_inline(
        actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    )


def test_it_makes_each_previous_head_the_head_again(alice, bob, repaired, membership):
    rollback = run_inline(actions.do_start_rollback_job(repaired, acting_user=bob))

    assert (rollback.kind, rollback.source_job, rollback.policy) == (
        "rollback",
        repaired,
        "synthesize",
    )
    # Only the sessions the job changed: the healthy one was left unchanged.
    assert (rollback.total, rollback.done, rollback.fence_lost) == (2, 2, 0)
    for name in FAULTY:
        session = Session.objects.get(name=name.split("/")[1])
        head = session.head
        raw, fixed = session.revisions.get(number=0), session.revisions.get(number=1)
        assert (head.number, head.parent, head.created_by) == (2, fixed, bob)
        assert head.read() == sample(name) == raw.read()
        assert head.sha256 == raw.sha256
        # The fault counts are those of the restored bytes again, not of the repair.
        restored = analyze(sample(name), session.name)
        assert session.fault_counts == restored.fault_counts != {}
        assert session.record_count == restored.record_count
        [audit] = AuditRecord.objects.filter(job=rollback, session=session)
        assert (audit.op, audit.revision_from, audit.revision_to) == ("rollback", fixed, head)
        assert (audit.acting_user, audit.policy) == (bob, "synthesize")
        assert rollback.items.get(session=session).revision == head
    healthy = Session.objects.get(name="healthy.jsonl")
    assert healthy.revisions.count() == 1


def test_it_reports_a_session_changed_since_the_job_and_leaves_it(alice, repaired):
    changed = Session.objects.get(name="claude_code.jsonl")
    # A later write to the session (another tool, or a later job).
    later = Revision.objects.create(
        session=changed,
        number=2,
        sha256=changed.head.sha256,
        size=changed.head.size,
        engine_version="1",
        parent=changed.head,
    )
    Session.objects.filter(pk=changed.pk).update(head=later)

    rollback = run_inline(actions.do_start_rollback_job(repaired, acting_user=alice))

    assert (rollback.done, rollback.fence_lost) == (1, 1)
    item = rollback.items.get(session=changed)
    assert (item.status, item.revision) == ("fence_lost", None)
    assert item.error == (
        f"the session changed since job {repaired.pk}: its head is revision 2, "
        "not the job's revision 1"
    )
    changed.refresh_from_db()
    assert changed.head == later
    assert not AuditRecord.objects.filter(job=rollback, session=changed).exists()


def test_a_second_rollback_of_the_same_job_is_refused(alice, repaired):
    first = run_inline(actions.do_start_rollback_job(repaired, acting_user=alice))
    with pytest.raises(
        actions.JobStateError,
        match=f"Job {repaired.pk} was rolled back already, by job {first.pk}.",
    ):
        actions.do_start_rollback_job(repaired, acting_user=alice)
    assert Job.objects.filter(kind=Job.Kind.ROLLBACK).count() == 1
    assert Revision.objects.filter(number=3).count() == 0


def test_a_rollback_can_be_repaired_again(alice, workspace, repaired):
    run_inline(actions.do_start_rollback_job(repaired, acting_user=alice))
    sessions = Session.objects.filter(name__in=[n.split("/")[1] for n in FAULTY])
    job = run_inline(
        actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    )
    assert job.done == 2
    assert sorted(sessions.values_list("head__number", flat=True)) == [3, 3]


@pytest.mark.parametrize("kind", ["dry_run", "export"])
def test_only_a_repair_can_be_rolled_back(alice, workspace, ingest, kind):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    job = run_inline(
        actions.do_start_job(
            workspace, [session], kind=kind, policy="synthesize", acting_user=alice
        )
    )
    with pytest.raises(actions.JobStateError, match="Only a finished repair job"):
        actions.do_start_rollback_job(job, acting_user=alice)


def test_a_running_job_cannot_be_rolled_back(alice, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    job = actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    with pytest.raises(actions.JobStateError):
        actions.do_start_rollback_job(job, acting_user=alice)


def test_the_job_page_rolls_back_a_finished_repair(alice_client, repaired):
    html = alice_client.get(repaired.get_absolute_url()).content.decode()
    confirm = reverse("transcripts:confirm_rollback", args=[repaired.pk])
    assert f'href="{confirm}"' in html
    url = reverse("transcripts:rollback_job", args=[repaired.pk])
    assert f'action="{url}"' in alice_client.get(confirm).content.decode()

    response = alice_client.post(url)

    rollback = Job.objects.get(kind="rollback")
    assert response.url == rollback.get_absolute_url()
    run_inline(rollback)
    page = alice_client.get(rollback.get_absolute_url()).content.decode()
    assert f"roll back job {repaired.pk}" in page
    assert page.count('<tr class="item rolled_back">') == 2
    # A rollback row says which revision's bytes it restores, not "0 ops".
    assert "<th>Restores</th>" in page and page.count("<td>revision 0</td>") == 2
    overview = alice_client.get(reverse("transcripts:overview")).content.decode()
    assert f"roll back job {repaired.pk} in " in overview
    listed = alice_client.get(repaired.get_absolute_url()).content.decode()
    assert f'Rolled back by <a href="{rollback.get_absolute_url()}">job {rollback.pk}</a>' in listed


def test_a_job_that_repaired_nothing_has_nothing_to_roll_back(alice, workspace, ingest):
    healthy = ingest(workspace, "ok.json", b'[{"role":"user","content":"hi"}]')
    job = run_inline(
        actions.do_start_job(workspace, [healthy], policy="synthesize", acting_user=alice)
    )

    with pytest.raises(actions.JobStateError, match="repaired no session"):
        actions.do_start_rollback_job(job, acting_user=alice)
    assert Job.objects.count() == 1


def test_a_dry_run_is_applied_once(alice, workspace, ingest):
    session = ingest(workspace, "c.jsonl", sample("formats/claude_code.jsonl"))
    dry_run = run_inline(
        actions.do_start_job(
            workspace, [session], kind="dry_run", policy="synthesize", acting_user=alice
        )
    )
    applied = actions.do_start_repair_from_dry_run(dry_run, acting_user=alice)

    with pytest.raises(actions.JobStateError, match=f"applied already, by job {applied.pk}"):
        actions.do_start_repair_from_dry_run(dry_run, acting_user=alice)


def _items_by_name(job):
    """Return the job's items as {session name: (status, error)}."""
    return {
        item.session.name: (item.status, item.error) for item in job.items.select_related("session")
    }


def test_a_rollback_skips_a_session_deleted_since_the_repair(alice, repaired):
    gone = Session.objects.get(name="claude_code.jsonl")
    actions.do_delete_sessions([gone], acting_user=alice)
    rollback = run_inline(actions.do_start_rollback_job(repaired, acting_user=alice))
    assert (rollback.status, rollback.failed) == (Job.Status.DONE, 1)
    assert _items_by_name(rollback) == {
        "claude_code.jsonl": ("failed", "the session was deleted"),
        "openclaw.jsonl": ("rolled_back", ""),
    }
    assert Revision.objects.filter(session=gone).count() == 2


def test_applying_a_dry_run_skips_a_session_deleted_since(alice, workspace, ingest):
    sessions = [ingest(workspace, name.split("/")[1], sample(name)) for name in FAULTY]
    dry_run = run_inline(
        actions.do_start_job(
            workspace, sessions, kind="dry_run", policy="synthesize", acting_user=alice
        )
    )
    actions.do_delete_sessions([sessions[0]], acting_user=alice)
    applied = run_inline(actions.do_start_repair_from_dry_run(dry_run, acting_user=alice))
    assert (applied.status, applied.failed) == (Job.Status.DONE, 1)
    assert _items_by_name(applied) == {
        "claude_code.jsonl": ("failed", "the session was deleted"),
        "openclaw.jsonl": ("repaired", ""),
    }
    assert Revision.objects.filter(session=sessions[0]).count() == 1
