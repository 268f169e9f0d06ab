"""Fixtures for the Django side: users, workspaces, sessions and a real Celery worker."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings

from project.celery import app as celery_app
from transcripts import actions
from transcripts.models import Membership, Session, Workspace

# A queue of its own, so that a `make run` worker on the same broker never takes
# a test's task (and the test worker never takes a real one). Set before any
# task is sent: Celery caches its queues on first use.
# Under pytest-xdist, each worker process (gw0, gw1, ...) has its own queue and blob
# folder, as it has its own test database: a task one sends is never taken by the
# other's Celery worker, and a blob one deletes (a test of a missing blob) is never the
# other's. So is the folder uploads are staged in: a test that counts what is left there
# never sees the other's uploads. Processes a test starts read both from the environment.
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _XDIST_WORKER:
    _OWN = Path(settings.VAR_DIR) / "xdist" / _XDIST_WORKER
    settings.MEDIA_ROOT = os.environ["MEDIA_ROOT"] = str(_OWN / "media")
    # Made now, as settings.py makes its own (envpath): /healthz wants it there before
    # any blob is stored.
    (_OWN / "media").mkdir(parents=True, exist_ok=True)
    (_OWN / "tmp").mkdir(parents=True, exist_ok=True)
    settings.FILE_UPLOAD_TEMP_DIR = os.environ["FILE_UPLOAD_TEMP_DIR"] = str(_OWN / "tmp")
celery_app.conf.task_default_queue = f"pairfix-tests-{_XDIST_WORKER}".rstrip("-")


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="alice-password")


@pytest.fixture
def bob(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="bob-password")


@pytest.fixture
def workspace(alice: Any) -> Workspace:
    """Return alice's workspace."""
    return actions.do_create_workspace("Alpha", acting_user=alice)


@pytest.fixture
def other_workspace(bob: Any) -> Workspace:
    """Return bob's workspace, which alice is not a member of."""
    return actions.do_create_workspace("Beta", acting_user=bob)


@pytest.fixture
def alice_client(client: Any, alice: Any, workspace: Workspace) -> Any:
    client.force_login(alice)
    return client


@pytest.fixture
def ingest(alice: Any) -> Callable[..., Session]:
    """Return a function that stores bytes as a new session, as alice by default."""

    def ingest(workspace: Workspace, name: str, data: bytes, user: Any = None) -> Session:
        return actions.do_ingest_session(workspace, name, data, acting_user=user or alice)

    return ingest


@pytest.fixture
def membership(alice: Any, other_workspace: Workspace) -> Membership:
    """Make alice a member of bob's workspace too."""
    return Membership.objects.create(user=alice, workspace=other_workspace)


@pytest.fixture
def celery_worker(transactional_db: None) -> Iterator[None]:
    """Run a real Celery worker in a thread against the configured broker.

    Needs committed rows (`transactional_db`): the worker thread has its own
    database connection. Leftovers of an interrupted run are purged first.
    """
    celery_app.control.purge()
    # The queue named, not Celery's cached queues: a test that pointed the default at its
    # own workers' queue (test_real_world) would leave this worker consuming that one.
    queues = [celery_app.conf.task_default_queue]
    with start_worker(
        celery_app, pool="solo", perform_ping_check=False, shutdown_timeout=30, queues=queues
    ):
        yield


@pytest.hookimpl(trylast=True)  # after --deselect has taken its items out
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse, under pytest-xdist, tests that share a node id: xdist would run one of them.

    schemathesis gives every API operation one node id (the Makefile runs that
    test on its own, after the parallel run, and deselects it there).
    """
    if not _XDIST_WORKER:
        return
    seen: set[str] = set()
    shared = sorted({item.nodeid for item in items if item.nodeid in seen or seen.add(item.nodeid)})
    if shared:
        raise pytest.UsageError(
            "these tests share a node id, so pytest-xdist would run only one of each; run "
            "them in a process of their own and --deselect them here: " + ", ".join(shared)
        )
