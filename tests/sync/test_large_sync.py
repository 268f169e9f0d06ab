"""Sync and appends stream: a session larger than the memory they may use is synced all the same.

Each step (a sync of the folder, an upload, an API append) is its own process
under an address-space limit (`resource.setrlimit`) well below the session's
size, so reading the file, the head or the new head whole fails it. After
each step, the session's head is checked against the file: the same sha256
and size, the stored blobs streaming the same bytes, and the counts an
analysis of the file itself gives (the oracle, read here without a limit).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.helpers import generated_session
from tests.jobs.test_real_world import database_url
from tests.sync.conftest import OLD, age, call, reply, user
from transcripts.actions import sync
from transcripts.engine import analyze
from transcripts.formats.source import FileSource
from transcripts.models import Revision, Session, SyncedFile, SyncSource

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
# Address space of each step's process, in bytes: Django and the engine take about
# 100 MiB of it; the session (about 170 MB) does not fit beside them.
LIMIT = 240 << 20
RECORDS = 40_000
RESULT_BYTES = "100:34000"  # tool results of 0.1 to 34 KB

# One step, in a process of its own: its arguments, then what it did as one JSON line.
STEP = """
import json, os, resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings"
import django
django.setup()
from django.utils import timezone
from transcripts.actions import sync
from transcripts.actions.sessions import do_ingest_sessions
from transcripts.models import Session
from transcripts.uploads import Limits, Unpacker
what = sys.argv[2]
if what == "sync":
    report = sync.do_sync_source(int(sys.argv[3]))
    done = {k: getattr(report, k) for k in ("new", "appended", "rewritten", "unchanged", "waiting")}
    done["errors"] = report.errors
elif what == "ingest":
    sources = sync.SyncSource.objects.select_related("workspace", "created_by")
    source = sources.get(pk=int(sys.argv[3]))
    path = sys.argv[4]
    with Unpacker(Limits.from_settings()) as unpacker, open(path, "rb") as f:
        unpacker.add(os.path.basename(path), f, unpack=False)
        (session,) = do_ingest_sessions(
            source.workspace, [(os.path.basename(path), unpacker.sessions[0])],
            acting_user=source.created_by, last_write=timezone.now(),
        )
    done = {"session": session.pk}
else:
    session = Session.objects.get(pk=int(sys.argv[3]))
    with open(sys.argv[4], "rb") as f:
        data = f.read()
    revision = sync.do_append_records(session, data, acting_user=session.created_by)
    done = {"revision": revision.number}
print(json.dumps(done))
"""

# The step's peak RSS is read by a launcher that forks it (see tests/cli/test_large_session.py).
LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
sys.stderr.write(f"\\npeak {usage.ru_maxrss * 1024}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def step(staging: Path, *argv: str) -> dict[str, Any]:
    """Run one step under LIMIT; return what it printed. Fails if it failed or left files staged."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "FILE_UPLOAD_TEMP_DIR": str(staging),
        "SYNC_ROOTS": ":".join(str(r) for r in settings.SYNC_ROOTS),
        "MALLOC_ARENA_MAX": "2",
    }
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, sys.executable, "-c", STEP, str(LIMIT), *argv],
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=600,
        check=False,
    )
    stderr, _, peak = done.stderr.rpartition(b"\npeak ")
    assert done.returncode == 0, stderr.decode()[-3000:]
    assert list(staging.iterdir()) == []
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    result["peak"] = int(peak)
    return result


def generate(path: Path) -> Path:
    """Copy the shared generator's session (made once, kept by tests.helpers) to `path`."""
    made = generated_session(RECORDS, seed=11, fault_rate=0.01, result_bytes=RESULT_BYTES)
    shutil.copyfile(made, path)
    return path


def sha256_of(path: Path, size: int) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while size > 0 and (chunk := f.read(min(1 << 20, size))):
            digest.update(chunk)
            size -= len(chunk)
    return digest.hexdigest()


def assert_head_is(session: Session, path: Path, size: int) -> Revision:
    """Check `session`'s head holds the first `size` bytes of `path`, with their counts."""
    session.refresh_from_db()
    head = session.head
    assert head is not None
    assert (head.size, head.sha256) == (size, sha256_of(path, size))
    streamed = hashlib.sha256()
    for chunk in head.chunks():  # each blob checked against its name on the way
        streamed.update(chunk)
    assert streamed.hexdigest() == head.sha256
    with FileSource(path) as whole, FileSource.spooled(whole.chunks(0, size)) as content:
        expected = analyze(content, session.name, format="claude_code", summaries=False)
    assert (session.format, session.record_count) == ("claude_code", expected.record_count)
    assert session.fault_counts == expected.fault_counts
    assert session.fault_counts  # the generated faults are found
    return head


