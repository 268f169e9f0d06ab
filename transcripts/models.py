"""Thin models: workspaces, sessions and their immutable revisions, jobs and the audit trail.

Every query a view makes starts from a `for_user` helper, so another
workspace's rows are simply not found (a 404, never a 403).
"""

from __future__ import annotations

import base64
import hashlib
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import models
from django.urls import reverse
from django.utils import timezone

# How much of the bytes an op removed the job page shows; the audit row keeps them all.
REMOVED_PREVIEW_BYTES = 80


def blob_name(sha256: str) -> str:
    """Return the storage name of the blob whose content hashes to `sha256` (hex)."""
    return f"blobs/{sha256[:2]}/{sha256}"


def store_blob(data: bytes) -> str:
    """Store `data` content-addressed in the default storage; return its sha256 (hex).

    Storing the same bytes twice keeps one blob: the name is the hash.
    """
    return save_blob(data)[0]


def save_blob(data: bytes) -> tuple[str, bool]:
    """Store `data` as `store_blob` does; return its sha256 and whether this call wrote it."""
    sha256 = hashlib.sha256(data).hexdigest()
    name = blob_name(sha256)
    if default_storage.exists(name):
        return sha256, False
    default_storage.save(name, ContentFile(data))
    return sha256, True


class WorkspaceQuerySet(models.QuerySet["Workspace"]):
    def for_user(self, user: Any) -> WorkspaceQuerySet:
        """Return the workspaces `user` is a member of."""
        return self.filter(memberships__user=user)


class Workspace(models.Model):
    name = models.CharField(max_length=100, unique=True)
    created = models.DateTimeField(auto_now_add=True)

    objects = WorkspaceQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        MEMBER = "member"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="memberships")
    workspace = models.ForeignKey(Workspace, models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "workspace"], name="one_membership_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} ({self.role})"


class SessionQuerySet(models.QuerySet["Session"]):
    def for_user(self, user: Any) -> SessionQuerySet:
        """Return the sessions in the workspaces of `user`."""
        return self.filter(workspace__memberships__user=user)

    def with_fault(self, kind: str) -> SessionQuerySet:
        """Return the sessions whose head revision has at least one fault of `kind`."""
        return self.filter(fault_counts__has_key=kind)


class Session(models.Model):
    """One uploaded transcript; `head` is its current revision."""

    workspace = models.ForeignKey(Workspace, models.CASCADE, related_name="sessions")
    name = models.CharField(max_length=255, help_text="The uploaded file name.")
    format = models.CharField(max_length=40)
    record_count = models.PositiveIntegerField(default=0)
    # Denormalised from the head revision's analysis so the list needs no parsing.
    fault_counts = models.JSONField(default=dict)
    error = models.TextField(blank=True, help_text="Why the file could not be read.")
    head = models.ForeignKey("Revision", models.PROTECT, null=True, blank=True, related_name="+")
    # Known only for files read from disk (their modification time); a browser
    # upload carries none. A session written to within the engine's grace period
    # is live: its unanswered tail calls are `pending_result`, not orphans.
    last_write = models.DateTimeField(
        null=True, blank=True, help_text="When the source file was last written, if known."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)

    objects = SessionQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("transcripts:session_detail", args=[self.pk])

    @property
    def fault_total(self) -> int:
        """Return the number of faults in the head revision."""
        return sum(self.fault_counts.values())


