"""What every domain's actions share: their exceptions, the audit log writer and the head writer.

`write_head` is the one place a session gets a new head revision: ingest,
a repair or rollback job, a sync's append or rewrite and an API append all
call it, so the session fields that follow from the head are refreshed in
one list (`HEAD_FIELDS`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import IO, Any

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection, models

from transcripts import search
from transcripts.blob_errors import damaged
from transcripts.core.policy import Policy
from transcripts.engine import Analysis, FileSource, analyze
from transcripts.models import (
    AuditLog,
    BlobContent,
    BlobUnreadable,
    JobItem,
    Revision,
    Session,
    blob_name,
    open_blob,
)
from transcripts.policies import policy_for

EventType = AuditLog.EventType
UNFINISHED = (JobItem.Status.QUEUED, JobItem.Status.RUNNING)


class FenceLost(Exception):
    """The session's head moved away from the revision the job started from."""


class JobStateError(Exception):
    """The job is not in a state that allows what was asked (the message says why)."""


def audit(
    event_type: str,
    *,
    workspace_id: int,
    acting_user: Any,
    on_behalf_of: Any = None,
    **fields: Any,
) -> AuditLog:
    """Write one AuditLog row for `event_type` in `workspace_id`; the caller holds the transaction.

    `fields` are the targets (session, job, source, revision, or their
    `_id`s, `on_behalf_of_id` too) and `extra_data`. A person acting is
    `acting_user`; for a change a sync or a worker makes, `acting_user` is
    None and `on_behalf_of` the user who set the source or job up.
    """
    if on_behalf_of is not None:
        fields["on_behalf_of"] = on_behalf_of
    actor = acting_user if getattr(acting_user, "is_authenticated", False) else None
    return AuditLog.objects.create(
        event_type=event_type, workspace_id=workspace_id, acting_user=actor, **fields
    )


def fit_name(name: str, limit: int) -> str:
    """Return `name` cut to at most `limit` characters: its start, "…", then its extension.

    The extension stays so the format is still recognised from the name.
    """
    if len(name) <= limit:
        return name
    stem, extension = os.path.splitext(name)
    if len(extension) > limit // 2:
        stem, extension = name, ""
    return stem[: limit - 1 - len(extension)] + "…" + extension


def file_name_of(name: str) -> str:
    """Return a session's `name` as one safe file name, for downloads and archives.

    A synced session is named by its path below the source (`proj/a.jsonl`),
    and names come from users: each `/` and `\\` becomes `_`, and leading
    dots go, so no browser, unzip or `curl -J` reads a folder into it.
    """
    return name.replace("/", "_").replace("\\", "_").lstrip(".") or "session"


def live_fields(last_write: datetime | None) -> dict[str, Any]:
    """Return `analyze`'s live keywords for a session last written at `last_write`.

    {} when unknown; otherwise now and last_write in seconds since the epoch and
    settings.LIVE_GRACE, so unanswered tail calls are `pending_result` within it.
    """
    if last_write is None:
        return {}
    return {"now": time.time(), "last_write": last_write.timestamp(), "grace": settings.LIVE_GRACE}


def live_until(last_write: datetime | None) -> datetime | None:
    """Return when a session last written at `last_write` stops being live (None if unknown)."""
    return None if last_write is None else last_write + timedelta(seconds=settings.LIVE_GRACE)


