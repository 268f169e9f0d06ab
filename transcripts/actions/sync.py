"""Follow folders of session files (sync sources), and take records that agents append.

A sync walks a source's folder and compares each file's stat with what the
last sync saw (`SyncedFile`): an unchanged file is not read. A JSON-lines file
that grew, and whose first and last bytes before the old end are unchanged,
is an append: only the bytes from the old end are read, up to the last
newline; a partial last line waits for the next sync. Anything else (a file
that shrank, changed before its old end, or a JSON document) is a rewrite: a
new revision holding the whole file. A file gone from the folder keeps its
session; a file that reappears under another name (same inode, or same
fingerprints) is a rename. Which of these a file is, is decided by
`transcripts.filechange` from what was stored and what is on disk. Every
change is audited.

No file, head or new head is held whole in memory: a new or rewritten
file is copied a chunk at a time to a staged file (`uploads.StagingFile`),
hashed on the way, read through its FileSource and moved into the blob
storage (`uploads.store`); the mirror check hashes the synced bytes as they
are read; an append streams the head's blobs and the new lines into a staged
file, reads that, and stores only the lines. A staged file goes when its
sync or append ends, whatever ended it.

Appended records go onto the session's head revision, so a repair made in the
dashboard is kept and the agent's new records follow it. A session written
within settings.LIVE_GRACE seconds is live: its unanswered tail calls are
`pending_result` until the grace passes (`do_expire_live_sessions`).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import orjson
import structlog
from django.db import DatabaseError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from transcripts import formats, queue
from transcripts.actions.common import (
    EventType,
    HeadState,
    audit,
    fit_name,
    live_fields,
    open_analysis,
    write_head,
)
from transcripts.actions.sessions import create_session, subagent_of
from transcripts.core import jsontext
from transcripts.engine import ENGINE_VERSION, analyze
from transcripts.filechange import Change, OnDisk, Stored, decide, rename_candidates, rewrite_reason
from transcripts.models import (
    AuditRecord,
    Revision,
    Session,
    SyncedFile,
    SyncGrant,
    SyncSource,
    Workspace,
    store_blob,
)

# SyncError is the sync's error too: its callers catch sync.SyncError.
from transcripts.roots import SyncError as SyncError
from transcripts.roots import check_source_path, is_utf8
from transcripts.uploads import CHUNK, Staged, StagingFile, store
from transcripts.writeback import file_fingerprints, is_own_file

logger = structlog.get_logger(__name__)

# File names each kind of source holds sessions in.
PATTERNS = {
    "": ("*.jsonl", "*.ndjson", "*.json"),
    "claude_code": ("*.jsonl",),
    "codex": ("rollout-*.jsonl",),
    "openclaw": ("*.jsonl",),
}
LINE_SUFFIXES = (".jsonl", ".ndjson")
# A sync that has not finished after this long is presumed dead: another may start.
SYNC_LEASE = timedelta(minutes=30)
# Bytes a sync's append holds in memory; more are staged on disk (see `_grow`).
GROW_INLINE = 4 << 20


class AppendError(ValueError):
    """Records cannot be appended to a session; `code` is a stable id, the message says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class SyncReport:
    """What one sync of a source did: file counts by outcome and the errors, one per file."""

    source: int
    files: int = 0
    unchanged: int = 0
    new: int = 0
    appended: int = 0
    rewritten: int = 0
    renamed: int = 0
    deleted: int = 0
    waiting: int = 0
    errors: list[str] = field(default_factory=list)
    skipped: bool = False

    def summary(self) -> str:
        """Return the report in one line of words."""
        if self.skipped:
            return f"source {self.source}: another sync is running"
        parts = [
            f"{n} {word}"
            for n, word in (
                (self.new, "new"),
                (self.appended, "appended"),
                (self.rewritten, "rewritten"),
                (self.renamed, "renamed"),
                (self.deleted, "gone"),
                (self.waiting, "waiting for a complete line"),
                (self.unchanged, "unchanged"),
                (len(self.errors), "unreadable"),
            )
            if n
        ]
        return f"source {self.source}: {self.files} files" + (
            ": " + ", ".join(parts) if parts else ""
        )


def do_grant_folder(workspace: Workspace, path: str, *, acting_user: Any) -> SyncGrant:
    """Let `workspace`'s admins follow folders under `path` (a site admin's or operator's act).

    `path` must be a folder under settings.SYNC_ROOTS (SyncError otherwise);
    granting it twice keeps one grant.
    """
    resolved = check_source_path(path)
    with transaction.atomic(durable=True):
        grant, created = SyncGrant.objects.get_or_create(
            workspace=workspace, path=str(resolved), defaults={"granted_by": acting_user}
        )
        if created:
            audit(
                EventType.FOLDER_GRANTED,
                workspace_id=workspace.pk,
                acting_user=acting_user,
                extra_data={"path": str(resolved)},
            )
    return grant


