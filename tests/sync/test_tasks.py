"""The beat schedule's tasks, run by a real Celery worker on the configured broker."""

import time

from django.conf import settings

from tests.sync.conftest import call, user
from transcripts import tasks
from transcripts.models import Session

START = user("u1", None, "hi") + call("a1", "u1", "toolu_1")


def test_the_beat_schedule_syncs_every_source_expires_live_sessions_and_sweeps_jobs():
    schedule = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert schedule == {
        "transcripts.sync_all_sources",
        "transcripts.expire_live_sessions",
        "transcripts.sweep_jobs",
    }
    assert schedule <= set(tasks.sync_all_sources.app.tasks)


def test_a_worker_syncs_the_sources(celery_worker, source, root):
    (root / "s.jsonl").write_bytes(START)

    tasks.sync_all_sources.delay()

    deadline = time.monotonic() + 30
    while not Session.objects.exists():
        assert time.monotonic() < deadline, "the worker did not sync the source in 30 s"
        time.sleep(0.1)
    session = Session.objects.get()
    assert session.source == source
    assert session.head.read() == START