@contextmanager
def open_analysis(
    revision: Revision,
    policy: str | Policy,
    *,
    last_write: datetime | None = None,
    format: str | None = None,
    summaries: bool = False,
    inline_bytes: int = 0,
    data: bytes | None = None,
) -> Iterator[Analysis]:
    """Yield the analysis of `revision`'s bytes under `policy` (KeyError if unknown).

    `policy` is a policy's name, as the session's workspace sees it, or the Policy.

    With `last_write` (when the session's source was last written) the
    session is checked for being live now: its unanswered tail calls are
    then `pending_result` while within the engine's grace period. `format`
    (a format id) overrides the session's sniffed format.

    The revision is read through a FileSource (`Revision.source`), so a JSON-lines
    session is never held whole; the source stays open inside the `with`. Its
    records keep no preview texts unless `summaries` (see `analyze`): enough
    for repairs, exports and downloads, not for showing rows or previews.
    A revision of at most `inline_bytes` bytes is instead read whole
    (`read_revision`) and analysed as bytes, the engine's quicker path for a
    small file: plain records, and the repair rendered at once (it holds
    about twice the file's size in memory); `data`, when given, is
    those bytes read already (`read_revision`, ahead of time). Raises
    OSError as `Revision.source` does.
    """
    session = revision.session
    known_format = session.format if session.format != "unknown" and not session.error else None
    options: dict[str, Any] = {"format": format or known_format, "summaries": summaries}
    options.update(live_fields(last_write))
    with revision_data(revision, inline_bytes, data) as read:
        if isinstance(policy, str):
            policy = policy_for(policy, session.workspace_id)
        yield analyze(read, session.name, policy, **options)


@contextmanager
def revision_data(
    revision: Revision, inline_bytes: int, data: bytes | None = None
) -> Iterator[bytes | FileSource]:
    """Yield `revision`'s bytes: whole (`read_revision`) up to `inline_bytes`, else its source.

    `data`, when given, is the bytes `read_revision` read already: they
    are yielded as they are. The source (`Revision.source`) stays open
    inside the `with`. Raises OSError as both do.
    """
    if data is not None:
        yield data
        return
    if revision.size <= inline_bytes:
        yield read_revision(revision)
        return
    with revision.source() as source:
        yield source


def read_revision(revision: Revision) -> bytes:
    """Return `revision`'s exact bytes, read whole into memory (one GET on S3).

    Raises BlobUnreadable when a blob is missing, not of the size recorded or
    does not hash to its name (each blob of a chain of appended deltas too,
    see `Revision.chunks`): a job never repairs damaged bytes. Raises OSError
    or botocore's UNREACHABLE errors when storage cannot be read.
    """
    if revision.appended_to_id is not None:
        return b"".join(revision.chunks())
    with open_blob(revision.sha256, revision.size, hashed=True) as f:
        data: bytes = f.read()
    if len(data) != revision.size:
        raise BlobUnreadable(
            f"the blob {blob_name(revision.sha256)} ended after {len(data)} bytes, "
            f"not the {revision.size} stored: it is damaged or truncated"
        )
    if hashlib.sha256(data).hexdigest() != revision.sha256:
        raise BlobUnreadable(damaged(blob_name(revision.sha256)))
    return data