# One key for every transaction that adds a source, whichever workspace's.
SOURCES_LOCK = 0x50414952  # "PAIR"


def _lock_sources() -> None:
    """Hold the lock that adding a source takes, until the caller's transaction ends.

    PostgreSQL: a transaction-scoped advisory lock. SQLite needs none: its
    IMMEDIATE transactions hold the database's write lock from their start.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [SOURCES_LOCK])


def do_create_source(
    workspace: Workspace,
    path: str,
    *,
    acting_user: Any,
    name: str = "",
    format: str = "",
    write_back: bool = False,
) -> SyncSource:
    """Add the folder `path` as a sync source of `workspace`; raise SyncError if not allowed.

    The folder must lie under a folder granted to `workspace`
    (`check_source_path`), and neither be, hold nor lie in a folder that any
    source follows, of any workspace: a file is one session of one
    workspace. The check and the insert hold one lock (`_lock_sources`), so
    two admins adding overlapping folders at once cannot both succeed.
    """
    resolved = check_source_path(path, workspace)
    if format not in PATTERNS:
        raise SyncError(f"unknown source format {format!r}")
    with transaction.atomic(durable=True):
        _lock_sources()
        for other in SyncSource.objects.all():
            existing = Path(other.path)
            if not (resolved.is_relative_to(existing) or existing.is_relative_to(resolved)):
                continue
            # Another workspace's source is not named: its existence is all that is said.
            where = (
                f"the source {other.name} ({existing}) of {workspace}"
                if other.workspace_id == workspace.pk
                else "a folder another workspace follows"
            )
            if existing == resolved:
                raise SyncError(f"{resolved} is already {where}")
            raise SyncError(
                f"{resolved} overlaps {where}: a file would become two sessions; "
                "each folder belongs to one workspace"
            )
        source = SyncSource.objects.create(
            workspace=workspace,
            name=fit_name(name or resolved.name, _name_length()),
            path=str(resolved),
            format=format,
            write_back=write_back,
            created_by=acting_user,
        )
        audit(
            EventType.SOURCE_ADDED,
            workspace_id=workspace.pk,
            acting_user=acting_user,
            source=source,
            extra_data={"path": source.path, "format": format, "write_back": write_back},
        )
    return source


def is_line_oriented(session: Session) -> bool:
    """Return True when records are appended to `session` as JSON lines."""
    fmt = formats.FORMATS.get(session.format)
    if fmt is not None and not session.error:
        return fmt.jsonl
    return session.name.endswith(LINE_SUFFIXES)


# Appends: shared by sync and the API.


def lock_session(pk: int) -> tuple[Session, Revision]:
    """Lock the session `pk` for the caller's transaction; return it and its head, read after.

    The session row is locked alone and the head read once the lock is held:
    on PostgreSQL a row locked by `FOR UPDATE` through an outer join is
    re-checked after the wait without its joined row, so a head joined in
    would read as NULL once another writer has moved it.
    """
    session = Session.objects.select_for_update().get(pk=pk)
    assert session.head_id is not None, "every session has a head from its creation"
    head = Revision.objects.get(pk=session.head_id)
    session.head = head
    return session, head


def append_records(
    session: Session,
    data: bytes | Staged,
    *,
    acting_user: Any,
    origin: str,
    now: datetime,
    note: str = "",
    expected_head: int | None = None,
    source: SyncSource | None = None,
) -> Revision:
    """Add `data` (whole JSON lines) onto `session`'s head as a new head; caller's transaction.

    Locks the session row, writes revision n+1 = head bytes + `data` (a newline
    first if the head lacks one), one `append` audit record (naming `source`,
    the sync source it came from, if any), and the session's new counts with
    the live rules (`now` is the last write). `data` is the bytes, or a
    `Staged` file of them (a sync's large append). Neither the head nor the
    new head is held in memory: the head's blobs stream into a staged file,
    `data` after them, hashed on the way, and the new head is read from that
    file (`_new_head`). Raises AppendError (`head_moved`), and OSError or
    BlobUnreadable when storage or the staging folder fails; no staged file
    is left behind.
    """
    session, head = lock_session(session.pk)
    if expected_head is not None and head.number != expected_head:
        raise AppendError(
            "head_moved",
            f"{session.name}: the head is revision {head.number}, not {expected_head}: "
            "nothing was appended (re-read the session and append what it lacks)",
        )
    size = data.size if isinstance(data, Staged) else len(data)
    chained = head.size > 0 and head.chain < Revision.MAX_CHAIN
    with ExitStack() as stack:
        whole = stack.enter_context(StagingFile(session.name))
        for chunk in head.chunks():
            whole.write(chunk)
        joiner = b"\n" if whole.last not in (b"", b"\n") else b""
        delta: bytes | Staged | None = None
        if isinstance(data, Staged):
            # The delta is staged too, beside the whole, as the bytes go by.
            added = stack.enter_context(StagingFile(session.name)) if chained else None
            records = 0
            for number, chunk in enumerate(_file_chunks(data.path)):
                piece = joiner + chunk if number == 0 else chunk
                whole.write(piece)
                if added is not None:
                    added.write(piece)
                records += chunk.count(b"\n")
            delta = added.finish() if added is not None else None
        else:
            whole.write(joiner)
            whole.write(data)
            records = data.count(b"\n")
            delta = joiner + data if chained else None
        revision = _new_head(
            session,
            head,
            whole.finish(),
            origin=origin,
            acting_user=acting_user,
            now=now,
            delta=delta,
        )
    AuditRecord.objects.create(
        source=source,
        acting_user=acting_user,
        session=session,
        revision_from=head,
        revision_to=revision,
        op=AuditRecord.Action.APPEND,
        engine_version=ENGINE_VERSION,
        span_start=head.size + len(joiner),
        span_end=revision.size,
        note=note or f"{origin}: {records} record(s), {size} bytes",
    )
    _audit_session(
        EventType.SESSION_APPENDED,
        session,
        revision,
        acting_user=acting_user,
        source=source,
        extra_data={"origin": origin, "records": records, "bytes": size},
    )
    return revision


def _audit_session(
    event_type: str,
    session: Session,
    revision: Revision | None,
    *,
    acting_user: Any,
    source: SyncSource | None,
    extra_data: dict[str, Any],
) -> None:
    """Audit a change to `session`: a sync's is the source's, on behalf of its creator."""
    audit(
        event_type,
        workspace_id=session.workspace_id,
        acting_user=None if source is not None else acting_user,
        on_behalf_of=acting_user if source is not None else None,
        session=session,
        source=source,
        revision=revision,
        extra_data=extra_data,
    )


def do_append_records(
    session: Session,
    data: bytes,
    *,
    acting_user: Any,
    origin: str = Revision.Origin.API,
    now: datetime | None = None,
    expected_head: int | None = None,
) -> Revision:
    """Append the JSON lines `data` to `session` as its new head revision; return it.

    Each line must be one JSON object and end in a newline. The session then
    counts as written at `now` (default: the current time), so its unanswered
    tail calls are `pending_result` for settings.LIVE_GRACE seconds. With
    `expected_head` (a revision number) nothing is appended unless that is
    still the head, so a client retrying an append it is unsure of never
    writes its lines twice. Raises AppendError with code `synced` (the
    session follows a sync source's file), `not_appendable` (the session's
    format is one JSON document, not lines), `empty`,
    `partial_line`, `bad_record` (the message names the line and the
    reason) or `head_moved`.
    """
    if SyncedFile.objects.filter(session=session).exists():
        raise AppendError(
            "synced",
            f"{session.name}: the session follows a file of a sync source; "
            "its records come from that file",
        )
    if not is_line_oriented(session):
        raise AppendError(
            "not_appendable",
            f"{session.name}: {formats.label(session.format)} is one JSON document; "
            "records can be appended only to a JSON-lines session",
        )
    _check_lines(session.name, data)
    with transaction.atomic(durable=True):
        return append_records(
            session,
            data,
            acting_user=acting_user,
            origin=origin,
            now=now or timezone.now(),
            expected_head=expected_head,
        )


def _check_lines(name: str, data: bytes) -> None:
    if not data.strip():
        raise AppendError("empty", f"{name}: nothing to append")
    if not data.endswith(b"\n"):
        raise AppendError("partial_line", f"{name}: the last line does not end in a newline")
    # Lines end at "\n" only, as the loader and the agents split them (not at a bare "\r").
    for number, line in enumerate(data.split(b"\n")[:-1], 1):
        if not line.strip():
            continue
        try:
            value = jsontext.loads(line)  # as the agent reads it: see core.jsontext
        except orjson.JSONDecodeError as exc:
            raise AppendError("bad_record", f"{name}: appended line {number}: {exc}") from None
        if not isinstance(value, dict):
            raise AppendError(
                "bad_record", f"{name}: appended line {number}: not a JSON object"
            ) from None


def _new_head(
    session: Session,
    head: Revision,
    content: Staged,
    *,
    origin: str,
    acting_user: Any,
    now: datetime,
    delta: bytes | Staged | None = None,
) -> Revision:
    """Write the staged `content` as revision head+1 and make it the head, with fresh counts.

    `content` is read through its FileSource, never whole; its counts are
    ingest's (no previews kept). With `delta` (the bytes `content` adds to
    the head's, or a staged file of them), only those are stored; otherwise
    `content` is. Raises OSError when storage fails.
    """
    with content.source() as source:
        analysis = analyze(
            source,
            session.name,
            format=session.format if not session.error else None,
            summaries=False,
            **live_fields(now),
        )
        state = HeadState.of(analysis, now)
    if delta is None:
        storage: dict[str, Any] = {"sha256": store(content)}
    else:
        storage = {
            "sha256": content.sha256,
            "appended_to": head,
            "delta": store(delta) if isinstance(delta, Staged) else store_blob(delta),
            "chain": head.chain + 1,
        }
    revision = Revision.objects.create(
        session=session,
        number=head.number + 1,
        size=content.size,
        **storage,
        engine_version=ENGINE_VERSION,
        origin=origin,
        parent=head,
        created_by=acting_user,
    )
    moved = write_head(session, revision, state, fence=head)
    assert moved, "the session is locked at its head"
    return revision


# Live sessions.


def refresh_live(session: Session, now: datetime | None = None) -> bool:
    """Re-count `session`'s faults if its grace has passed while results were pending.

    Returns True if the counts were rewritten: `pending_result` calls become
    `missing_result` once the session is no longer live.
    """
    now = now or timezone.now()
    if session.is_live(now) or "pending_result" not in session.fault_counts:
        return False
    with transaction.atomic():
        locked, head = lock_session(session.pk)
        if locked.is_live(now) or "pending_result" not in locked.fault_counts:
            return False
        with open_analysis(head, "synthesize") as analysis:
            locked.fault_counts = analysis.fault_counts
        locked.save(update_fields=["fault_counts"])
    session.fault_counts = analysis.fault_counts
    return True


def _name_length() -> int:
    """Return how long a source's name may be (its column's max_length)."""
    length = SyncSource._meta.get_field("name").max_length
    assert length is not None
    return length


def do_expire_live_sessions(now: datetime | None = None) -> int:
    """Re-count every session whose grace ran out with results pending; return how many."""
    now = now or timezone.now()
    expired = (
        Session.objects.get_queryset().filter(live_until__lte=now).with_fault("pending_result")
    )
    return sum(refresh_live(session, now) for session in expired.select_related("head"))


# Folder sync.


def do_sync_source(
    source_id: int,
    *,
    progress: Callable[[int, int, str], None] | None = None,
) -> SyncReport:
    """Sync the files of source `source_id` into its workspace's sessions; return the report.

    `progress(done, total, path)` is called after each file. A sync already
    running on the source (and within SYNC_LEASE) makes this one return at
    once with `skipped` set. Errors reading one file are reported and the
    rest still sync; a folder that is gone or outside the roots is
    recorded as the source's `last_error`.
    """
    now = timezone.now()
    claim = uuid.uuid4()
    taken = SyncSource.objects.filter(
        Q(claim__isnull=True) | Q(claimed_at__lt=now - SYNC_LEASE), pk=source_id
    ).update(claim=claim, claimed_at=now)
    report = SyncReport(source=source_id)
    if not taken:
        report.skipped = True
        return report
    last_error = ""
    try:
        source = SyncSource.objects.select_related("workspace", "created_by").get(pk=source_id)
        _sync(source, report, progress)
    except SyncError as exc:
        last_error = str(exc)
    except Exception as exc:  # whatever stopped it, the claim is released below
        logger.exception("sync_failed", source=source_id)
        last_error = f"the sync stopped: {type(exc).__name__}: {exc}"
        report.errors.append(last_error)
    finally:
        # Released whatever happened, so the next sync is not told one is running.
        SyncSource.objects.filter(pk=source_id, claim=claim).update(
            claim=None,
            claimed_at=None,
            last_sync=timezone.now(),
            last_error=last_error or "\n".join(report.errors[:20]),
            file_count=SyncedFile.objects.filter(
                source_id=source_id, missing_since__isnull=True
            ).count(),
            error_count=len(report.errors),
        )
    return report


def _scan(source: SyncSource, root: Path, report: SyncReport) -> dict[str, os.stat_result]:
    """Return {relative path: stat} of the session files under `root`, symlinks checked."""
    found: dict[str, os.stat_result] = {}
    patterns = PATTERNS.get(source.format, PATTERNS[""])
    for folder, dirs, files in os.walk(root, onerror=None, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            if is_own_file(name) or not any(Path(name).match(p) for p in patterns):
                continue
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            if not is_utf8(rel):
                shown = os.fsencode(rel).decode("utf-8", "backslashreplace")
                report.errors.append(
                    f"{shown}: the file name is not UTF-8; rename the file to sync it"
                )
                continue
            try:
                if path.is_symlink() and not path.resolve().is_relative_to(root):
                    report.errors.append(f"{rel}: a symlink that leads out of the source's folder")
                    continue
                stat = path.stat()
            except OSError as exc:
                report.errors.append(f"{rel}: {exc.strerror or exc}")
                continue
            if path.is_file():
                found[rel] = stat
    return found


def _sync(
    source: SyncSource,
    report: SyncReport,
    progress: Callable[[int, int, str], None] | None,
) -> None:
    # A grant taken back stops the source's syncs.
    root = check_source_path(source.path, source.workspace)
    found = _scan(source, root, report)
    report.files = len(found)
    known = {f.path: f for f in source.files.select_related("session", "revision")}
    for synced in known.values():
        synced.source = source  # its audit records name it and the user who added it
    gone = {p: f for p, f in known.items() if p not in found and f.missing_since is None}
    for rel in sorted(p for p in found if p not in known):
        renamed = _find_rename(root / rel, found[rel], gone)
        if renamed is not None:
            del gone[renamed.path]
            del known[renamed.path]
            _rename(renamed, rel)
            known[rel] = renamed
            report.renamed += 1
    now = timezone.now()
    for synced in gone.values():
        _mark_gone(synced, now)
        report.deleted += 1
    for done, rel in enumerate(sorted(found), 1):
        try:
            outcome = _sync_file(source, root, rel, found[rel], known.get(rel))
        except OSError as exc:
            report.errors.append(f"{rel}: {exc.strerror or exc}")
            if rel in known:
                SyncedFile.objects.filter(pk=known[rel].pk).update(error=exc.strerror or str(exc))
            outcome = ""
        except DatabaseError as exc:  # e.g. a path longer than an index takes: this file only
            logger.warning("sync_file_refused", source=source.pk, path=rel, error=str(exc))
            report.errors.append(f"{rel}: the database refused it: {exc}".strip())
            outcome = ""
        if outcome:
            setattr(report, outcome, getattr(report, outcome) + 1)
        if progress is not None:
            progress(done, len(found), rel)
    _link_subagents(source)


def _read(path: Path, start: int, end: int) -> bytes:
    """Return the bytes from `start` to `end` of the file at `path` (a few KiB: the ends)."""
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(end - start)


def _file_chunks(path: Path) -> Iterator[bytes]:
    """Yield the bytes of the file at `path` a CHUNK at a time."""
    with open(path, "rb") as f:
        yield from _rest(f)


def _rest(f: IO[bytes]) -> Iterator[bytes]:
    """Yield the rest of the open file `f` a CHUNK at a time, up to its end as read."""
    while chunk := f.read(CHUNK):
        yield chunk


@contextmanager
def _staged_copy(path: Path, lines: bool) -> Iterator[tuple[Staged, int]]:
    """Copy the file at `path` to a staged file; yield it and how many bytes were read.

    The staged file holds the part a sync takes: the whole file, or up to its
    last newline for JSON lines (a partial last line waits). It is deleted
    when the block ends, unless `store` moved it into the blob storage.
    """
    with StagingFile(path.name, lines=lines) as staging, open(path, "rb") as f:
        for chunk in _rest(f):
            staging.write(chunk)
        if _rewritten_while_read(f, staging):
            raise _ChangedWhileRead(path)
        yield staging.finish(), staging.written


class _ChangedWhileRead(Exception):
    """The file was cut or rewritten while it was copied: the copy may mix two files."""


def _rewritten_while_read(f: IO[bytes], staging: StagingFile) -> bool:
    """Return True when the open file `f` was cut below what was read, or its start changed.

    A file rewritten in place (opened to write, cut, written again) while it was
    copied gives a copy of the old bytes up to where the cut came, then new
    ones: no file that ever was. Growth alone (an agent appending) is not this.
    """
    now = os.fstat(f.fileno()).st_size
    if now < staging.written:
        return True
    n = min(SyncedFile.FINGERPRINT_BYTES, staging.written)
    return os.pread(f.fileno(), n, 0) != staging.read(n)


def _file_fields(stat: os.stat_result, read: int, content: Staged, now: datetime) -> dict[str, Any]:
    """Return a SyncedFile's fields after reading `read` bytes of which `content` counts.

    `size` is what was read, not the stat's: bytes written between the stat and
    the read are then seen as growth by the next sync, never as unchanged.
    The fingerprints are read from the staged `content`'s ends: call this
    before `store` moves it.
    """
    head, tail = file_fingerprints(content.path, content.size)
    return {
        "size": read,
        "mtime_ns": stat.st_mtime_ns,
        "inode": stat.st_ino,
        "device": stat.st_dev,
        "offset": content.size,
        "head_hash": head,
        "tail_hash": tail,
        "error": "",
        "missing_since": None,
        "last_seen": now,
    }


def _mtime(stat: os.stat_result) -> datetime:
    return datetime.fromtimestamp(stat.st_mtime_ns / 1e9, UTC)


def _sync_file(
    source: SyncSource,
    root: Path,
    rel: str,
    stat: os.stat_result,
    synced: SyncedFile | None,
) -> str:
    """Bring one file's session up to date; return the SyncReport counter it adds to."""
    path = root / rel
    now = timezone.now()
    lines = path.suffix in LINE_SUFFIXES
    disk = _on_disk(stat, lines)
    if synced is None:
        assert decide(None, disk) is Change.NEW
        try:
            with _staged_copy(path, lines) as (content, read):
                if not content.size:
                    return "waiting"
                fields = _file_fields(stat, read, content, now)
                with transaction.atomic(durable=True):
                    session = create_session(
                        source.workspace,
                        rel,
                        content,
                        acting_user=source.created_by,
                        last_write=_mtime(stat),
                        format=source.format or None,
                        origin=Revision.Origin.SYNC,
                        source=source,
                    )
                    SyncedFile.objects.create(
                        source=source, path=rel, session=session, revision=session.head, **fields
                    )
        except _ChangedWhileRead:
            return "waiting"  # read again, whole, by the next sync
        return "new"
    stored = _stored(synced)
    change = decide(stored, disk)
    if change is Change.CHECK_ENDS:
        change = decide(stored, disk, same_ends=_same_prefix(path, synced))
    with ExitStack() as stack:
        # The file, at the synced offset, once the mirror check has read up to it.
        opened: IO[bytes] | None = None
        if change is Change.CHECK_MIRROR:
            opened = stack.enter_context(open(path, "rb"))
            mirror = synced.revision
            assert mirror is not None
            # The mirrored revision holds the file's first bytes; appends taken since it
            # (a repair made without write-back keeps the mirror back) follow them.
            span = min(mirror.size, synced.offset)
            mirrors = _sha256_of(opened, span) == bytes.fromhex(mirror.sha256)
            if mirrors and span < synced.offset:
                mirrors = _same_prefix(path, synced)  # those appends: their ends, as before
            opened.seek(synced.offset)
            change = decide(stored, disk, same_ends=False, mirrors_prefix=mirrors)
        if change is Change.UNCHANGED:
            return "unchanged"
        if change is Change.APPEND:
            return _grow(path, stat, synced, now, opened)
    return _rewrite(path, stat, synced, lines, now)


