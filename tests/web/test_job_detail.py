import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from tests.helpers import ORPHANED_CALL, run_inline, sample
from transcripts import actions
from transcripts.models import AuditRecord, Job, Revision, Session

DISPLACED = "cases/10_openclaw-displaced-dup-orphan-results.jsonl"

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(alice, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    return actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)


def test_it_polls_while_the_job_runs(alice_client, job):
    html = alice_client.get(job.get_absolute_url()).content.decode()
    assert 'data-status="queued"' in html
    assert f'hx-get="{job.get_absolute_url()}" hx-trigger="every 1s"' in html
    assert '<progress id="job-progress" max="1" value="0">' in html


def test_it_renders_only_the_progress_for_htmx(alice_client, job):
    response = alice_client.get(job.get_absolute_url(), headers={"HX-Request": "true"})
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="progress"')
    assert "<html" not in html


def test_it_stops_polling_and_shows_the_audit_when_done(alice_client, job):
    # The worker's work, done inline: this test is about the page, not the queue.
    run_inline(job)
    html = alice_client.get(job.get_absolute_url()).content.decode()
    assert 'data-status="done"' in html
    assert "hx-trigger" not in html
    assert '<progress id="job-progress" max="1" value="1">' in html
    assert '<tr class="audit-record missing_result">' in html
    assert f"<code>{ORPHANED_CALL}</code>" in html
    assert "insert_result" in html


def test_it_hides_other_workspaces_jobs(client, bob, other_workspace, job):
    client.force_login(bob)
    assert client.get(job.get_absolute_url()).status_code == 404


def test_it_rejects_post(alice_client, job):
    assert alice_client.post(job.get_absolute_url()).status_code == 405
    assert Job.objects.get().status == "queued"


def run_job(alice, workspace, sessions, policy="synthesize"):
    job = actions.do_start_job(workspace, sessions, policy=policy, acting_user=alice)
    run_inline(job)
    job.refresh_from_db()
    return job


def test_it_says_where_each_op_acted_in_record_numbers(alice_client, alice, workspace, ingest):
    displaced = ingest(workspace, "displaced.jsonl", sample(DISPLACED))
    orphan = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    job = run_job(alice, workspace, [displaced, orphan])
    html = alice_client.get(job.get_absolute_url()).content.decode()
    positions = re.findall(r'<td class="position">(.*?)</td>', html)
    # Records count from 0, as the session page numbers them.
    assert sorted(positions) == sorted(
        ["record 5 → after record 3", "record 6", "record 7", "after record 8"]
    )


def test_it_shows_the_removed_bytes_as_a_size_and_a_preview(alice_client, alice, workspace, ingest):
    displaced = ingest(workspace, "displaced.jsonl", sample(DISPLACED))
    job = run_job(alice, workspace, [displaced])
    html = alice_client.get(job.get_absolute_url()).content.decode()
    # The orphaned result for call_syn_old_99 is the 8th line (record 7).
    line = sample(DISPLACED).splitlines()[7]
    assert f">{len(line)}\xa0bytes</span>" in html
    assert f'<code class="preview">{escape(line[:80].decode())}…</code>' in html
    record = AuditRecord.objects.get(job=job, tool_call_id="call_syn_old_99")
    assert bytes(record.removed_bytes) == line


def test_it_escapes_removed_bytes_that_do_not_print(alice_client, alice, workspace, ingest):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    job = actions.do_start_job(workspace, [session], policy="discard", acting_user=alice)
    AuditRecord.objects.create(
        job=job,
        session=session,
        revision_from=session.head,
        op=AuditRecord.Action.DROP_RESULT,
        record=1,
        span_start=10,
        span_end=28,
        removed_bytes=b"\x1b[2J<b>x</b>\n\xff\xe2\x80\xae!",
    )
    html = alice_client.get(job.get_absolute_url()).content.decode()
    assert ">18\xa0bytes</span>" in html
    assert r'<code class="preview">\x1b[2J&lt;b&gt;x&lt;/b&gt;\n\xff\u202e!</code>' in html


