"""A writer that waits for a session's lock reads the head the writer before it left.

Real threads with their own database connections: the first holds the
session's lock with a new head written and not yet committed, the second
(the live refresh, or a sync's rewrite) waits for it, then must see that head.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from tests.sync.conftest import age, call, user
from transcripts import actions
from transcripts.actions import sync
from transcripts.models import Session, SyncedFile

pytestmark = pytest.mark.django_db(transaction=True)

START = user("u1", None, "list the files") + call("a1", "u1", "toolu_1")
MORE = user("u2", "a1", "still there?") + call("a2", "u2", "toolu_2")


def _behind_an_append(session: Session, second: Callable[[], Any]) -> Any:
    """Run `second` in a thread while another holds `session` with an append uncommitted."""
    locked, go = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def first() -> None:
        try:
            with transaction.atomic():
                sync.append_records(
                    session, MORE, acting_user=None, origin="api", now=timezone.now()
                )
                locked.set()
                go.wait(timeout=30)
        finally:
            connection.close()

    def run_second() -> None:
        try:
            outcome["value"] = second()
        except BaseException as exc:  # the test reports it
            outcome["error"] = exc
        finally:
            connection.close()

    holder = threading.Thread(target=first)
    holder.start()
    assert locked.wait(timeout=30)
    waiter = threading.Thread(target=run_second)
    waiter.start()
    time.sleep(0.5)  # long enough for the second writer to be waiting on the lock
    go.set()
    holder.join(timeout=30)
    waiter.join(timeout=30)
    assert not waiter.is_alive()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def test_the_live_refresh_waits_and_reads_the_new_head(workspace, alice, settings):
    settings.LIVE_GRACE = 60
    written = timezone.now() - timedelta(seconds=10)
    session = actions.do_ingest_session(
        workspace, "s.jsonl", START, acting_user=alice, last_write=written
    )
    assert session.fault_counts == {"pending_result": 1}
    later = timezone.now() + timedelta(seconds=120)

    assert _behind_an_append(session, lambda: sync.refresh_live(session, later))

    session.refresh_from_db()
    assert session.head.number == 1
    assert session.fault_counts == {"missing_result": 2}


def test_a_sync_rewrite_waits_and_writes_after_the_new_head(source, root):
    path = root / "s.jsonl"
    path.write_bytes(START)
    age(path)
    sync.do_sync_source(source.pk)
    session = SyncedFile.objects.get(source=source).session
    path.write_bytes(b"" + user("u9", None, "rewritten") + call("a9", "u9", "toolu_9"))
    age(path)

    report = _behind_an_append(session, lambda: sync.do_sync_source(source.pk))

    assert (report.rewritten, report.errors) == (1, [])
    session.refresh_from_db()
    assert session.head.number == 2
    assert session.head.parent.number == 1
    assert session.head.read().startswith(user("u9", None, "rewritten"))