def _sha256_of(f: IO[bytes], size: int) -> bytes:
    """Return the sha256 digest of the next `size` bytes of `f` (fewer if it ends), streamed."""
    digest = hashlib.sha256()
    while size > 0 and (chunk := f.read(min(CHUNK, size))):
        digest.update(chunk)
        size -= len(chunk)
    return digest.digest()


def _stored(synced: SyncedFile) -> Stored:
    return Stored(
        size=synced.size,
        mtime_ns=synced.mtime_ns,
        inode=synced.inode,
        offset=synced.offset,
        gone=synced.missing_since is not None,
        mirrored=synced.revision_id is not None,
    )


def _on_disk(stat: os.stat_result, lines: bool) -> OnDisk:
    return OnDisk(stat.st_size, stat.st_mtime_ns, stat.st_ino, lines, stat.st_dev)


def _same_prefix(path: Path, synced: SyncedFile) -> bool:
    """Return True when the file's first and last bytes before the old end are unchanged."""
    n, offset = SyncedFile.FINGERPRINT_BYTES, synced.offset
    head = _read(path, 0, min(n, offset))
    tail = _read(path, max(0, offset - n), offset)
    return (hashlib.sha256(head).hexdigest(), hashlib.sha256(tail).hexdigest()) == (
        synced.head_hash,
        synced.tail_hash,
    )