def test_it_counts_skipped_items_apart_from_failures(alice_client, alice, workspace, ingest):
    repaired = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    broken = ingest(workspace, "broken.jsonl", b"not json\n")
    moved = ingest(workspace, "openclaw.jsonl", sample("formats/openclaw.jsonl"))
    job = actions.do_start_job(
        workspace, [repaired, broken, moved], policy="synthesize", acting_user=alice
    )
    # Another writer takes revision 1 of one session before the job gets to it.
    Revision.objects.create(
        session=moved, number=1, sha256=moved.head.sha256, size=1, engine_version="x"
    )
    run_inline(job)
    job.refresh_from_db()
    assert (job.total, job.done, job.failed, job.fence_lost) == (3, 1, 1, 1)
    html = alice_client.get(job.get_absolute_url()).content.decode()
    assert "3 of 3 sessions finished" in html
    assert "1 done · 1 failed · " in html
    assert ">1 skipped: fence lost</span> · 3 total" in html
    assert '<tr class="item fence_lost">' in html
    assert "<td>skipped: fence lost</td>" in html


def test_it_shows_the_rate_and_the_time_left_while_running(alice_client, job):
    Job.objects.filter(pk=job.pk).update(
        status="running", started_at=timezone.now() - timedelta(seconds=10), total=3, done=1
    )
    html = alice_client.get(job.get_absolute_url(), headers={"HX-Request": "true"}).content.decode()
    rate = float(
        re.search(r'<span class="sessions-per-second">([\d.]+) sessions/s</span>', html)[1]
    )
    assert 0.09 <= rate <= 0.1
    left = int(re.search(r'<span class="time-left">about (\d+) s left</span>', html)[1])
    assert 19 <= left <= 21
    assert f'action="{reverse("transcripts:cancel_job", args=[job.pk])}"' in html


def test_the_poll_that_finds_the_job_finished_reloads_the_page(alice_client, job):
    run_inline(job)
    response = alice_client.get(job.get_absolute_url(), headers={"HX-Request": "true"})
    assert response.headers["HX-Refresh"] == "true"


def test_it_lists_failed_items_with_their_errors(alice_client, alice, workspace, ingest):
    broken = ingest(workspace, "<b>broken</b>.jsonl", b"not json\n")
    job = run_job(alice, workspace, [broken])
    html = alice_client.get(job.get_absolute_url()).content.decode()
    error = job.items.get().error
    assert error.startswith("<b>broken</b>.jsonl")
    assert f'<td class="error-message">{escape(error)}</td>' in html
    assert "Retry 1 failed" in html


def test_a_dry_run_shows_ops_by_kind_affected_sessions_and_escaped_diffs(
    alice_client, alice, workspace, ingest
):
    hostile = sample("formats/claude_code.jsonl").replace(b"/home/dev", b"<script>x</script>")
    ingest(workspace, "claude_code.jsonl", hostile)
    ingest(workspace, "displaced.jsonl", sample(DISPLACED))
    job = actions.do_start_job(
        workspace, Session.objects.all(), kind="dry_run", policy="synthesize", acting_user=alice
    )
    run_inline(job)
    html = alice_client.get(job.get_absolute_url()).content.decode()
    assert "<h2>What a repair would change</h2>" in html
    assert "<p>2 sessions would change.</p>" in html
    totals = dict(re.findall(r'<tr class="op-total (\w+)"><td>\w+</td><td>(\d+)</td></tr>', html))
    assert totals == {"insert_result": "1", "move_result": "1", "drop_result": "2"}
    assert html.count('<pre class="diff">') == 2
    assert "<script>x</script>" not in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html
    assert "Repair these 2 sessions" in html
    assert "Roll back" not in html


def test_an_export_building_its_archive_says_so_instead_of_zero_seconds_left(
    alice_client, alice, workspace, ingest
):
    session = ingest(workspace, "claude_code.jsonl", sample("formats/claude_code.jsonl"))
    job = actions.do_start_job(
        workspace, [session], kind=Job.Kind.EXPORT, policy="synthesize", acting_user=alice
    )
    # Every item done, the archive not built yet: the state the page polls for 23 s on 39 files.
    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.RUNNING,
        started_at=timezone.now() - timedelta(seconds=5),
        done=1,
        processed=1,
    )
    html = alice_client.get(job.get_absolute_url()).content.decode()
    assert "every file is repaired: building the zip archive" in html
    assert "s left" not in html


def test_the_time_left_counts_sessions_processed_but_not_yet_written(
    alice_client, alice, workspace, ingest
):
    sessions = [
        ingest(workspace, f"s{i}.jsonl", sample("formats/claude_code.jsonl")) for i in range(4)
    ]
    job = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.RUNNING, started_at=timezone.now() - timedelta(seconds=2), processed=1
    )
    html = alice_client.get(job.get_absolute_url()).content.decode()
    assert '<progress id="job-progress" max="4" value="1">' in html
    assert "1 of 4 sessions processed" in html
    # One session in 2 s: three more take about 6 s.
    assert re.search(r"about [67] s left", html)