class Revision(models.Model):
    """Immutable bytes of a session: number 0 is the upload, each repair adds one.

    The content lives in storage under its sha256 (`blob_name`), so identical
    bytes are stored once and a revision can never be rewritten in place.
    """

    session = models.ForeignKey(Session, models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()
    policy = models.CharField(max_length=40, blank=True)
    engine_version = models.CharField(max_length=20)
    parent = models.ForeignKey("self", models.PROTECT, null=True, blank=True, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "number"]
        constraints = [
            # Two repairs racing from the same head cannot both write number n+1.
            models.UniqueConstraint(fields=["session", "number"], name="one_revision_number")
        ]

    def __str__(self) -> str:
        return f"{self.session} r{self.number}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ValueError("revisions are immutable")
        super().save(*args, **kwargs)

    def read(self) -> bytes:
        """Return the exact bytes of this revision."""
        with default_storage.open(blob_name(self.sha256), "rb") as f:
            return f.read()


class JobQuerySet(models.QuerySet["Job"]):
    def for_user(self, user: Any) -> JobQuerySet:
        """Return the jobs in the workspaces of `user`."""
        return self.filter(workspace__memberships__user=user)


class Job(models.Model):
    """A bulk operation on some sessions of one workspace; progress counters live in the row.

    A repair writes a revision per changed session; a dry run plans the same
    repair and writes nothing to the sessions; a rollback makes each session's
    revision before `source_job` its head again; an export builds a zip archive
    of the repaired files with a manifest.
    """

    class Kind(models.TextChoices):
        REPAIR = "repair"
        DRY_RUN = "dry_run", "dry run"
        ROLLBACK = "rollback"
        EXPORT = "export"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        CANCELLED = "cancelled"

    workspace = models.ForeignKey(Workspace, models.CASCADE, related_name="jobs")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.REPAIR)
    policy = models.CharField(max_length=40)
    force = models.BooleanField(
        default=False, help_text="Repair sessions with pending results too (treated as missing)."
    )
    source_job = models.ForeignKey(
        "self",
        models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="The job a rollback undoes, or the dry run a repair follows.",
    )
    selection = models.JSONField(
        default=dict, blank=True, help_text="The filter the sessions were chosen by, if any."
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(
        default=0, help_text="Items repaired, rolled back, exported or left unchanged."
    )
    failed = models.PositiveIntegerField(default=0, help_text="Items that could not be repaired.")
    fence_lost = models.PositiveIntegerField(
        default=0, help_text="Items skipped because their session changed under the job."
    )
    pending = models.PositiveIntegerField(
        default=0, help_text="Items skipped because their session has pending results."
    )
    cancelled = models.PositiveIntegerField(default=0, help_text="Items the job never got to.")
    archive = models.CharField(
        max_length=255, blank=True, help_text="Storage name of an export's zip archive."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.kind}, {self.policy}, {self.status})"

    def get_absolute_url(self) -> str:
        return reverse("transcripts:job_detail", args=[self.pk])

    @property
    def finished_items(self) -> int:
        """Return how many items are finished: done, failed, skipped or cancelled."""
        return self.done + self.failed + self.fence_lost + self.pending + self.cancelled

    @property
    def is_finished(self) -> bool:
        """Return True once the job is done or cancelled."""
        return self.status in (self.Status.DONE, self.Status.CANCELLED)

    @property
    def writes(self) -> bool:
        """Return True for the kinds of job that write revisions: repair and rollback."""
        return self.kind in (self.Kind.REPAIR, self.Kind.ROLLBACK)

    def elapsed(self, now: datetime | None = None) -> float | None:
        """Return the seconds from the job's start to its end (or `now`); None before it starts."""
        if self.started_at is None:
            return None
        end = self.finished_at or now or timezone.now()
        return (end - self.started_at).total_seconds()

    def rate(self, now: datetime | None = None) -> float | None:
        """Return the items finished per second since the job started, None before any."""
        seconds = self.elapsed(now)
        if not seconds or seconds < 0 or not self.finished_items:
            return None
        return self.finished_items / seconds

    def seconds_left(self, now: datetime | None = None) -> float | None:
        """Return the estimated seconds until every item is finished, at the current rate."""
        rate = self.rate(now)
        if rate is None or self.is_finished:
            return None
        return (self.total - self.finished_items) / rate