def _grow(
    path: Path,
    stat: os.stat_result,
    synced: SyncedFile,
    now: datetime,
    f: IO[bytes] | None = None,
) -> str:
    """Take the complete lines written after the synced offset as an append.

    `f` is the file open at the synced offset, if the mirror check opened it.
    The bytes from the offset to the end are held in memory up to
    GROW_INLINE; more are copied to a staged file as they are read (deleted
    once appended, or on any error).
    """
    with ExitStack() as stack:
        if f is None:
            f = stack.enter_context(open(path, "rb"))
            f.seek(synced.offset)
        held: list[bytes] = []
        staging: StagingFile | None = None
        read = records = 0
        for chunk in _rest(f):
            read += len(chunk)
            # Every newline read ends a line taken: only bytes after the last one wait.
            records += chunk.count(b"\n")
            if staging is None and read > GROW_INLINE:
                staging = stack.enter_context(StagingFile(path.name, lines=True))
                for piece in held:
                    staging.write(piece)
                held = []
            if staging is None:
                held.append(chunk)
            else:
                staging.write(chunk)
        added: bytes | Staged
        if staging is None:
            raw = b"".join(held)
            added = raw[: raw.rfind(b"\n") + 1]
            length = len(added)
        else:
            added = staging.finish()
            length = added.size
        size = synced.offset + read  # what was read; see _file_fields
        fields = {"size": size, "mtime_ns": stat.st_mtime_ns, "last_seen": now}
        fields |= {"inode": stat.st_ino, "device": stat.st_dev, "missing_since": None, "error": ""}
        if not length:
            # A partial line at most: remember the stat, take the line when it is whole.
            SyncedFile.objects.filter(pk=synced.pk).update(**fields)
            return "waiting" if read else "unchanged"
        offset = synced.offset + length
        start = max(0, offset - SyncedFile.FINGERPRINT_BYTES)
        tail = os.pread(f.fileno(), offset - start, start)
        # The head's fingerprint covers the first FINGERPRINT_BYTES, or fewer in a small
        # file: then it covers what the offset now takes in.
        head = os.pread(f.fileno(), min(SyncedFile.FINGERPRINT_BYTES, offset), 0)
        with transaction.atomic(durable=True):
            revision = append_records(
                synced.session,
                added,
                acting_user=synced.source.created_by,
                source=synced.source,
                origin=Revision.Origin.SYNC,
                now=_mtime(stat),
                note=(
                    f"sync: {records} record(s) appended to {synced.path} "
                    f"(bytes {synced.offset}-{offset})"
                ),
            )
            # The mirror moves on only if the head mirrored the file before the append.
            mirror = revision if synced.revision_id == revision.parent_id else synced.revision
            SyncedFile.objects.filter(pk=synced.pk).update(
                offset=offset,
                head_hash=hashlib.sha256(head).hexdigest(),
                tail_hash=hashlib.sha256(tail).hexdigest(),
                revision=mirror,
                **fields,
            )
        return "appended"


