"""Building a session's timeline: once per view, by one builder, in a task for large files."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.helpers import run_inline, sample
from tests.sync.conftest import call, reply, result, user
from transcripts import actions, timeline
from transcripts.actions import sync, timelines
from transcripts.engine import analyze
from transcripts.models import Timeline, TimelineRow

SAMPLE = "formats/claude_code.jsonl"
ROWS = len(analyze(sample(SAMPLE), "claude_code.jsonl").rows)


@pytest.fixture
def session(workspace, ingest):
    return ingest(workspace, "claude_code.jsonl", sample(SAMPLE))


@pytest.mark.django_db
def test_a_small_session_is_built_during_the_request(alice_client, session):
    html = alice_client.get(session.get_absolute_url()).content.decode()
    built = Timeline.objects.get()
    assert built.status == Timeline.Status.READY
    assert built.row_count == TimelineRow.objects.filter(timeline=built).count() == ROWS
    assert built.fault_counts == session.fault_counts
    assert 'id="r-0"' in html


@pytest.mark.django_db
def test_a_large_session_is_built_by_a_task_while_the_page_polls(
    alice_client, session, settings, django_capture_on_commit_callbacks, monkeypatch
):
    settings.TIMELINE_INLINE_BYTES = 0
    sent = []
    monkeypatch.setattr(
        "transcripts.tasks.build_timeline.apply_async", lambda args, **_: sent.append(*args)
    )
    with django_capture_on_commit_callbacks(execute=True):
        html = alice_client.get(session.get_absolute_url()).content.decode()
    built = Timeline.objects.get()
    assert sent == [built.pk]
    assert built.status == Timeline.Status.QUEUED
    assert "Preparing the timeline" in html
    assert 'hx-trigger="every 1s"' in html
    # Its first records are shown read from the file meanwhile, without the built parts.
    assert "A first look" in html
    assert 'id="r-0"' in html
    assert 'class="summary-line"' not in html and "fault-panel" not in html

    # A poll before the task ran does not send it again.
    with django_capture_on_commit_callbacks(execute=True):
        poll = alice_client.get(session.get_absolute_url(), headers={"HX-Request": "true"})
    assert sent == [built.pk]
    assert "Preparing the timeline" in poll.content.decode()

    assert actions.do_build_timeline(built.pk)
    poll = alice_client.get(session.get_absolute_url(), headers={"HX-Request": "true"})
    html = poll.content.decode()
    assert html.lstrip().startswith('<section id="timeline">')
    assert "every 1s" not in html
    assert 'id="r-0"' in html


@pytest.mark.django_db
def test_a_build_asked_for_long_ago_is_sent_again(
    alice_client, session, settings, django_capture_on_commit_callbacks, monkeypatch
):
    settings.TIMELINE_INLINE_BYTES = 0
    sent = []
    monkeypatch.setattr(
        "transcripts.tasks.build_timeline.apply_async", lambda args, **_: sent.append(*args)
    )
    with django_capture_on_commit_callbacks(execute=True):
        alice_client.get(session.get_absolute_url())
    lease = timedelta(seconds=settings.JOB_CLAIM_LEASE + 1)
    Timeline.objects.update(claimed_at=timezone.now() - lease)
    with django_capture_on_commit_callbacks(execute=True):
        alice_client.get(session.get_absolute_url())
    assert len(sent) == 2


@pytest.mark.django_db(transaction=True)
def test_a_worker_builds_a_large_sessions_timeline(alice_client, session, settings, celery_worker):
    settings.TIMELINE_INLINE_BYTES = 0
    assert "Preparing the timeline" in alice_client.get(session.get_absolute_url()).content.decode()
    deadline = time.monotonic() + 60
    while Timeline.objects.get().status != Timeline.Status.READY:
        assert time.monotonic() < deadline, "the worker did not build the timeline"
        time.sleep(0.1)
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert 'id="r-0"' in html
    assert "missing_result" in html


@pytest.mark.django_db
def test_a_second_builder_writes_nothing(session):
    built = Timeline.objects.create(
        revision=session.head, policy="synthesize", engine_version="1", live=False
    )
    assert actions.do_build_timeline(built.pk)
    assert not actions.do_build_timeline(built.pk)
    assert TimelineRow.objects.filter(timeline=built).count() == ROWS


@pytest.mark.django_db
def test_a_build_whose_builder_died_is_taken_over(session, settings):
    built = Timeline.objects.create(
        revision=session.head,
        policy="synthesize",
        engine_version="1",
        status=Timeline.Status.BUILDING,
        claimed_at=timezone.now(),
    )
    assert not actions.do_build_timeline(built.pk)
    Timeline.objects.update(
        claimed_at=timezone.now() - timedelta(seconds=settings.JOB_CLAIM_LEASE + 1)
    )
    assert actions.do_build_timeline(built.pk)
    built.refresh_from_db()
    assert built.status == Timeline.Status.READY
    assert TimelineRow.objects.filter(timeline=built).count() == ROWS


@pytest.mark.django_db
def test_an_engine_error_is_shown_not_retried(alice_client, session, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("engine bug")

    monkeypatch.setattr("transcripts.timeline.analyze", broken)
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert "The timeline could not be built" in html
    assert "ValueError: engine bug" in html
    assert Timeline.objects.get().status == Timeline.Status.FAILED


@pytest.mark.django_db
def test_an_unreadable_file_shows_why(alice_client, workspace, ingest):
    unreadable = ingest(workspace, "broken.jsonl", b"{not json\n")
    html = alice_client.get(unreadable.get_absolute_url()).content.decode()
    assert "This file could not be read" in html
    assert "broken.jsonl: line 1" in html


@pytest.mark.django_db
def test_a_live_session_has_pending_results_until_its_grace_passes(
    alice_client, workspace, alice, settings
):
    settings.LIVE_GRACE = 60
    now = timezone.now()
    data = user("u1", None, "list the files") + call("a1", "u1", "toolu_1")
    session = actions.do_ingest_session(
        workspace, "live.jsonl", data, acting_user=alice, last_write=now
    )
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert '<div class="fault pending_result">' in html
    assert '<div class="fault missing_result">' not in html

    session.live_until = now - timedelta(seconds=1)
    session.save(update_fields=["live_until"])
    html = alice_client.get(session.get_absolute_url()).content.decode()
    assert '<div class="fault missing_result">' in html
    assert set(Timeline.objects.values_list("live", flat=True)) == {True, False}


@pytest.mark.django_db
def test_timelines_of_an_old_head_go_once_the_new_one_is_built(
    alice_client, alice, workspace, session
):
    alice_client.get(session.get_absolute_url())
    old_head = session.head
    run_inline(actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice))
    alice_client.get(session.get_absolute_url())
    session.refresh_from_db()
    assert list(Timeline.objects.values_list("revision", flat=True)) == [session.head_id]
    assert session.head_id != old_head.pk


@pytest.mark.django_db
def test_only_a_few_views_of_a_session_are_kept(alice_client, session):
    for policy in ("synthesize", "discard", "native", "openmaic", "openclaw"):
        for read_as in ("", "claude_code"):
            alice_client.get(session.get_absolute_url(), {"policy": policy, "format": read_as})
    assert Timeline.objects.count() == timelines.KEPT_PER_SESSION


@pytest.mark.django_db
def test_a_session_appended_to_reads_its_records_across_the_deltas(alice_client, workspace, alice):
    start = user("u0", None, "go") + call("a0", "u0", "toolu_0") + result("r0", "a0", "toolu_0")
    session = actions.do_ingest_session(workspace, "s.jsonl", start, acting_user=alice)
    parent = "r0"
    for n in range(1, 4):
        sync.do_append_records(
            session, user(f"u{n}", parent, f"step {n}") + reply(f"a{n}", f"u{n}"), acting_user=alice
        )
        parent = f"a{n}"
    session.refresh_from_db()
    assert session.head.chain == 3

    html = alice_client.get(session.get_absolute_url()).content.decode()
    for n in range(1, 4):
        assert f"step {n}" in html
    assert 'tool result for <code class="tool-call-id">toolu_0</code>' in html
    with timeline.RevisionBytes(session.head) as source:
        assert source.read(0, session.head.size) == session.head.read()
        assert (
            source.read(len(start) - 5, len(start) + 5)
            == session.head.read()[len(start) - 5 : len(start) + 5]
        )


def _queued_page(client, session, monkeypatch, settings, query=""):
    """Return the page of `session` while its timeline is queued (the task is not run)."""
    settings.TIMELINE_INLINE_BYTES = 0
    monkeypatch.setattr("transcripts.tasks.build_timeline.apply_async", lambda *a, **k: None)
    return client.get(session.get_absolute_url() + query).content.decode()


def _chain(calls: int) -> list[bytes]:
    """Return the lines of a session: a prompt, then `calls` calls each answered at once."""
    lines = [user("u0", None, "go")]
    for i in range(calls):
        lines += [call(f"c{i}", f"r{i - 1}" if i else "u0", f"toolu_{i}")]
        lines += [result(f"r{i}", f"c{i}", f"toolu_{i}")]
    return lines


@pytest.mark.django_db
def test_the_first_look_shows_the_first_records_and_their_faults(
    alice_client, session, settings, monkeypatch
):
    html = _queued_page(alice_client, session, monkeypatch, settings)
    assert "A first look: the first 12 rows" in html
    assert html.count('<tr id="r-') == 11
    # The sample's unanswered call (record 8) is a fault in its first records too.
    assert 'id="r-8" data-pos="8" tabindex="-1" class="row same has-fault missing_result"' in html
    assert 'class="row inserted"' in html  # the synthetic result the repair adds
    assert "Earlier rows" not in html and "Later rows" not in html


@pytest.mark.django_db
def test_the_first_look_reads_only_the_start_of_a_long_file(
    alice_client, workspace, ingest, settings, monkeypatch
):
    lines = _chain(150)
    long = ingest(workspace, "long.jsonl", b"".join(lines))
    # The read stops after record 99: the call there is answered by record 100, past it.
    monkeypatch.setattr(timeline, "PREVIEW_FIRST_READ", 1024)
    monkeypatch.setattr(timeline, "PREVIEW_BYTES", len(b"".join(lines[:100])) + 10)
    html = _queued_page(alice_client, long, monkeypatch, settings)
    assert "A first look: the first 100 rows" in html
    assert 'id="r-99"' in html and 'id="r-100"' not in html
    assert "has-fault" not in html and "pending_result" not in html
    assert "Later rows" not in html


@pytest.mark.django_db
def test_a_document_or_a_filtered_view_has_no_first_look(
    alice_client, workspace, ingest, session, settings, monkeypatch
):
    document = ingest(workspace, "openai_chat.json", sample("formats/openai_chat.json"))
    html = _queued_page(alice_client, document, monkeypatch, settings)
    assert "Preparing the timeline" in html and "A first look" not in html
    assert "<tr id=" not in html
    html = _queued_page(alice_client, session, monkeypatch, settings, "?faults=1")
    assert "Preparing the timeline" in html and "A first look" not in html
    html = _queued_page(alice_client, session, monkeypatch, settings, "?record=5")
    assert "A first look" not in html
