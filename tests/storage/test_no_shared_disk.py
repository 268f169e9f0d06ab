"""Hosts that share nothing but PostgreSQL, Redis and the bucket, driven through HTTP.

Three "hosts", each a process tree with its own VAR_DIR (so its own
MEDIA_ROOT, FILE_UPLOAD_TEMP_DIR, TMPDIR and beat schedule):

- web: gunicorn on 127.0.0.1;
- sync: a Celery worker on the default queue and the sync queue, the only
  host with the sync folder (sources are added there with `manage.py sync --add`);
- work: a Celery worker on the default queue only.

An operator uploads sessions, syncs the folder, opens a session page whose
timeline a worker builds from the bucket, dry-runs a repair of everything,
applies it (split across both workers; the synced sessions' items go to the
sync host, which writes them back), reads the audit trail, rolls back and
downloads an export. Every host's media folder stays empty. With blobs on
local disk instead (no STORAGE_URL), it fails at the first worker that reads
a blob the web host stored.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from django.conf import settings

from project.celery import app as celery_app
from tests.helpers import generated_sessions
from tests.storage.conftest import free_port, storage_url
from tests.sync.conftest import age, call, reply, user
from transcripts import actions
from transcripts.engine import analyze
from transcripts.models import Timeline

BROKEN = (
    user("u1", None, "list the files")
    + call("a1", "u1", "toolu_1")
    + user("u2", "a1", "hello?")
    + reply("a2", "u2")
)

pytestmark = [
    pytest.mark.s3,
    pytest.mark.skipif(
        not (
            os.getenv("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
            and os.getenv("CELERY_BROKER_URL", "").startswith("redis://")
        ),
        reason="hosts that share no disk need DATABASE_URL=postgres://... and "
        "CELERY_BROKER_URL=redis://... (SQLite and the filesystem broker are files)",
    ),
]

BIN = Path(sys.executable).parent
TIMEOUT = 90  # seconds any one wait may take


class Hosts:
    """The three hosts' processes, their folders and what they print."""

    def __init__(self, root: Path, env: dict[str, str], port: int) -> None:
        self.root, self.env, self.port = root, env, port
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.url = f"http://127.0.0.1:{port}"

    def folder(self, host: str) -> Path:
        return self.root / host

    def host_env(self, host: str, **more: str) -> dict[str, str]:
        var = self.folder(host)
        (var / "tmp").mkdir(parents=True, exist_ok=True)
        return {**self.env, "VAR_DIR": str(var), "TMPDIR": str(var / "tmp"), **more}

    def start(self, host: str, command: list[str], **more: str) -> None:
        with (self.root / f"{host}.log").open("wb") as log:
            self.processes[host] = subprocess.Popen(
                command,
                env=self.host_env(host, **more),
                cwd=settings.BASE_DIR,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def log(self, host: str) -> str:
        return (self.root / f"{host}.log").read_text(errors="replace")

    def manage(self, host: str, *args: str, **more: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            env=self.host_env(host, **more),
            cwd=settings.BASE_DIR,
            capture_output=True,
            timeout=TIMEOUT,
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return done.stdout.decode()

    def stop(self) -> None:
        for process in self.processes.values():
            process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def wait(what: str, check: Any, hosts: Hosts) -> Any:
    """Return `check()` once it is truthy; fail, showing the hosts' logs, after TIMEOUT."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if value := check():
            return value
        for name, process in hosts.processes.items():
            assert process.poll() is None, f"{name} died: {hosts.log(name)[-3000:]}"
        time.sleep(0.2)
    logs = "\n".join(f"--- {name}\n{hosts.log(name)[-2000:]}" for name in hosts.processes)
    raise AssertionError(f"{what}: still not after {TIMEOUT}s\n{logs}")


@pytest.fixture
def hosts(transactional_db: None, s3_endpoint: str, bucket: str, tmp_path: Path) -> Iterator[Hosts]:
    database = urlsplit(os.environ["DATABASE_URL"])
    # The test database, which this process's connection already uses.
    database_url = database._replace(path="/" + settings.DATABASES["default"]["NAME"]).geturl()
    tag = uuid.uuid4().hex[:8]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_"))},
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": os.environ["CELERY_BROKER_URL"],
        # Queues of this test's, so no other worker on the broker takes its tasks.
        "CELERY_TASK_DEFAULT_QUEUE": f"pf-hosts-{tag}",
        "CELERY_SYNC_QUEUE": f"pf-hosts-{tag}-sync",
        "STORAGE_URL": storage_url(s3_endpoint, bucket),
        "STORAGE_MULTIPART_BYTES": str(5 * 1024 * 1024),
        "DEBUG": "True",
        "JOB_CHUNK_SIZE": "1",
        # Every timeline is built by a worker, from the bucket, for the web host's page.
        "TIMELINE_INLINE_BYTES": "0",
        "LOG_LEVEL": "INFO",
        "LOG_FORMAT": "console",
    }
    hosts = Hosts(tmp_path, env, free_port(range(9140, 9200)))
    sync_folder = hosts.folder("sync") / "agents"
    sync_folder.mkdir(parents=True)
    hosts.env_sync = {"SYNC_ROOTS": str(sync_folder)}  # type: ignore[attr-defined]
    try:
        hosts.start(
            "web",
            [str(BIN / "gunicorn"), "project.wsgi", "-b", f"127.0.0.1:{hosts.port}", "-w", "2"],
        )
        queues = f"{env['CELERY_TASK_DEFAULT_QUEUE']},{env['CELERY_SYNC_QUEUE']}"
        worker = [str(BIN / "celery"), "-A", "project", "worker", "--pool", "solo"]
        hosts.start("sync", [*worker, "-Q", queues, "-n", f"sync-{tag}@%h"], **hosts.env_sync)  # type: ignore[attr-defined]
        hosts.start(
            "work", [*worker, "-Q", env["CELERY_TASK_DEFAULT_QUEUE"], "-n", f"work-{tag}@%h"]
        )

        def healthy() -> bool:
            try:
                return requests.get(f"{hosts.url}/healthz", timeout=2).status_code == 200
            except requests.RequestException:  # still booting
                return False

        wait("web answers /healthz", healthy, hosts)
        names = {f"sync-{tag}", f"work-{tag}"}

        def workers_up() -> bool:
            replies = celery_app.control.ping(timeout=0.5)
            return names <= {name.split("@")[0] for reply in replies for name in reply}

        wait("both workers answer a ping", workers_up, hosts)
        yield hosts
    finally:
        hosts.stop()


def login(hosts: Hosts) -> requests.Session:
    browser = requests.Session()
    page = browser.get(f"{hosts.url}/accounts/login/", timeout=10)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, page.text[:500]
    response = browser.post(
        f"{hosts.url}/accounts/login/",
        {"username": "alice", "password": "alice-password", "csrfmiddlewaretoken": token[1]},
        timeout=10,
        allow_redirects=False,
    )
    assert response.status_code == 302, response.text[:500]
    browser.headers["X-CSRFToken"] = browser.cookies["csrftoken"]
    return browser


def test_an_operator_flow_across_hosts_that_share_no_disk(hosts, alice, workspace):
    _, secret = actions.do_create_api_token(workspace, "ops", acting_user=alice)
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {secret}"
    browser = login(hosts)

    # Upload, through the web host (staged in its own FILE_UPLOAD_TEMP_DIR).
    uploads = generated_sessions(6, seed=18, records=30)
    raw = {path.name: path.read_bytes() for path in uploads}
    response = browser.post(
        f"{hosts.url}/sessions/upload/",
        data={"workspace": workspace.pk},
        files=[("files", (path.name, path.read_bytes())) for path in uploads],
        timeout=60,
        allow_redirects=False,
    )
    assert response.status_code == 302, response.text[:1000]

    # Sync: the folder is on the sync host only; its source is added there.
    folder = hosts.folder("sync") / "agents"
    (folder / "synced.jsonl").write_bytes(BROKEN)
    age(folder / "synced.jsonl")
    out = hosts.manage(
        "sync",  # the host
        "sync",  # the command
        "--add",
        str(folder),
        "--workspace",
        workspace.name,
        "--user",
        "alice",
        "--format",
        "claude_code",
        "--write-back",
        "--no-progress",
        **hosts.env_sync,
    )
    assert "synced.jsonl" in out or "1" in out
    (folder / "later.jsonl").write_bytes(BROKEN.replace(b"toolu_1", b"toolu_9"))
    age(folder / "later.jsonl")
    source = workspace.sources.get()
    response = browser.post(f"{hosts.url}/sources/{source.pk}/sync/", timeout=10)
    assert response.status_code in (200, 302)

    def sessions() -> list[dict[str, Any]]:
        body = api.get(f"{hosts.url}/api/sessions", timeout=10).json()
        return body["results"] if isinstance(body, dict) else body

    listed = wait(
        "the web-queued sync reaches the sync host",
        lambda: len(sessions()) == 8 and sessions(),
        hosts,
    )
    faulty = [s for s in listed if sum(s["fault_counts"].values())]
    assert len(faulty) >= 4
    # The sync queued by the web host ran on the host that has the folder.
    assert re.search(r"sync_source\[[^\]]+\] succeeded", hosts.log("sync"))
    assert "sync_source" not in hosts.log("work")

    # A session page: a worker builds its timeline from the bucket; the web host shows it.
    shown = faulty[0]
    assert browser.get(f"{hosts.url}/sessions/{shown['id']}/", timeout=10).status_code == 200
    wait(
        "a worker builds the timeline",
        lambda: Timeline.objects.filter(
            revision__session=shown["id"], status=Timeline.Status.READY
        ).exists(),
        hosts,
    )
    page = browser.get(f"{hosts.url}/sessions/{shown['id']}/", timeout=10)
    assert next(iter(shown["fault_counts"])) in page.text

    def finished(job_id: int) -> dict[str, Any] | None:
        job = api.get(f"{hosts.url}/api/jobs/{job_id}", timeout=10).json()
        return job if job["status"] == "done" else None

    dry = api.post(f"{hosts.url}/api/jobs", json={"kind": "dry_run"}, timeout=10)
    assert dry.status_code == 202, dry.text
    dry_run = wait("the dry run", lambda: finished(dry.json()["id"]), hosts)
    assert (dry_run["total"], dry_run["failed"]) == (8, 0)

    before = {host: len(hosts.log(host)) for host in ("sync", "work")}
    applied = api.post(f"{hosts.url}/api/jobs/{dry_run['id']}/apply", timeout=10)
    assert applied.status_code == 202, applied.text
    repair = wait("the repair", lambda: finished(applied.json()["id"]), hosts)
    assert (repair["failed"], repair["fence_lost"]) == (0, 0)
    assert repair["done"] == len(faulty)
    # Both hosts took chunks of the repair; the written-back ones only the sync host.
    for host in ("sync", "work"):
        log = hosts.log(host)[before[host] :]
        assert re.search(r"run_job_items\[[^\]]+\] succeeded", log), log
    expected = analyze(BROKEN, "synced.jsonl", "synthesize", format="claude_code").repaired
    assert (folder / "synced.jsonl").read_bytes() == expected

    audit = browser.get(f"{hosts.url}/audit/export.jsonl", timeout=10)
    records = [json.loads(line) for line in audit.text.splitlines() if line]
    assert sum(
        1 for r in records if r.get("job") == repair["id"] and r["op"] != "write_back"
    ) >= len(faulty)
    assert any(r["op"] == "write_back" for r in records)

    rolled = api.post(f"{hosts.url}/api/jobs/{repair['id']}/rollback", timeout=10)
    assert rolled.status_code == 202, rolled.text
    rollback = wait("the rollback", lambda: finished(rolled.json()["id"]), hosts)
    assert (rollback["done"], rollback["fence_lost"]) == (len(faulty), 0)
    assert (folder / "synced.jsonl").read_bytes() == BROKEN

    export = api.post(f"{hosts.url}/api/jobs", json={"kind": "export"}, timeout=10)
    assert export.status_code == 202, export.text
    exported = wait("the export", lambda: finished(export.json()["id"]), hosts)
    archive = browser.get(f"{hosts.url}/jobs/{exported['id']}/archive/", timeout=30)
    assert archive.status_code == 200
    members = zipfile.ZipFile(io.BytesIO(archive.content))
    manifest = json.loads(members.read("manifest.json"))
    by_name = {entry["name"]: entry for entry in manifest["sessions"]}
    for name, data in raw.items():
        repaired = analyze(data, name, "synthesize").repaired
        assert members.read(by_name[name]["path"]) == repaired

    for host in ("web", "sync", "work"):
        media = hosts.folder(host) / "media"
        assert not media.exists() or list(media.rglob("*")) == [], host