def _rewrite(
    path: Path, stat: os.stat_result, synced: SyncedFile, lines: bool, now: datetime
) -> str:
    """Take the whole file as a new revision: it shrank, changed before its old end, or is JSON.

    The file is copied to a staged file (`_staged_copy`), never held whole.
    """
    try:
        with _staged_copy(path, lines) as (content, read):
            fields = _file_fields(stat, read, content, now)
            with transaction.atomic(durable=True):
                session, head = lock_session(synced.session_id)
                if head.sha256 == content.sha256:
                    # Touched, or written back by us: nothing new to store.
                    SyncedFile.objects.filter(pk=synced.pk).update(revision=head, **fields)
                    return "unchanged"
                how = rewrite_reason(_stored(synced), _on_disk(stat, lines))
                added_by = synced.source.created_by
                revision = _new_head(
                    session,
                    head,
                    content,
                    origin=Revision.Origin.REWRITE,
                    acting_user=added_by,
                    now=_mtime(stat),
                )
                AuditRecord.objects.create(
                    source=synced.source,
                    acting_user=added_by,
                    session=session,
                    revision_from=head,
                    revision_to=revision,
                    op=AuditRecord.Action.REWRITE,
                    engine_version=ENGINE_VERSION,
                    note=f"sync: {synced.path} {how} ({synced.offset} → {content.size} bytes)",
                )
                _audit_session(
                    EventType.SESSION_REWRITTEN,
                    session,
                    revision,
                    acting_user=added_by,
                    source=synced.source,
                    extra_data={"path": synced.path, "how": how, "bytes": content.size},
                )
                SyncedFile.objects.filter(pk=synced.pk).update(revision=revision, **fields)
            return "rewritten"
    except _ChangedWhileRead:
        return "waiting"  # read again, whole, by the next sync