def more_records(path: Path, start: int, count: int, pad: int = 0) -> bytes:
    """Return `count` exchanges that continue the live branch of the session at `path`.

    Each is a user message (`pad` bytes of text, if given) and the assistant's
    reply; every 97th reply is a tool call that nothing answers (a
    `missing_result` once its turn is followed).
    """
    with FileSource(path) as whole:
        tail = whole[max(0, len(whole) - (1 << 20)) : len(whole)]
    parent = json.loads(tail.rstrip(b"\n").rsplit(b"\n", 1)[-1])["uuid"]
    out = []
    for n in range(start, start + count):
        out.append(user(f"g{n}", parent, "x" * pad or f"step {n}"))
        answer = call if n % 97 == 0 else (lambda uid, parent, _: reply(uid, parent))
        out.append(answer(f"c{n}", f"g{n}", f"toolu_g{n}"))
        parent = f"c{n}"
    return b"".join(out)


def test_a_session_larger_than_the_memory_limit_syncs_and_takes_appends(
    tmp_path: Path, source: SyncSource, root: Path, settings: Any
) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    settings.MEDIA_ROOT = str(tmp_path / "media")  # its blobs go with the test's files
    big = generate(root / "big.jsonl")
    assert big.stat().st_size > LIMIT * 0.65  # with Django beside it, reading it whole fails
    age(big)
    peaks: dict[str, int] = {}

    # A new file: staged, read through its FileSource, stored.
    done = step(staging, "sync", str(source.pk))
    assert (done["new"], done["errors"]) == (1, [])
    peaks["new file"] = done["peak"]
    synced = SyncedFile.objects.get(path="big.jsonl")
    assert_head_is(synced.session, big, big.stat().st_size)
    assert (synced.size, synced.offset) == (big.stat().st_size, big.stat().st_size)

    # A small append: the head's blob and the new lines staged, only the delta stored.
    with big.open("ab") as f:
        f.write(more_records(big, 1, 200))
    age(big, OLD + 10)
    done = step(staging, "sync", str(source.pk))
    assert (done["appended"], done["errors"]) == (1, [])
    peaks["small append"] = done["peak"]
    head = assert_head_is(synced.session, big, big.stat().st_size)
    assert (head.chain, head.origin) == (1, "sync")

    # An append larger than GROW_INLINE, ending in a partial line: the lines staged, the part waits.
    grown = more_records(big, 1000, 4000, pad=1000)
    assert len(grown) > sync.GROW_INLINE
    partial = b'{"type":"user","uuid":"half'
    with big.open("ab") as f:
        f.write(grown + partial)
    age(big, OLD + 20)
    done = step(staging, "sync", str(source.pk))
    assert (done["appended"], done["errors"]) == (1, [])
    peaks["large append"] = done["peak"]
    taken = big.stat().st_size - len(partial)
    head = assert_head_is(synced.session, big, taken)
    assert head.chain == 2
    synced.refresh_from_db()
    assert (synced.size, synced.offset) == (big.stat().st_size, taken)

    # Touched: the mirror check hashes the synced bytes, streamed; the partial line still waits.
    age(big, OLD + 30)
    done = step(staging, "sync", str(source.pk))
    assert (done["waiting"], done["errors"]) == (1, [])
    peaks["mirror check"] = done["peak"]
    assert synced.session.revisions.count() == 3

    # Changed before its old end: a rewrite, staged whole and stored whole.
    with big.open("r+b") as f:
        first = f.read(1 << 16)
        at = first.index(b'"sessionId":"') + len(b'"sessionId":"')
        f.seek(at)
        f.write(b"Z")
    age(big, OLD + 40)
    done = step(staging, "sync", str(source.pk))
    assert (done["rewritten"], done["errors"]) == (1, [])
    peaks["rewrite"] = done["peak"]
    head = assert_head_is(synced.session, big, taken)
    assert (head.chain, head.origin) == (0, "rewrite")

    # The API's way in: an upload, then an append onto its head.
    upload = tmp_path / "upload.jsonl"
    shutil.copyfile(big, upload)
    os.truncate(upload, taken)
    done = step(staging, "ingest", str(source.pk), str(upload))
    peaks["upload"] = done["peak"]
    uploaded = Session.objects.get(pk=done["session"])
    lines = tmp_path / "lines.jsonl"
    lines.write_bytes(more_records(upload, 9000, 10))
    done = step(staging, "append", str(uploaded.pk), str(lines))
    peaks["API append"] = done["peak"]
    with upload.open("ab") as f:
        f.write(lines.read_bytes())
    assert_head_is(uploaded, upload, upload.stat().st_size)

    print(
        f"\n{big.stat().st_size / 2**20:.0f} MiB session, peak RSS: "
        + ", ".join(f"{what} {peak / 2**20:.0f} MiB" for what, peak in peaks.items())
    )
