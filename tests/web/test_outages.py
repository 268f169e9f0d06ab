"""Outages: a page that needs a service that is down is a 503 naming it, quickly.

The database case runs a real gunicorn against a PostgreSQL address that
accepts connections and never answers (a listening socket on the loopback
that nobody reads), which is how a server that hangs looks to a client.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client

from project.celery import app as celery_app
from tests.helpers import generated_session


@pytest.mark.django_db(transaction=True)
def test_a_long_sessions_page_with_the_broker_down_is_a_503_saying_so(
    alice, workspace, ingest, monkeypatch, settings
):
    settings.TIMELINE_INLINE_BYTES = 1024  # built by a worker, so the page needs the queue
    session = ingest(workspace, "long.jsonl", generated_session(40, seed=3).read_bytes())
    dead = "redis://127.0.0.1:1/0"  # nothing listens there: refused at once
    monkeypatch.setattr(celery_app.conf, "broker_url", dead)
    monkeypatch.setenv("CELERY_BROKER_URL", dead)
    client = Client(raise_request_exception=False)
    client.force_login(alice)

    response = client.get(session.get_absolute_url())

    assert response.status_code == 503
    html = response.content.decode()
    assert "The task queue is down" in html
    assert "building a long session&#x27;s timeline" in html
    assert response["Retry-After"] == "30"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_database():
    """Yield a PostgreSQL URL whose server accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    try:
        yield f"postgres://postgres@127.0.0.1:{listener.getsockname()[1]}/pairfix"
    finally:
        listener.close()


@pytest.fixture
def server(silent_database, tmp_path: Path):
    """Yield the URL of gunicorn serving Pairfix (DEBUG off) with its database silent."""
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": silent_database,
        "DEBUG": "False",
        "SECRET_KEY": "outage-test-key",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "False",
        "LOG_LEVEL": "ERROR",
        "VAR_DIR": str(tmp_path),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "project.wsgi", "--bind", f"127.0.0.1:{port}"],
        cwd=django_settings.BASE_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                # Any answer: the worker has loaded the app (a page with no user, no query).
                _get(url + "/accounts/login/")
                break
            except OSError:
                assert process.poll() is None, "gunicorn exited"
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.skipif(
    not django_settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
    reason="the connect timeout is PostgreSQL's (DATABASE_URL=postgres://...)",
)
def test_with_the_database_down_pages_are_a_quick_503_and_healthz_keeps_its_bound(server):
    # A signed-in user's request: the session is looked up in the database first.
    page_status, page, page_seconds = _get(server + "/", cookie="sessionid=abcdefgh12345678")
    health_status, health, health_seconds = _get(server + "/healthz")

    assert page_status == 503
    assert "The database is down" in page
    assert page_seconds < 4
    assert health_status == 503
    assert json.loads(health)["checks"]["database"]["status"] == "error"
    assert json.loads(health)["checks"]["broker"]["status"] == "ok"
    assert health_seconds < 3


def _get(url: str, cookie: str = "") -> tuple[int, str, float]:
    """Return the status, body and seconds of a GET of `url` (an error status too)."""
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    start = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    return status, body.decode(), time.monotonic() - start