def _find_rename(
    path: Path, stat: os.stat_result, gone: dict[str, SyncedFile]
) -> SyncedFile | None:
    """Return the gone file that `path` is: the same first and last bytes, same inode first.

    The inode alone proves nothing: a filesystem hands a freed inode number to
    the next new file at once.
    """
    disk = _on_disk(stat, lines=True)
    stored = ((f.path, _stored(f), f.device) for f in gone.values())
    for candidate in rename_candidates(stored, disk):
        if _same_prefix(path, gone[candidate]):
            return gone[candidate]
    return None


def _rename(synced: SyncedFile, rel: str) -> None:
    with transaction.atomic(durable=True):
        old = synced.path
        SyncedFile.objects.filter(source=synced.source_id, path=rel).exclude(pk=synced.pk).delete()
        synced.path = rel
        synced.missing_since = None
        synced.save(update_fields=["path", "missing_since"])
        AuditRecord.objects.create(
            source=synced.source,
            acting_user=synced.source.created_by,
            session=synced.session,
            op=AuditRecord.Action.RENAME,
            engine_version=ENGINE_VERSION,
            note=f"sync: {old} → {rel}",
        )
        _audit_session(
            EventType.SESSION_RENAMED,
            synced.session,
            None,
            acting_user=synced.source.created_by,
            source=synced.source,
            extra_data={"path_before": old, "path": rel},
        )