class _Hashing:
    """A binary file that hashes (sha256) and counts what is written to it on its way to `out`."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | memoryview) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.out.write(data)


def store_repaired(analysis: Analysis, *, stored: str = "") -> tuple[str, int]:
    """Store the repaired file of `analysis` as a blob; return (sha256, size in bytes).

    An analysis of bytes holds its repair rendered already: that is hashed
    and stored. One of a FileSource streams its repair through a temporary
    file, hashed while it is written, never read back but to store it. A
    storage that overwrites a name (S3: `file_overwrite`) is not asked
    first whether the blob is there: a content-addressed name rewritten
    holds the same bytes, and the question is a request of its own. A
    repair that hashes to `stored` (the sha256 of a blob known to be in
    storage, such as the base just read) is not stored again.
    """
    if isinstance(analysis.raw, bytes):
        sha256, put = repaired_put(analysis.repaired, stored=stored)
        if put is not None:
            put()
        return sha256, len(analysis.repaired)
    overwrites = bool(getattr(default_storage, "file_overwrite", False))
    with tempfile.TemporaryFile() as f:
        hashing = _Hashing(f)
        analysis.write_repaired(hashing)  # type: ignore[arg-type]  # needs only write()
        sha256 = hashing.digest.hexdigest()
        name = blob_name(sha256)
        if sha256 != stored and (overwrites or not default_storage.exists(name)):
            f.seek(0)
            default_storage.save(name, BlobContent(f, sha256))
        return sha256, hashing.size


def repaired_put(data: bytes, *, stored: str = "") -> tuple[str, Callable[[], object] | None]:
    """Return the sha256 (hex) of the repaired bytes `data` and the call that stores them.

    The call is None when they need no storing: they hash to `stored`, or
    a storage that does not overwrite a name holds the blob already (that
    question is asked here). The call (one PUT on S3) uses the storage
    only, never the database, so another thread may make it.
    """
    sha256 = hashlib.sha256(data).hexdigest()
    name = blob_name(sha256)
    overwrites = bool(getattr(default_storage, "file_overwrite", False))
    if sha256 == stored or (not overwrites and default_storage.exists(name)):
        return sha256, None
    return sha256, functools.partial(default_storage.save, name, BlobContent.of(data, sha256))


# Heads.

# The session fields that follow from its head: every head writer refreshes exactly these.
HEAD_FIELDS = (
    "head",
    "format",
    "record_count",
    "fault_counts",
    "error",
    "analysed",
    "last_write",
    "live_until",
)


@dataclass(frozen=True)
class HeadState:
    """What a session's row says about its head's bytes: format, counts, error, last write.

    `fault_counts` is {fault kind id: count}; `last_write` is when the
    session's source was last written (None when unknown), which decides
    `live_until`. `analysed` False: the bytes are stored but not read yet
    (`unread`), so the format may be "unknown" and the counts are empty.
    """

    format: str
    record_count: int
    fault_counts: dict[str, int]
    error: str
    last_write: datetime | None
    analysed: bool = True

    @classmethod
    def of(cls, analysis: Analysis, last_write: datetime | None) -> HeadState:
        """Return the state of a head whose bytes `analysis` read, last written at `last_write`."""
        return cls(
            analysis.format,
            analysis.record_count,
            analysis.fault_counts,
            analysis.error or "",
            last_write,
        )

    @classmethod
    def unread(cls, format: str | None) -> HeadState:
        """Return the state of a head stored without reading it (a large upload), not live.

        `format` is the format the uploader named, if any ("unknown" else).
        """
        return cls(format or "unknown", 0, {}, "", None, analysed=False)

    @classmethod
    def counted(
        cls, session: Session, analysis: Analysis, record_count: int, fault_counts: dict[str, int]
    ) -> HeadState:
        """Return `session`'s state with new counts: a job's head, same last write.

        The format is the one `analysis` (of the job's base) read the session as:
        the session's own, or the one sniffed if no one had read it yet.
        """
        return cls(analysis.format, record_count, fault_counts, session.error, session.last_write)


@dataclass(frozen=True)
class HeadMove:
    """`revision` to become `session`'s head with `state`, if the head is still `fence`."""

    session: Session
    revision: Revision
    state: HeadState
    fence: Revision | None


def write_heads(moves: Sequence[HeadMove]) -> list[bool]:
    """Make each move's revision its session's head, if the head is still its fence.

    The one head writer: a compare-and-set in the caller's transaction, one
    UPDATE of HEAD_FIELDS per session conditional on its head (None: it has
    none yet) and on the session not being deleted, all sent at once
    (`update_rows`). Returns, per move, False when that head had moved
    (nothing written for it). The moved sessions' search entries go, in one
    statement (the search holds the old head's records until the new head's
    timeline is built); each `session` is updated in memory too.
    """
    if not moves:
        return []
    rows = []
    for move in moves:
        values = {
            "head": move.revision,
            "format": move.state.format,
            "record_count": move.state.record_count,
            "fault_counts": move.state.fault_counts,
            "error": move.state.error,
            "analysed": move.state.analysed,
            "last_write": move.state.last_write,
            "live_until": live_until(move.state.last_write),
        }
        assert tuple(values) == HEAD_FIELDS
        rows.append((values, {"id": move.session.pk, "head": move.fence, "deleted_at": None}))
    if update_rows(Session, rows) == len(moves):
        moved = [True] * len(moves)
    else:
        # Some head had moved: a moved session's head is now its move's new revision.
        heads = dict(
            Session.objects.filter(pk__in=[m.session.pk for m in moves]).values_list("pk", "head")
        )
        moved = [heads.get(m.session.pk) == m.revision.pk for m in moves]
    for (values, _), ok, move in zip(rows, moved, moves, strict=True):
        if ok:
            for name, value in values.items():
                setattr(move.session, name, value)
    search.drop_sessions([m.session.pk for m, ok in zip(moves, moved, strict=True) if ok])
    return moved


def count_unread(session_id: int, revision_id: int, analysis: Analysis) -> bool:
    """Write what `analysis` read on a session stored unread whose head is still `revision_id`.

    Its format, record count, fault counts and error, and `analysed` True;
    nothing when another reader or a new head came first (returns False).
    Derived from the stored bytes, as a timeline is: no audit row.
    """
    return bool(
        Session.objects.filter(pk=session_id, head=revision_id, analysed=False).update(
            format=analysis.format,
            record_count=analysis.record_count,
            fault_counts=analysis.fault_counts,
            error=analysis.error or "",
            analysed=True,
        )
    )


def update_rows(
    model: type[models.Model], rows: Sequence[tuple[dict[str, Any], dict[str, Any]]]
) -> int:
    """Update rows of `model`: per (values, keys), set `values` where the row has `keys`.

    Both map field names to values (a foreign key to its model instance, its
    pk or None); a key of None matches NULL. Rows of the same fields and
    NULL keys share one statement, sent for all of them at once (the
    driver's executemany: one round trip in PostgreSQL's pipeline mode), so
    a chunk's rows cost neither a query each nor bulk_update's CASE
    expressions. Returns how many rows were changed. Runs in the caller's
    transaction; values go through each field's own conversion for the
    database, as the ORM's would.
    """
    meta = model._meta
    quote = connection.ops.quote_name
    statements: dict[tuple[tuple[str, ...], tuple[tuple[str, bool], ...]], list[list[Any]]] = {}
    for values, keys in rows:
        shape = (tuple(values), tuple((name, value is None) for name, value in keys.items()))
        params = [_db_value(meta, name, value) for name, value in values.items()]
        params += [_db_value(meta, name, v) for name, v in keys.items() if v is not None]
        statements.setdefault(shape, []).append(params)
    changed = 0
    with connection.cursor() as cursor:
        for (names, keyed), params_list in statements.items():
            columns = ", ".join(f"{quote(_column(meta, name))} = %s" for name in names)
            where = " AND ".join(
                f"{quote(_column(meta, name))} {'IS NULL' if null else '= %s'}"
                for name, null in keyed
            )
            cursor.executemany(
                f"UPDATE {quote(meta.db_table)} SET {columns} WHERE {where}", params_list
            )
            changed += cursor.rowcount
    return changed


def _field(meta: Any, name: str) -> models.Field[Any, Any]:
    field = meta.get_field(name)
    assert isinstance(field, models.Field), name
    return field


def _column(meta: Any, name: str) -> str:
    column = _field(meta, name).column
    assert column is not None, name
    return column


def _db_value(meta: Any, name: str, value: Any) -> Any:
    """Return `value` of the field `name` as the database takes it (a model instance: its pk)."""
    field = _field(meta, name)
    if isinstance(value, models.Model):
        value = value.pk
    return field.get_db_prep_save(value, connection)


def write_head(
    session: Session, revision: Revision, state: HeadState, *, fence: Revision | None
) -> bool:
    """Write one head, as `write_heads` does; return False when the head was not `fence`."""
    return write_heads([HeadMove(session, revision, state, fence)])[0]
