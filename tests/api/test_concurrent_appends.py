"""Appends that race for one session: each is written in some order, or refused with 409.

Real threads, each with its own database connection, as concurrent requests
have; on PostgreSQL (CI) a waiting append re-reads the head after the lock.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from tests.api.conftest import client_for
from tests.sync.conftest import call, result, user
from transcripts.models import AuditRecord, Revision, Session

pytestmark = pytest.mark.django_db(transaction=True)

APPENDS = 12
NDJSON = "application/x-ndjson"


def _lines(n: int) -> bytes:
    return call(f"a{n}", None, f"toolu_{n}") + result(f"r{n}", f"a{n}", f"toolu_{n}")


def _race(secret: str, session: Session, head: bool) -> list[tuple[int, dict]]:
    """Send APPENDS appends at once (all released by one barrier); return (status, body)s."""
    barrier = threading.Barrier(APPENDS)

    def send(n: int) -> tuple[int, dict]:
        api = client_for(secret)
        try:
            barrier.wait(timeout=30)
            url = f"/api/sessions/{session.pk}/records" + ("?head=0" if head else "")
            response = api.post(url, _lines(n), content_type=NDJSON)
            return response.status_code, response.json()
        finally:
            connection.close()

    with ThreadPoolExecutor(APPENDS) as pool:
        return list(pool.map(send, range(APPENDS)))


@pytest.fixture
def session(workspace, ingest):
    return ingest(workspace, "agent.jsonl", user("u0", None, "start"))


def test_concurrent_appends_are_all_written_in_some_order(secret, session):
    answers = _race(secret, session, head=False)
    assert sorted(status for status, _ in answers) == [200] * APPENDS
    session.refresh_from_db()
    assert session.head.number == APPENDS
    content = session.head.read()
    # Every append's lines, once each and whole, after the first line.
    assert content.startswith(user("u0", None, "start"))
    assert sorted(content.splitlines(keepends=True)[1:]) == sorted(
        b"".join(_lines(n) for n in range(APPENDS)).splitlines(keepends=True)
    )
    for n in range(APPENDS):
        assert _lines(n) in content
    numbers = list(Revision.objects.filter(session=session).values_list("number", flat=True))
    assert sorted(numbers) == list(range(APPENDS + 1))
    assert AuditRecord.objects.filter(session=session, op="append").count() == APPENDS
    assert session.record_count == 1 + 2 * APPENDS


def test_concurrent_appends_on_one_head_write_one_and_refuse_the_rest(secret, session):
    answers = _race(secret, session, head=True)
    statuses = sorted(status for status, _ in answers)
    assert statuses == [200] + [409] * (APPENDS - 1)
    assert {body["error"]["code"] for status, body in answers if status == 409} == {"head_moved"}
    session.refresh_from_db()
    assert session.head.number == 1
    assert Revision.objects.filter(session=session).count() == 2
    assert AuditRecord.objects.filter(session=session, op="append").count() == 1