def _mark_gone(synced: SyncedFile, now: datetime) -> None:
    with transaction.atomic(durable=True):
        synced.missing_since = now
        synced.save(update_fields=["missing_since"])
        AuditRecord.objects.create(
            source=synced.source,
            acting_user=synced.source.created_by,
            session=synced.session,
            op=AuditRecord.Action.DELETE,
            engine_version=ENGINE_VERSION,
            note=f"sync: {synced.path} is gone from the folder; the session and its revisions stay",
        )
        _audit_session(
            EventType.SESSION_FILE_GONE,
            synced.session,
            None,
            acting_user=synced.source.created_by,
            source=synced.source,
            extra_data={"path": synced.path},
        )


def _subagent_parent_path(synced: SyncedFile, root: Path) -> str | None:
    """Return the relative path of the Claude Code session that started this subagent's file."""
    rel = Path(synced.path)
    if not rel.name.startswith("agent-"):
        return None
    if rel.parent.name == "subagents":
        # <sessionId>/subagents/agent-<id>.jsonl beside <sessionId>.jsonl
        session_dir = rel.parent.parent
        return str(session_dir.parent / f"{session_dir.name}.jsonl")
    # Older versions: agent-<id>.jsonl beside its parent; the parent's id is in every line.
    parent_id = subagent_of(rel.name, _read(root / rel, 0, 1 << 16))
    return None if parent_id is None else str(rel.parent / f"{parent_id}.jsonl")


