"""Sessions: ingest (revision 0 of a new session) and delete."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import orjson
import structlog
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from transcripts import queue, search
from transcripts.actions.common import (
    UNFINISHED,
    EventType,
    HeadState,
    audit,
    count_unread,
    fit_name,
    live_fields,
    open_analysis,
    write_head,
)
from transcripts.core import jsontext
from transcripts.engine import DEFAULT_POLICY, ENGINE_VERSION, analyze
from transcripts.models import (
    ApiToken,
    AuditLog,
    AuditRecord,
    JobItem,
    Revision,
    Session,
    Timeline,
    Workspace,
    blob_name,
    store_blob,
)
from transcripts.queue import BrokerUnavailable
from transcripts.uploads import Staged, printable_name, store

logger = structlog.get_logger(__name__)


def subagent_of(name: str, head: bytes) -> str | None:
    """Return the session id a Claude Code subagent's file names as its parent, else None.

    `name` is the file's name and `head` its first bytes (up to the end of
    the first line; 64 KiB is plenty). Claude Code writes a subagent's
    transcript as `agent-<id>.jsonl`, each line carrying the `sessionId` of
    the session that started it, whose own file is `<sessionId>.jsonl`. An
    id no file can be named (a `/`, `.`, `..`, a lone surrogate) gives None.
    """
    if not name.startswith("agent-"):
        return None
    try:
        parent_id = jsontext.loads(head.split(b"\n", 1)[0]).get("sessionId")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    if not isinstance(parent_id, str) or "/" in parent_id or parent_id in ("", ".", ".."):
        return None
    if jsontext.has_lone(parent_id):
        return None  # no file is named so
    return parent_id


def _named_parent(name: str, data: bytes | Staged) -> str | None:
    """Return the parent session id an uploaded subagent file names (`subagent_of`), else None.

    Only a file named `agent-*` is read, its first 64 KiB (a staged file is
    read, not moved): the other files of an upload cost no read.
    """
    name = printable_name(name)
    if not name.startswith("agent-"):
        return None
    if isinstance(data, Staged):
        with data.path.open("rb") as f:
            return subagent_of(name, f.read(1 << 16))
    return subagent_of(name, data[: 1 << 16])


def _link_subagents(sessions: list[Session], parents: list[str | None]) -> None:
    """Make each Claude Code subagent session of `sessions` a child of its parent's session.

    `parents` holds the parent session id each names (`subagent_of`), in
    order. The parent is the session named `<id>.jsonl` among `sessions`,
    else the newest such session of the workspace. The caller holds the
    transaction. A parent uploaded after its subagents is not looked for.
    """
    by_name = {s.name: s for s in sessions}
    for session, parent_id in zip(sessions, parents, strict=True):
        if parent_id is None or session.format != "claude_code":
            continue
        wanted = f"{parent_id}.jsonl"
        parent = by_name.get(wanted) or (
            Session.objects.filter(workspace_id=session.workspace_id, name=wanted)
            .exclude(pk=session.pk)
            .order_by("-pk")
            .first()
        )
        # A subagent's parent is a Claude Code session that is no subagent itself (two
        # `agent-*` files naming each other would make a cycle).
        if (
            parent is not None
            and parent.pk != session.pk
            and parent.format == "claude_code"
            and not parent.name.startswith("agent-")
        ):
            Session.objects.filter(pk=session.pk).update(parent=parent)
            session.parent = parent


def create_session(
    workspace: Workspace,
    name: str,
    data: bytes | Staged,
    *,
    acting_user: Any,
    last_write: datetime | None = None,
    format: str | None = None,
    origin: str = Revision.Origin.UPLOAD,
    present: set[str] | None = None,
    **fields: Any,
) -> Session:
    """Store `data` as revision 0 of a new session; the caller holds the transaction.

    See `do_ingest_session`; `present` as for `store_blob`; `fields` are
    further Session fields (source, parent).
    """
    name = printable_name(name)
    name = fit_name(name, Session._meta.get_field("name").max_length or len(name))
    # Only the head's format and counts are kept: no previews (the timeline reads its own).
    read = {"format": format or None, "summaries": False, **live_fields(last_write)}
    state: HeadState
    if isinstance(data, Staged) and reads_later(data.size, last_write):
        # Stored now, read by a worker (queued below).
        state = HeadState.unread(format)
        sha256, size = store(data, present=present), data.size
    elif isinstance(data, Staged):
        # Read from its file and copied to storage a chunk at a time: never whole in memory.
        with data.source() as source:
            analysis = analyze(source, name, **read)
        state = HeadState.of(analysis, last_write)
        sha256, size = store(data, present=present), data.size
    else:
        analysis = analyze(data, name, **read)
        state = HeadState.of(analysis, last_write)
        sha256, size = store_blob(data, present=present), len(data)
    session = Session.objects.create(
        workspace=workspace, name=name, format=state.format, created_by=acting_user, **fields
    )
    raw = Revision.objects.create(
        session=session,
        number=0,
        sha256=sha256,
        size=size,
        engine_version=ENGINE_VERSION,
        origin=origin,
        created_by=acting_user,
    )
    write_head(session, raw, state, fence=None)
    if not state.analysed:
        try:
            queue.enqueue_on_commit(queue.COUNT_SESSION, session.pk)
        except BrokerUnavailable:
            # Stored all the same: the build its page asks for counts it too.
            logger.warning("count_not_queued", session=session.pk)
    sync_source = fields.get("source")
    AuditRecord.objects.create(
        source=sync_source,
        acting_user=acting_user,
        session=session,
        revision_to=raw,
        op=AuditRecord.Action.INGEST,
        engine_version=ENGINE_VERSION,
        note=f"{origin}: {size} bytes",
    )
    # A sync's session is the source's doing, on behalf of whoever added the source.
    audit(
        EventType.SESSION_INGESTED,
        workspace_id=workspace.pk,
        acting_user=None if sync_source is not None else acting_user,
        on_behalf_of=acting_user if sync_source is not None else None,
        session=session,
        source=sync_source,
        revision=raw,
        extra_data={"origin": origin, "size": size, "name": name},
    )
    return session


def reads_later(size: int, last_write: datetime | None) -> bool:
    """Return True when an upload of `size` bytes is stored first and read by a worker.

    So is an upload larger than settings.INGEST_INLINE_BYTES that is not live
    (`last_write` None): reading it whole would keep its first view waiting,
    while its page can show its first records at once (`timeline.preview`).
    A live session is read now: its pending calls depend on when it is read.
    """
    return last_write is None and size > settings.INGEST_INLINE_BYTES


def do_count_session(session_id: int) -> bool:
    """Read the head of session `session_id`, stored unread, and fill in what it says.

    Its format, record count, fault counts and error, as ingest would have
    found them (the default preset, the format named at upload if any, not
    live; the lean analysis, no previews), and `analysed` True. Returns
    False when there was nothing to do: read already (by this task run
    before, or by the build of its timeline), deleted, or a new head.
    Derived data: no audit row. Raises what storage raises.
    """
    session = Session.objects.select_related("head").filter(pk=session_id, analysed=False).first()
    if session is None or session.head is None:
        return False
    with open_analysis(session.head, DEFAULT_POLICY) as analysis:
        return count_unread(session.pk, session.head.pk, analysis)


def do_ingest_session(
    workspace: Workspace,
    name: str,
    data: bytes | Staged,
    *,
    acting_user: Any,
    last_write: datetime | None = None,
    format: str | None = None,
    api_token: ApiToken | None = None,
) -> Session:
    """Store `data` (any bytes, readable or not) as revision 0 of a new session.

    `data` is the bytes, or a `Staged` file (an upload), which is analysed
    and stored a chunk at a time. The bytes are kept exactly as given; an
    unreadable file becomes a session whose `error` says why (file, line,
    reason). The name loses its control and format characters (bidi
    overrides among them); one too long for the database is shortened with
    `fit_name`. An upload larger than settings.INGEST_INLINE_BYTES is not
    read here (`reads_later`): the session is stored with `analysed` False,
    format "unknown" (or `format`) and no counts, and is then
    read by a worker (`do_count_session`, queued on commit), or by the
    build of its default timeline if its page is opened first; with the
    broker down, only the latter.
    `last_write` is when the source
    file was last written, if known (a file read from disk; not an upload):
    within settings.LIVE_GRACE of it the session is live. `api_token` is the
    token of an upload through the API (its revision's origin is then "api").
    """
    return do_ingest_sessions(
        workspace,
        [(name, data)],
        acting_user=acting_user,
        last_write=last_write,
        format=format,
        api_token=api_token,
    )[0]


def do_ingest_sessions(
    workspace: Workspace,
    files: Iterable[tuple[str, bytes | Staged]],
    *,
    acting_user: Any,
    last_write: datetime | None = None,
    format: str | None = None,
    api_token: ApiToken | None = None,
) -> list[Session]:
    """Store each (name, bytes or staged file) of `files` as `do_ingest_session` does, all or none.

    One transaction holds every session; if anything fails, it rolls back and
    the blobs this call wrote that no revision uses are deleted, so a failed
    upload leaves nothing half-stored. Returns the sessions in the order of
    `files`; re-raises what failed.
    """
    files = list(files)
    parents = [_named_parent(name, data) for name, data in files]
    hashes = {
        data.sha256 if isinstance(data, Staged) else hashlib.sha256(data).hexdigest()
        for _, data in files
    }
    # Blobs that are not there yet are this call's to take back if it fails. One
    # `exists` (a HEAD) per content: what it found is not asked again.
    new = [sha256 for sha256 in hashes if not default_storage.exists(blob_name(sha256))]
    present = hashes - set(new)
    try:
        with transaction.atomic(durable=True):
            sessions = [
                create_session(
                    workspace,
                    name,
                    data,
                    acting_user=acting_user,
                    last_write=last_write,
                    format=format,
                    origin=Revision.Origin.API if api_token else Revision.Origin.UPLOAD,
                    present=present,
                    api_token=api_token,
                )
                for name, data in files
            ]
            _link_subagents(sessions, parents)
            return sessions
    except BaseException:
        _delete_unused_blobs(new)
        raise


def earlier_copies(sessions: Iterable[Session]) -> list[tuple[Session, Revision]]:
    """Return (session, earlier revision) for each of `sessions` whose bytes are stored already.

    The earlier revision is the oldest one of another session of the same
    workspace, not deleted, holding the same bytes (its sha256) as the
    session's revision 0: an earlier upload of the file, or a repair of it
    exported and uploaded again. One query; an index on `sha256` serves it.
    """
    sessions = [s for s in sessions if s.head is not None]
    if not sessions:
        return []
    earlier = (
        Revision.objects.filter(
            sha256__in={s.head.sha256 for s in sessions if s.head is not None},
            session__workspace__in={s.workspace_id for s in sessions},
            session__deleted_at__isnull=True,
        )
        .exclude(session__in=sessions)
        .select_related("session")
        .order_by("pk")
    )
    first: dict[tuple[int, str], Revision] = {}
    for revision in earlier:
        first.setdefault((revision.session.workspace_id, revision.sha256), revision)
    found = []
    for session in sessions:
        assert session.head is not None
        copy = first.get((session.workspace_id, session.head.sha256))
        if copy is not None:
            found.append((session, copy))
    return found


class CannotDelete(Exception):
    """A session cannot be deleted: a sync follows its file, or a job is working on it."""


def do_delete_sessions(sessions: Iterable[Session], *, acting_user: Any) -> int:
    """Delete `sessions` (an editor's act): hidden everywhere, audited, their blobs removed.

    The rows stay (audit records are append-only and name the session and
    its revisions); each session gets a `delete` audit record and loses its
    timelines; a blob goes once no revision of a session still there refers
    to it. Raises CannotDelete, deleting nothing, when a sync source follows
    one of the files (the next sync would bring it back) or an unfinished
    job holds one. Returns how many were deleted.
    """
    pks = [session.pk for session in sessions]
    now = timezone.now()
    with transaction.atomic(durable=True):
        locked = list(Session.objects.select_for_update().filter(pk__in=pks).order_by("pk"))
        for session in locked:
            if session.source_id is not None:
                raise CannotDelete(
                    f"{session.name} is synced from a folder: remove the file there, or turn "
                    "the source off, instead (the next sync would bring it back)."
                )
        busy = (
            JobItem.objects.filter(session__in=locked, status__in=UNFINISHED)
            .values_list("session__name", flat=True)
            .first()
        )
        if busy is not None:
            raise CannotDelete(f"{busy} is in a job still running: wait for it, or cancel it.")
        revisions = Revision.objects.filter(session__in=locked)
        shas = {sha for pair in revisions.values_list("sha256", "delta") for sha in pair if sha}
        Timeline.objects.filter(revision__session__in=locked).delete()
        for session in locked:
            search.drop_session(session.pk)
        Session.objects.filter(pk__in=[s.pk for s in locked]).update(deleted_at=now)
        AuditRecord.objects.bulk_create(
            AuditRecord(
                acting_user=acting_user,
                session=session,
                revision_from_id=session.head_id,
                op=AuditRecord.Action.DELETE,
                engine_version=ENGINE_VERSION,
                note=f"deleted by {acting_user}: {session.name}"
                + (f" (unreadable: {session.error[:200]})" if session.error else ""),
            )
            for session in locked
        )
        AuditLog.objects.bulk_create(
            AuditLog(
                event_type=EventType.SESSION_DELETED,
                workspace_id=session.workspace_id,
                acting_user=acting_user,
                session=session,
                revision_id=session.head_id,
                extra_data={"name": session.name},
            )
            for session in locked
        )
        transaction.on_commit(lambda: _delete_blobs_of_deleted(sorted(shas)))
    return len(locked)


def _delete_blobs_of_deleted(shas: list[str]) -> None:
    """Delete the blobs of `shas` that no revision of a session still there refers to."""
    kept = Revision.objects.filter(
        Q(sha256__in=shas) | Q(delta__in=shas), session__deleted_at__isnull=True
    ).values_list("sha256", "delta")
    used = {sha for pair in kept for sha in pair}
    for sha256 in set(shas) - used:
        default_storage.delete(blob_name(sha256))


def _delete_unused_blobs(shas: list[str]) -> None:
    """Delete the blobs of `shas` that no revision refers to (a failed write's leftovers).

    Best effort: when the database cannot tell (it may be what failed), the
    blobs stay, unreferenced but harmless.
    """
    try:
        used = set(Revision.objects.filter(sha256__in=shas).values_list("sha256", flat=True))
    except DatabaseError:
        return
    for sha256 in set(shas) - used:
        default_storage.delete(blob_name(sha256))
