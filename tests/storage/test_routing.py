"""With a sync queue set, what touches a sync folder goes to the host that has it."""

import pytest

from tests.sync.conftest import age, call, user
from transcripts import actions
from transcripts.actions import sync
from transcripts.models import JobItem

pytestmark = pytest.mark.django_db

BROKEN = user("u1", None, "ls") + call("a1", "u1", "toolu_1") + user("u2", "a1", "hello?")


@pytest.fixture
def sessions(settings, tmp_path, workspace, alice):
    """Return (a synced session whose source writes back, two uploaded ones)."""
    settings.SYNC_ROOTS = [tmp_path.resolve()]
    sync.do_grant_folder(workspace, str(tmp_path), acting_user=None)
    source = sync.do_create_source(
        workspace, str(tmp_path), acting_user=alice, format="claude_code", write_back=True
    )
    (tmp_path / "s.jsonl").write_bytes(BROKEN)
    age(tmp_path / "s.jsonl")
    sync.do_sync_source(source.pk)
    synced = source.files.get().session
    uploaded = [
        actions.do_ingest_session(workspace, f"u{i}.jsonl", BROKEN, acting_user=alice)
        for i in range(2)
    ]
    return synced, uploaded


def start(workspace, alice, kind="repair"):
    job = actions.do_start_job(
        workspace, workspace.sessions.all(), policy="synthesize", kind=kind, acting_user=alice
    )
    return job, actions.do_fan_out_job(job.pk)


def test_written_back_items_go_to_the_sync_queue(settings, workspace, alice, sessions):
    settings.CELERY_SYNC_QUEUE = "pairfix-sync"
    settings.JOB_CHUNK_SIZE = 2
    synced, uploaded = sessions
    job, chunks = start(workspace, alice)

    routed = actions.chunk_queues(job.pk, chunks)

    session_of = dict(JobItem.objects.filter(job=job).values_list("pk", "session_id"))
    assert [([session_of[pk] for pk in ids], queue) for ids, queue in routed] == [
        ([synced.pk], "pairfix-sync"),
        ([s.pk for s in uploaded], None),
    ]


def test_without_a_sync_queue_every_chunk_goes_to_the_default(settings, workspace, alice, sessions):
    settings.CELERY_SYNC_QUEUE = None
    job, chunks = start(workspace, alice)

    assert actions.chunk_queues(job.pk, chunks) == [(chunk, None) for chunk in chunks]


def test_an_export_writes_no_file_so_it_stays_on_the_default(settings, workspace, alice, sessions):
    settings.CELERY_SYNC_QUEUE = "pairfix-sync"
    job, chunks = start(workspace, alice, kind="export")

    assert actions.chunk_queues(job.pk, chunks) == [(chunk, None) for chunk in chunks]