def _link_subagents(source: SyncSource) -> None:
    """Link each Claude Code subagent session of `source` to its parent session."""
    root = Path(source.path)
    unlinked = source.files.filter(
        session__parent__isnull=True, path__contains="agent-", missing_since__isnull=True
    ).select_related("session")
    for synced in unlinked:
        try:
            parent_path = _subagent_parent_path(synced, root)
        except OSError:
            continue
        if parent_path is None:
            continue
        parent = source.files.filter(path=parent_path).values_list("session", flat=True).first()
        if parent is not None and parent != synced.session_id:
            Session.objects.filter(pk=synced.session_id).update(parent=parent)


def sources_due() -> Iterator[int]:
    """Yield the ids of the enabled sources, for the beat schedule."""
    yield from SyncSource.objects.filter(enabled=True).values_list("pk", flat=True)


def do_queue_sync(source: SyncSource, *, acting_user: Any) -> None:
    """Queue a sync of `source` now; raise queue.BrokerUnavailable if the queue is down."""
    with transaction.atomic(durable=True):
        audit(
            EventType.SOURCE_SYNC_QUEUED,
            workspace_id=source.workspace_id,
            acting_user=acting_user,
            source=source,
        )
        queue.enqueue_on_commit(queue.SYNC_SOURCE, source.pk)


def do_update_source(source: SyncSource, *, acting_user: Any, **fields: Any) -> None:
    """Set `fields` (enabled, write_back) of `source`.

    Switching write-back on is audited as such: from then on a repair
    replaces the folder's files.
    """
    with transaction.atomic(durable=True):
        before = {name: getattr(source, name) for name in fields}
        for name, value in fields.items():
            setattr(source, name, value)
        source.save(update_fields=list(fields))
        switched_on = fields.get("write_back") and not before.get("write_back", True)
        audit(
            EventType.SOURCE_WRITE_BACK_ON if switched_on else EventType.SOURCE_CHANGED,
            workspace_id=source.workspace_id,
            acting_user=acting_user,
            source=source,
            extra_data={"before": before, "after": fields},
        )