class JobItem(models.Model):
    """One session of a job.

    A worker claims the queued items of a chunk with a conditional UPDATE
    that sets `claim` (a token of its own) and `claimed_at`; a claim older
    than the lease may be taken over (its worker died). The item is finished
    by another conditional UPDATE, on the same token, in the transaction that
    writes its result, so exactly one worker's result counts. `base` is the session's head when the
    job was created: the fence. A job writes only while the head is still `base`.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        REPAIRED = "repaired"
        WOULD_REPAIR = "would_repair", "would repair"
        ROLLED_BACK = "rolled_back", "rolled back"
        EXPORTED = "exported"
        UNCHANGED = "unchanged"
        FENCE_LOST = "fence_lost", "skipped: fence lost"
        PENDING = "pending", "skipped: pending results"
        FAILED = "failed"
        CANCELLED = "cancelled"

    job = models.ForeignKey(Job, models.CASCADE, related_name="items")
    session = models.ForeignKey(Session, models.CASCADE, related_name="job_items")
    base = models.ForeignKey(Revision, models.PROTECT, related_name="+")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    claim = models.UUIDField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    revision = models.ForeignKey(Revision, models.PROTECT, null=True, blank=True, related_name="+")
    op_count = models.PositiveIntegerField(default=0)
    # {op kind: count} of the plan, for the dry run's summary.
    op_counts = models.JSONField(default=dict, blank=True)
    # An export's repaired bytes (a blob) and the ops applied, for the manifest.
    sha256_after = models.CharField(max_length=64, blank=True)
    ops = models.JSONField(default=list, blank=True)
    diff = models.TextField(blank=True, help_text="A dry run's unified diff, cut short.")
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["job", "id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "session"], name="one_item_per_session")
        ]
        indexes = [models.Index(fields=["job", "status"], name="item_job_status")]

    def __str__(self) -> str:
        return f"{self.job} / {self.session}: {self.status}"


class AuditRecordQuerySet(models.QuerySet["AuditRecord"]):
    def for_user(self, user: Any) -> AuditRecordQuerySet:
        """Return the audit records of sessions in the workspaces of `user`."""
        return self.filter(session__workspace__memberships__user=user)

    def update(self, **kwargs: Any) -> int:
        raise ValueError("audit records are append-only")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise ValueError("audit records are append-only")


class AuditRecord(models.Model):
    """Append-only: one row per change to a session (an ingest, one op of a repair, a rollback).

    Neither the model nor its queryset can update or delete a row; the admin
    shows them read-only.

    For an op that removes or moves part of a record, `span_start`/`span_end`
    are the byte offsets of that record in `revision_from` and `removed_bytes`
    its bytes, so nothing a repair drops is lost.
    """

    class Action(models.TextChoices):
        INGEST = "ingest"
        INSERT_RESULT = "insert_result"
        DROP_RESULT = "drop_result"
        MOVE_RESULT = "move_result"
        DROP_CALL = "drop_call"
        DROP_RECORD = "drop_record"
        RESULTS_FIRST = "results_first"
        ROLLBACK = "rollback"

    job = models.ForeignKey(Job, models.PROTECT, null=True, blank=True, related_name="audit")
    acting_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    session = models.ForeignKey(Session, models.PROTECT, related_name="audit")
    revision_from = models.ForeignKey(
        Revision, models.PROTECT, null=True, blank=True, related_name="+"
    )
    revision_to = models.ForeignKey(
        Revision, models.PROTECT, null=True, blank=True, related_name="+"
    )
    op = models.CharField(max_length=20, choices=Action.choices)
    fault_kind = models.CharField(max_length=40, blank=True)
    tool_call_id = models.CharField(max_length=255, blank=True)
    record = models.IntegerField(null=True, blank=True, help_text="Raw record index (0-based).")
    block = models.IntegerField(null=True, blank=True)
    anchor = models.IntegerField(
        null=True, blank=True, help_text="Record after which an inserted or moved result goes."
    )
    target = models.IntegerField(
        null=True, blank=True, help_text="Record an inserted or moved result goes into."
    )
    policy = models.CharField(max_length=40, blank=True)
    policy_row = models.CharField(max_length=200, blank=True)
    engine_version = models.CharField(max_length=20, blank=True)
    span_start = models.PositiveBigIntegerField(null=True, blank=True)
    span_end = models.PositiveBigIntegerField(null=True, blank=True)
    removed_bytes = models.BinaryField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AuditRecordQuerySet.as_manager()

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.op} {self.tool_call_id or ''} on {self.session}".strip()

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ValueError("audit records are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise ValueError("audit records are append-only")

    # The columns of an audit export, in order.
    EXPORT_FIELDS = (
        "id",
        "created_at",
        "job",
        "acting_user",
        "workspace",
        "session",
        "session_name",
        "revision_from",
        "revision_to",
        "op",
        "fault_kind",
        "tool_call_id",
        "record",
        "block",
        "anchor",
        "target",
        "span_start",
        "span_end",
        "policy",
        "policy_row",
        "engine_version",
        "removed_size",
        "removed_bytes_base64",
    )

    def export_row(self) -> dict[str, Any]:
        """Return the record as {EXPORT_FIELDS name: JSON-ready value}.

        Revisions are given by number, the acting user by username, removed
        bytes as base64 (None when the op removed nothing). Expects `job`,
        `acting_user`, `session` and both revisions selected with it.
        """
        removed = None if self.removed_bytes is None else bytes(self.removed_bytes)
        return {
            "id": self.pk,
            "created_at": self.created_at.isoformat(),
            "job": self.job_id,
            "acting_user": self.acting_user.get_username() if self.acting_user else None,
            "workspace": self.session.workspace_id,
            "session": self.session_id,
            "session_name": self.session.name,
            "revision_from": self.revision_from.number if self.revision_from else None,
            "revision_to": self.revision_to.number if self.revision_to else None,
            "op": self.op,
            "fault_kind": self.fault_kind,
            "tool_call_id": self.tool_call_id,
            "record": self.record,
            "block": self.block,
            "anchor": self.anchor,
            "target": self.target,
            "span_start": self.span_start,
            "span_end": self.span_end,
            "policy": self.policy,
            "policy_row": self.policy_row,
            "engine_version": self.engine_version,
            "removed_size": None if removed is None else len(removed),
            "removed_bytes_base64": None if removed is None else base64.b64encode(removed).decode(),
        }

    @property
    def position(self) -> str:
        """Return where the op acted, in raw record indexes (as the timeline numbers them).

        "record 7" for a drop, "record 12 → after record 7" for a move,
        "after record 7" for an insert (whose `record` is the call's record).
        """
        if self.target is not None:
            where = f"into record {self.target}"
        elif self.anchor is not None:
            where = f"after record {self.anchor}"
        else:
            where = ""
        if self.op == self.Action.INSERT_RESULT:
            return where
        parts = [] if self.record is None else [f"record {self.record}"]
        if where:
            parts.append(where)
        return " → ".join(parts)

    @property
    def removed_preview(self) -> str:
        """Return the start of `removed_bytes` as one line of text, "" if nothing was removed.

        Bytes that are not UTF-8 and characters that do not print (newlines,
        control and bidi characters) come out as backslash escapes; "…" marks a cut.
        """
        if self.removed_bytes is None:
            return ""
        data = bytes(self.removed_bytes)
        text = data[:REMOVED_PREVIEW_BYTES].decode("utf-8", "backslashreplace")
        text = "".join(
            c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
        )
        return text + ("…" if len(data) > REMOVED_PREVIEW_BYTES else "")
