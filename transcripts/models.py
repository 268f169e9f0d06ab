"""Thin models: workspaces, sessions and their immutable revisions, jobs and the audit trail.

Every query a view makes starts from a `for_user` helper, so another
workspace's rows are simply not found (a 404, never a 403).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import IO, Any

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from transcripts.blob_errors import BlobUnreadable as BlobUnreadable
from transcripts.blob_errors import damaged
from transcripts.core.model import INFORMATIONAL, FaultKind
from transcripts.core.policy import custom
from transcripts.fields import StorableJSONField, StorableTextField
from transcripts.formats.source import FileSource

# How much of the bytes an op removed the job page shows; the audit row keeps them all.
REMOVED_PREVIEW_BYTES = 80


# The core's fault kinds as Django choices, each labelled by its id (the id is what every
# page shows): the one list the models, the filters and the API offer.
# (django-stubs types only the class form of TextChoices, not this functional one.)
FaultKinds = models.TextChoices(  # type: ignore[call-overload]
    "FaultKinds", [(kind.name, (kind.value, kind.value)) for kind in FaultKind]
)


def blob_name(sha256: str) -> str:
    """Return the storage name of the blob whose content hashes to `sha256` (hex)."""
    return f"blobs/{sha256[:2]}/{sha256}"


class BlobContent(File[bytes]):
    """The content of the blob `sha256` (hex) to store: the file `file`, its hash alongside.

    An S3 storage sends the hash with a single PUT (x-amz-checksum-sha256),
    so the server refuses bytes that are not the blob's, and the client
    need not hash them again to sign or check them (transcripts.storage).
    """

    def __init__(self, file: IO[bytes], sha256: str, name: str | None = None) -> None:
        super().__init__(file, name=name)
        self.sha256 = sha256

    @classmethod
    def of(cls, data: bytes, sha256: str) -> BlobContent:
        """Return the content of the blob `sha256` whose bytes are `data`, held in memory."""
        return cls(io.BytesIO(data), sha256)


def store_blob(data: bytes, *, present: set[str] | None = None) -> str:
    """Store `data` content-addressed in the default storage; return its sha256 (hex).

    Storing the same bytes twice keeps one blob: the name is the hash, and
    the storage is asked (one `exists`: a HEAD on S3) whether it is there.
    `present`, when given, is what the caller already knows: the hashes
    stored, which this adds to; a hash outside it is stored without asking.
    """
    sha256 = hashlib.sha256(data).hexdigest()
    if blob_absent(sha256, present):
        default_storage.save(blob_name(sha256), BlobContent.of(data, sha256))
    return sha256


def blob_absent(sha256: str, present: set[str] | None) -> bool:
    """Return True when the blob `sha256` (hex) is to be stored; see `store_blob`'s `present`."""
    if present is None:
        return not default_storage.exists(blob_name(sha256))
    if sha256 in present:
        return False
    present.add(sha256)
    return True


BLOB_CHUNK = 1 << 20  # bytes per read or write when a blob is streamed


def store_blob_file(f: IO[bytes]) -> tuple[str, int]:
    """Store the seekable file `f`'s content as `store_blob` does, streamed: (sha256, size)."""
    f.seek(0)
    digest, size = hashlib.sha256(), 0
    while chunk := f.read(BLOB_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    sha256 = digest.hexdigest()
    name = blob_name(sha256)
    if not default_storage.exists(name):
        f.seek(0)
        default_storage.save(name, BlobContent(f, sha256))
    return sha256, size


class BlobStream:
    """The bytes of blobs opened in order, a BLOB_CHUNK at a time, each checked against its name.

    `blobs` are (sha256 hex, size) pairs, each opened when the stream reaches
    it (a response never read holds no file open). A blob is
    content-addressed, so its bytes, hashed while they stream, must give its
    name; the last chunk read is held back until the blob after it starts
    (the very last until its blob is checked), so a blob that does not match
    raises BlobUnreadable before the stream's last bytes go out: a download
    sent with its Content-Length then ends short, which the client reports,
    rather than complete with the wrong bytes.
    """

    def __init__(self, blobs: list[tuple[str, int]]) -> None:
        self.blobs = blobs

    def __iter__(self) -> Iterator[bytes]:
        held = None
        for sha256, size in self.blobs:
            digest = hashlib.sha256()
            with open_blob(sha256, size, hashed=True) as f:
                for chunk in _chunks_of(f):
                    digest.update(chunk)
                    if held is not None:
                        yield held
                    held = chunk
            if digest.hexdigest() != sha256:
                raise BlobUnreadable(damaged(blob_name(sha256)))
        if held is not None:
            yield held


def open_blob(sha256: str, size: int, *, hashed: bool = False) -> File[bytes]:
    """Open the blob `sha256` (hex) of `size` bytes for reading; return the open file.

    `hashed` says the caller hashes every byte it reads and refuses bytes
    that do not hash to `sha256`: the storage then need not check them too
    (S3: `S3BlobStorage.open_hashed`, no checksum validation of the GET).
    Raises BlobUnreadable when the storage has no such blob or holds another
    size of it (a truncated upload, a damaged copy), and botocore's
    UNREACHABLE errors (transcripts.storage) when S3 cannot be reached.
    """
    name = blob_name(sha256)
    open_hashed = getattr(default_storage, "open_hashed", None)
    try:
        f = open_hashed(name) if hashed and open_hashed else default_storage.open(name, "rb")
        stored = f.size  # S3: the first GET is made here
    except FileNotFoundError:
        raise BlobUnreadable(f"the blob {name} is missing from storage") from None
    if stored != size:
        f.close()
        raise BlobUnreadable(
            f"the blob {name} in storage holds {stored} bytes, not the {size} stored: "
            "it is damaged or truncated"
        )
    return f


def blob_chunks(sha256: str) -> Iterator[bytes]:
    """Yield the bytes of the blob `sha256` (hex) a MiB at a time."""
    with default_storage.open(blob_name(sha256), "rb") as f:
        yield from _chunks_of(f)


def _chunks_of(f: IO[bytes]) -> Iterator[bytes]:
    """Yield the rest of the open file `f` a BLOB_CHUNK at a time."""
    while chunk := f.read(BLOB_CHUNK):
        yield chunk


def checked_chunks(f: IO[bytes], sha256: str) -> Iterator[bytes]:
    """Yield the open blob `f` a BLOB_CHUNK at a time, checked against `sha256` (hex).

    Raises BlobUnreadable after the last chunk when the bytes do not hash to it.
    """
    digest = hashlib.sha256()
    for chunk in _chunks_of(f):
        digest.update(chunk)
        yield chunk
    if digest.hexdigest() != sha256:
        raise BlobUnreadable(damaged(blob_name(sha256)))


def roles_at_least(role: str) -> list[str]:
    """Return the membership roles that include `role`'s rights ("editor" -> editor, admin)."""
    order = list(Membership.Role.values)
    return order[order.index(role) :]


def member_filter(prefix: str, user: Any, role: str | None) -> dict[str, Any]:
    """Return filter arguments for rows whose workspace (at `prefix`) `user` holds `role` in.

    One filter() call, so the user and role conditions bind the same membership.
    """
    lookups: dict[str, Any] = {f"{prefix}memberships__user": user}
    if role is not None:
        lookups[f"{prefix}memberships__role__in"] = roles_at_least(role)
    return lookups


class WorkspaceQuerySet(models.QuerySet["Workspace"]):
    def for_user(self, user: Any, role: str | None = None) -> WorkspaceQuerySet:
        """Return the workspaces `user` is a member of (with at least `role`, if given)."""
        return self.filter(**member_filter("", user, role))


class Workspace(models.Model):
    name = models.CharField(max_length=100, unique=True)
    created = models.DateTimeField(auto_now_add=True)

    objects = WorkspaceQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A user's role in a workspace; each role has the rights of those before it.

    viewer: read sessions, jobs and the audit trail, download and export;
    editor: also upload, repair, run and roll back jobs;
    admin: also sync sources, members and API tokens.
    """

    class Role(models.TextChoices):
        VIEWER = "viewer"
        EDITOR = "editor"
        ADMIN = "admin"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="memberships")
    workspace = models.ForeignKey(Workspace, models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.VIEWER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "workspace"], name="one_membership_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} ({self.role})"

    @classmethod
    def has_role(cls, user: Any, workspace_id: int, role: str) -> bool:
        """Return True if `user` holds at least `role` in the workspace `workspace_id`."""
        return cls.objects.filter(
            user=user, workspace_id=workspace_id, role__in=roles_at_least(role)
        ).exists()


def hash_token(token: str) -> str:
    """Return the sha256 (hex) of an API token: all that is stored of its secret."""
    return hashlib.sha256(token.encode()).hexdigest()


class Invitation(models.Model):
    """A link that makes whoever opens it, logged in, and accepts it a member of a workspace.

    A workspace admin makes one for a role; its secret is shown to them once
    and only its sha256 (`hash_token`) is kept. It works once, until
    `expires`, unless revoked; nobody becomes a member without accepting.
    """

    workspace = models.ForeignKey(Workspace, models.CASCADE, related_name="invitations")
    role = models.CharField(max_length=20, choices=Membership.Role.choices)
    hashed_key = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created = models.DateTimeField(default=timezone.now)
    expires = models.DateTimeField()
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    accepted_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"invitation {self.pk} to {self.workspace} ({self.role})"

    def is_open(self) -> bool:
        """Return True while the invitation can be accepted: not used, revoked or expired."""
        return (
            self.accepted_at is None and self.revoked_at is None and self.expires > timezone.now()
        )


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def for_user(self, user: Any) -> ApiTokenQuerySet:
        """Return the tokens of the workspaces of `user`."""
        return self.filter(workspace__memberships__user=user)

    def active(self) -> ApiTokenQuerySet:
        """Return the tokens not revoked."""
        return self.filter(revoked_at__isnull=True)

    def authenticate(self, token: str) -> ApiToken | None:
        """Return the active token whose secret is `token`, or None.

        The visible prefix finds the row; the hashes are then compared in
        constant time, so the lookup tells nothing about the secret.
        """
        prefix = token[: ApiToken.PREFIX_LENGTH]
        if len(token) != ApiToken.TOKEN_LENGTH or not prefix.startswith(ApiToken.PREFIX_MARK):
            return None
        found = self.active().select_related("workspace", "created_by").filter(prefix=prefix)
        candidate = found.first()
        if candidate is None or not hmac.compare_digest(candidate.hashed_key, hash_token(token)):
            return None
        return candidate


class ApiToken(models.Model):
    """A workspace's API token: named, with a visible prefix; only the secret's hash is kept.

    A request with the token acts as its workspace, in the name of the user
    who created it. A revoked token is kept (it names what it created) but
    no longer authenticates.
    """

    PREFIX_MARK = "pfx_"
    # "pfx_" + 8 characters: unique, shown in lists; the rest is the secret.
    PREFIX_LENGTH = len(PREFIX_MARK) + 8
    SECRET_BYTES = 32
    TOKEN_LENGTH = PREFIX_LENGTH + 1 + 43  # "_" and 32 bytes of URL-safe base64

    workspace = models.ForeignKey(Workspace, models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=PREFIX_LENGTH, unique=True)
    hashed_key = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…) in {self.workspace}"

    @classmethod
    def generate(cls) -> str:
        """Return a new random token: the prefix mark, 8 characters, "_", 43 secret characters."""
        return (
            cls.PREFIX_MARK + secrets.token_hex(4) + "_" + secrets.token_urlsafe(cls.SECRET_BYTES)
        )

    @property
    def is_active(self) -> bool:
        """Return True while the token has not been revoked."""
        return self.revoked_at is None


class SessionQuerySet(models.QuerySet["Session"]):
    def for_user(self, user: Any, role: str | None = None) -> SessionQuerySet:
        """Return the sessions in the workspaces of `user` (with at least `role`, if given)."""
        return self.filter(**member_filter("workspace__", user, role))

    def with_fault(self, kind: str) -> SessionQuerySet:
        """Return the sessions whose head revision has at least one fault of `kind`."""
        return self.filter(fault_counts__has_key=kind)


class SessionManager(models.Manager["Session"]):
    """The sessions not deleted: what every page, job and API call works on."""

    def get_queryset(self) -> SessionQuerySet:
        return SessionQuerySet(self.model, using=self._db).filter(deleted_at__isnull=True)

    def for_user(self, user: Any, role: str | None = None) -> SessionQuerySet:
        """Return the sessions in the workspaces of `user` (with at least `role`, if given)."""
        return self.get_queryset().for_user(user, role)

    def with_fault(self, kind: str) -> SessionQuerySet:
        """Return the sessions whose head revision has at least one fault of `kind`."""
        return self.get_queryset().with_fault(kind)


class Session(models.Model):
    """One uploaded transcript; `head` is its current revision."""

    workspace = models.ForeignKey(Workspace, models.CASCADE, related_name="sessions")
    name = models.CharField(max_length=255, help_text="The uploaded file name.")
    format = models.CharField(max_length=40)
    record_count = models.PositiveIntegerField(default=0)
    # Denormalised from the head revision's analysis so the list needs no parsing.
    fault_counts = models.JSONField(default=dict)
    error = StorableTextField(blank=True, help_text="Why the file could not be read.")
    # A large upload is stored before it is read: a worker then fills in its format,
    # counts and error (`actions.sessions.do_count_session`, or its timeline's build).
    analysed = models.BooleanField(
        default=True,
        help_text=(
            "False while a worker has yet to read the head: format, counts and error unknown."
        ),
    )
    head = models.ForeignKey("Revision", models.PROTECT, null=True, blank=True, related_name="+")
    # Known only for files read from disk (their modification time); a browser
    # upload carries none. A session written to within the engine's grace period
    # is live: its unanswered tail calls are `pending_result`, not orphans.
    last_write = models.DateTimeField(
        null=True, blank=True, help_text="When the source file was last written, if known."
    )
    # last_write + the grace period (settings.LIVE_GRACE): indexed, so "live now" is a
    # range query and the sessions whose grace just ran out are found without a scan.
    live_until = models.DateTimeField(null=True, blank=True, db_index=True)
    source = models.ForeignKey(
        "SyncSource",
        models.SET_NULL,
        null=True,
        blank=True,
        related_name="sessions",
        help_text="The sync source the session's file is read from, if any.",
    )
    parent = models.ForeignKey(
        "self",
        models.SET_NULL,
        null=True,
        blank=True,
        related_name="subagents",
        help_text="For a Claude Code subagent's session: the session that started it.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    api_token = models.ForeignKey(
        "ApiToken",
        models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The API token the session was uploaded with, if any.",
    )
    created = models.DateTimeField(auto_now_add=True)
    # Set when an editor deletes the session: its rows stay for the audit trail (which
    # never loses a record), its blobs go, and no page, list, job or API shows it.
    deleted_at = models.DateTimeField(null=True, blank=True)

    objects = SessionManager()
    with_deleted = SessionQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        # The session list's orders, each ending in the key so a page is an index range.
        indexes = [
            models.Index(fields=["created", "id"], name="session_created"),
            models.Index(fields=["name", "id"], name="session_name"),
            models.Index(fields=["record_count", "id"], name="session_records"),
            models.Index(fields=["last_write", "id"], name="session_last_write"),
            models.Index(fields=["format", "created", "id"], name="session_format"),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("transcripts:session_detail", args=[self.pk])

    @property
    def fault_total(self) -> int:
        """Return the number of faults in the head revision."""
        return sum(self.fault_counts.values())

    def is_live(self, now: datetime | None = None) -> bool:
        """Return True while the session's source was written within the grace period."""
        return self.live_until is not None and self.live_until > (now or timezone.now())


def read_blob(sha256: str) -> bytes:
    """Return the bytes of the blob `sha256` (hex)."""
    with default_storage.open(blob_name(sha256), "rb") as f:
        data: bytes = f.read()
    return data


class Revision(models.Model):
    """Immutable bytes of a session: number 0 is the upload, each repair adds one.

    The content lives in storage under its sha256 (`blob_name`), so identical
    bytes are stored once and a revision can never be rewritten in place. A
    revision made by appending records to another may instead store only the
    appended bytes (`delta`, a blob) on top of `appended_to`, at most
    MAX_CHAIN deltas deep: an agent streaming records one call at a time
    then costs storage in proportion to what it sends, not to the session's
    size times the number of calls. `sha256` and `size` are always those of
    the whole content.
    """

    MAX_CHAIN = 32

    session = models.ForeignKey(Session, models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()
    policy = models.CharField(max_length=40, blank=True)
    engine_version = models.CharField(max_length=20)

    class Origin(models.TextChoices):
        UPLOAD = "upload", "uploaded on the web"
        API = "api", "uploaded or appended to through the API"
        SYNC = "sync", "read from a synced folder, or appended to by its sync"
        REWRITE = "rewrite", "a synced file that changed before its old end"
        REPAIR = "repair", "written by a repair"
        ROLLBACK = "rollback", "written by a rollback"

    origin = models.CharField(
        max_length=20, blank=True, choices=Origin.choices, help_text="What made it."
    )
    parent = models.ForeignKey("self", models.PROTECT, null=True, blank=True, related_name="+")
    appended_to = models.ForeignKey("self", models.PROTECT, null=True, blank=True, related_name="+")
    delta = models.CharField(
        max_length=64, blank=True, help_text="sha256 of the blob appended to `appended_to`."
    )
    chain = models.PositiveSmallIntegerField(default=0, help_text="Deltas to read for the bytes.")
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
        # An upload looks for earlier copies of its bytes (`actions.earlier_copies`).
        indexes = [models.Index(fields=["sha256"], name="revision_sha256")]

    def __str__(self) -> str:
        return f"{self.session} r{self.number}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ValueError("revisions are immutable")
        super().save(*args, **kwargs)

    def read(self) -> bytes:
        """Return the exact bytes of this revision (one query per delta of its chain)."""
        deltas = []
        revision = self
        while revision.appended_to_id is not None:
            deltas.append(read_blob(revision.delta))
            revision = Revision.objects.only("sha256", "delta", "appended_to").get(
                pk=revision.appended_to_id
            )
        return read_blob(revision.sha256) + b"".join(reversed(deltas))

    def chunks(self) -> BlobStream:
        """Check this revision's blobs now; return its exact bytes as a BlobStream, checked.

        Each blob (the base, then each delta) must have the size its revision
        records; raises BlobUnreadable before any byte is read when one is
        missing or of another size, so a response is not begun on a blob that
        cannot be sent whole. The stream raises BlobUnreadable before its
        last chunk if a blob's bytes do not hash to its name.
        """
        parts = []  # (sha256, size) of each blob, the last delta first
        revision = self
        while revision.appended_to_id is not None:
            base = Revision.objects.only("sha256", "delta", "appended_to", "size").get(
                pk=revision.appended_to_id
            )
            parts.append((revision.delta, revision.size - base.size))
            revision = base
        parts.append((revision.sha256, revision.size))
        parts.reverse()
        for sha256, size in parts:
            # Checked now, before a response is begun; read again as the stream reaches it.
            open_blob(sha256, size).close()
        return BlobStream(parts)

    @contextmanager
    def source(self) -> Iterator[FileSource]:
        """Yield this revision's bytes as a FileSource, read by range, never whole in memory.

        The blob as the storage opens it, where that is an operating system
        file (local storage, its size checked); otherwise (object storage, or a
        chain of appended deltas) the bytes streamed into an unlinked temporary
        file of this host's, gone when the source closes, and checked against
        their hash on the way. Raises OSError when storage cannot be read
        (BlobUnreadable: a blob missing, of another size or, streamed, damaged).
        """
        source = None
        if self.appended_to_id is None:
            # Hashed: a stream from object storage is only read through checked_chunks.
            with open_blob(self.sha256, self.size, hashed=True) as blob:
                try:
                    source = FileSource.of_file(blob)
                except (OSError, AttributeError):  # a stream from object storage: no descriptor
                    source = FileSource.spooled(checked_chunks(blob, self.sha256))
        if source is None:
            source = FileSource.spooled(self.chunks())
        with source:
            yield source

    def storage_fields(self) -> dict[str, Any]:
        """Return the fields that say where this revision's bytes are, to share them."""
        return {
            "sha256": self.sha256,
            "size": self.size,
            "appended_to": self.appended_to,
            "delta": self.delta,
            "chain": self.chain,
        }


class JobQuerySet(models.QuerySet["Job"]):
    def for_user(self, user: Any, role: str | None = None) -> JobQuerySet:
        """Return the jobs in the workspaces of `user` (with at least `role`, if given)."""
        return self.filter(**member_filter("workspace__", user, role))


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
    api_token = models.ForeignKey(
        "ApiToken",
        models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The API token the job was started with, if any.",
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
    selection = StorableJSONField(
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
    # Counted as each item is processed, before its chunk is written: what the
    # progress bar shows between two chunk writes.
    processed = models.PositiveIntegerField(
        default=0, help_text="Items processed so far, written or not yet."
    )
    archive = models.CharField(
        max_length=255, blank=True, help_text="Storage name of an export's zip archive."
    )
    # Set when a chunk stops on an outage (`runner.note_outage`), cleared as soon as
    # the job progresses again: what the page says while the bar stands still.
    waiting_for = models.CharField(
        max_length=40, blank=True, help_text="The service a chunk of the job waits for."
    )
    waiting_error = StorableTextField(blank=True, help_text="The error that service gave.")
    retry_at = models.DateTimeField(
        null=True, blank=True, help_text="When the waiting chunk is retried."
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

    @property
    def progress(self) -> int:
        """Return how many items are processed: finished, or done and waiting for their chunk."""
        return max(self.finished_items, min(self.processed, self.total))

    def rate(self, now: datetime | None = None) -> float | None:
        """Return the items processed per second since the job started, None before any."""
        seconds = self.elapsed(now)
        if not seconds or seconds < 0 or not self.progress:
            return None
        return self.progress / seconds

    def seconds_left(self, now: datetime | None = None) -> float | None:
        """Return the estimated seconds until every item is processed, at the current rate.

        None once every item is processed (what is left, such as an export's
        archive, is not paced by items) and when the job is finished.
        """
        rate = self.rate(now)
        if rate is None or self.is_finished or self.progress >= self.total:
            return None
        return (self.total - self.progress) / rate


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
    # Set once the item is counted into its job's `processed`: a chunk redelivered after
    # its worker died does not count it again.
    counted = models.BooleanField(default=False)
    revision = models.ForeignKey(Revision, models.PROTECT, null=True, blank=True, related_name="+")
    op_count = models.PositiveIntegerField(default=0)
    # {op kind: count} of the plan, for the dry run's summary.
    op_counts = models.JSONField(default=dict, blank=True)
    # An export's repaired bytes (a blob) and the ops applied, for the manifest.
    sha256_after = models.CharField(max_length=64, blank=True)
    ops = StorableJSONField(default=list, blank=True)
    diff = StorableTextField(blank=True, help_text="A dry run's unified diff, cut short.")
    error = StorableTextField(blank=True)
    unreadable = models.BooleanField(
        default=False,
        help_text="Failed because the session's stored file is missing or damaged: "
        "a retry cannot succeed.",
    )

    class Meta:
        ordering = ["job", "id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "session"], name="one_item_per_session")
        ]
        indexes = [models.Index(fields=["job", "status"], name="item_job_status")]

    def __str__(self) -> str:
        return f"{self.job} / {self.session}: {self.status}"


class AuditRecordQuerySet(models.QuerySet["AuditRecord"]):
    def for_user(self, user: Any, role: str | None = None) -> AuditRecordQuerySet:
        """Return the audit records of sessions in `user`'s workspaces (at least `role`)."""
        return self.filter(**member_filter("session__workspace__", user, role))

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
        RENAME_ID = "rename_id", "rename id"
        SPLIT_AFTER_CALL = "split_after_call", "split after call"
        SPLIT_REPLY = "split_reply", "split reply"
        DROP_CONTENT = "drop_content", "drop content"
        RELINK = "relink"
        ROLLBACK = "rollback"
        APPEND = "append"
        REWRITE = "rewrite"
        RENAME = "rename"
        DELETE = "delete"
        WRITE_BACK = "write_back", "write back"

    job = models.ForeignKey(Job, models.PROTECT, null=True, blank=True, related_name="audit")
    source = models.ForeignKey(
        "SyncSource",
        models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The sync source whose sync made the change (its creator acted).",
    )
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
    fault_kind = models.CharField(max_length=40, blank=True, choices=FaultKinds.choices)
    # Any length: an id is whatever the transcript holds (see transcripts.fields).
    tool_call_id = StorableTextField(blank=True)
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
    note = StorableTextField(
        blank=True, help_text="What a sync or write-back did: paths, sizes, the backup's name."
    )
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
        "source",
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
        "note",
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
            "source": self.source_id,
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
            "note": self.note,
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


class AuditLogQuerySet(models.QuerySet["AuditLog"]):
    def for_user(self, user: Any, role: str | None = None) -> AuditLogQuerySet:
        """Return the events of `user`'s workspaces (those they hold at least `role` in)."""
        return self.filter(**member_filter("workspace__", user, role))

    def update(self, **kwargs: Any) -> int:
        raise ValueError("audit records are append-only")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise ValueError("audit records are append-only")


class AuditLog(models.Model):
    """Append-only: one row per state change of anything in a workspace (zulip's RealmAuditLog).

    Every `do_*` action writes one in its own transaction: the session
    changes (whose ops keep their detail in AuditRecord), and memberships,
    invitations, API tokens, policies, sync sources and jobs. `acting_user`
    is None for a change no person made at that moment (a sync, a job's
    worker): then `source` or `job` names what made it and `on_behalf_of`
    the user who set that up. `extra_data` holds what the event type needs
    beyond its targets (a role before and after, a token's name, counts).
    """

    class EventType(models.TextChoices):
        WORKSPACE_CREATED = "workspace_created"
        MEMBER_ADDED = "member_added"
        MEMBER_ROLE_CHANGED = "member_role_changed"
        MEMBER_REMOVED = "member_removed"
        INVITATION_CREATED = "invitation_created"
        INVITATION_ACCEPTED = "invitation_accepted"
        INVITATION_REVOKED = "invitation_revoked"
        TOKEN_CREATED = "token_created"
        TOKEN_REVOKED = "token_revoked"
        POLICY_CREATED = "policy_created"
        POLICY_CHANGED = "policy_changed"
        POLICY_DELETED = "policy_deleted"
        FOLDER_GRANTED = "folder_granted"
        SOURCE_ADDED = "source_added"
        SOURCE_CHANGED = "source_changed"
        SOURCE_WRITE_BACK_ON = "source_write_back_on", "source switched to write-back"
        SOURCE_SYNC_QUEUED = "source_sync_queued"
        SESSION_INGESTED = "session_ingested"
        SESSION_DELETED = "session_deleted"
        SESSION_APPENDED = "session_appended"
        SESSION_REWRITTEN = "session_rewritten"
        SESSION_RENAMED = "session_renamed"
        SESSION_FILE_GONE = "session_file_gone"
        SESSION_REPAIRED = "session_repaired"
        SESSION_ROLLED_BACK = "session_rolled_back"
        SESSION_WRITTEN_BACK = "session_written_back"
        JOB_CREATED = "job_created"
        JOB_STARTED = "job_started"
        JOB_FINISHED = "job_finished"
        JOB_CANCELLED = "job_cancelled"
        JOB_RETRIED = "job_retried"

    workspace = models.ForeignKey(Workspace, models.PROTECT, related_name="audit_log")
    session = models.ForeignKey(Session, models.PROTECT, null=True, blank=True, related_name="+")
    job = models.ForeignKey(Job, models.PROTECT, null=True, blank=True, related_name="+")
    source = models.ForeignKey(
        "SyncSource", models.SET_NULL, null=True, blank=True, related_name="+"
    )
    revision = models.ForeignKey(Revision, models.PROTECT, null=True, blank=True, related_name="+")
    acting_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    on_behalf_of = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Who set up the sync source or job that made the change.",
    )
    event_type = models.CharField(max_length=40, choices=EventType.choices)
    extra_data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = AuditLogQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["workspace", "event_type"], name="auditlog_workspace_event"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} in {self.workspace_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ValueError("audit records are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise ValueError("audit records are append-only")

    @property
    def details(self) -> list[tuple[str, Any]]:
        """Return `extra_data` as (key, value) pairs, for templates (a key may be "items")."""
        return list(self.extra_data.items())

    # The columns of an event export, in order.
    EXPORT_FIELDS = (
        "id",
        "created_at",
        "workspace",
        "event_type",
        "acting_user",
        "on_behalf_of",
        "session",
        "job",
        "source",
        "revision",
        "extra_data",
    )

    def export_row(self) -> dict[str, Any]:
        """Return the event as {EXPORT_FIELDS name: JSON-ready value}.

        Users are given by username, the revision by number. Expects both
        users and `revision` selected with it.
        """
        return {
            "id": self.pk,
            "created_at": self.created_at.isoformat(),
            "workspace": self.workspace_id,
            "event_type": self.event_type,
            "acting_user": self.acting_user.get_username() if self.acting_user else None,
            "on_behalf_of": self.on_behalf_of.get_username() if self.on_behalf_of else None,
            "session": self.session_id,
            "job": self.job_id,
            "source": self.source_id,
            "revision": self.revision.number if self.revision else None,
            "extra_data": self.extra_data,
        }


class Timeline(models.Model):
    """The side-by-side rows of one revision as one view shows them, computed once.

    A view is the policy, the format the bytes are read as ("" for the
    session's own) and whether the session was live (its unanswered tail calls
    `pending_result`). Revisions never change, so neither does a built
    timeline: the session page reads a window of its rows and never parses the
    file again. A worker claims the build with a conditional UPDATE (`claim`,
    `claimed_at`); a claim older than the lease may be taken over.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        BUILDING = "building"
        READY = "ready"
        FAILED = "failed"

    revision = models.ForeignKey(Revision, models.CASCADE, related_name="timelines")
    policy = models.CharField(max_length=40)
    read_as = models.CharField(max_length=40, blank=True)
    live = models.BooleanField(default=False)
    engine_version = models.CharField(max_length=20)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    claim = models.UUIDField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    # What the analysis found, for the page's summary line and fault legend.
    format = models.CharField(max_length=40, blank=True)
    format_label = models.CharField(max_length=100, blank=True)
    provider = models.CharField(max_length=40, blank=True)
    record_count = models.PositiveIntegerField(default=0)
    row_count = models.PositiveIntegerField(default=0)
    fault_counts = models.JSONField(default=dict, blank=True)
    op_count = models.PositiveIntegerField(default=0)
    # What the last compaction hid (see transcripts.core.compaction): its record,
    # how many records are not sent, and the faults they would have; {} if none.
    compaction = StorableJSONField(default=dict, blank=True)
    # The provider's verdict on the revision as it is ("raw") and repaired under the
    # policy ("repaired"): see transcripts.verdict.Verdict.as_dict; {} if unreadable.
    verdict = StorableJSONField(default=dict, blank=True)
    # How far a build has got (BUILD_STAGES of transcripts.timeline): 0 before it starts.
    stage = models.PositiveSmallIntegerField(default=0)
    error = StorableTextField(blank=True, help_text="Why the file could not be read.")
    created_at = models.DateTimeField(auto_now_add=True)
    used_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["revision", "policy", "read_as", "live", "engine_version"],
                name="one_timeline_per_view",
            )
        ]

    def __str__(self) -> str:
        return f"{self.revision} under {self.policy} ({self.status})"

    @property
    def fault_total(self) -> int:
        """Return the number of faults found, informational ones included."""
        return sum(self.fault_counts.values())

    @property
    def noted_total(self) -> int:
        """Return how many of the faults are informational (an earlier repair's result)."""
        return sum(n for kind, n in self.fault_counts.items() if kind in INFORMATIONAL)

    @property
    def problem_total(self) -> int:
        """Return the number of faults found that are not informational."""
        return self.fault_total - self.noted_total


class TimelineRow(models.Model):
    """One aligned row of a timeline: a raw record on the left, its repaired form on the right.

    `position` orders the rows (repaired file order, dropped and moved-away
    records at their raw place). `record` is the raw record index shown (None
    for a synthetic result), `start`/`end` its byte span in the revision, so
    showing the row reads those bytes only. `data` holds the cells, faults and
    ops (see `transcripts.timeline`); `text` is what the search looks in.
    """

    timeline = models.ForeignKey(Timeline, models.CASCADE, related_name="rows")
    position = models.PositiveIntegerField()
    status = models.CharField(max_length=20)
    record = models.PositiveIntegerField(null=True, blank=True)
    raw = models.BooleanField(default=True, help_text="The raw side holds the record.")
    start = models.PositiveBigIntegerField(null=True, blank=True)
    end = models.PositiveBigIntegerField(null=True, blank=True)
    faulty = models.BooleanField(default=False)
    tool = models.BooleanField(default=False)
    # JSON text, decoded by the reader: nothing ever queries inside it.
    data = models.TextField()
    text = models.TextField(blank=True)

    class Meta:
        ordering = ["timeline", "position"]
        constraints = [
            models.UniqueConstraint(fields=["timeline", "position"], name="one_row_per_position")
        ]
        indexes = [
            models.Index(fields=["timeline", "record"], name="row_record"),
            # Partial: a boolean filter compiles to a bare column, which only an
            # index on that condition serves (the next fault, the fault panel).
            models.Index(
                fields=["timeline", "position"], condition=Q(faulty=True), name="row_faulty"
            ),
            models.Index(fields=["timeline", "position"], condition=Q(tool=True), name="row_tool"),
        ]

    def __str__(self) -> str:
        return f"{self.timeline} row {self.position}"


class SyncGrant(models.Model):
    """A folder under settings.SYNC_ROOTS whose folders one workspace's admins may follow.

    Granted by a site admin (the Django admin's workspace page) or by whoever
    runs `manage.py sync --add` on the server. A workspace with no grant can
    follow nothing; every followed folder belongs to one workspace only.
    """

    workspace = models.ForeignKey(Workspace, models.CASCADE, related_name="sync_grants")
    path = models.TextField(help_text="An absolute folder under one of SYNC_ROOTS.")
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["workspace", "path"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "path"], name="one_grant_per_folder")
        ]

    def __str__(self) -> str:
        return f"{self.path} for {self.workspace}"


class SyncSourceQuerySet(models.QuerySet["SyncSource"]):
    def for_user(self, user: Any, role: str | None = None) -> SyncSourceQuerySet:
        """Return the sync sources of the workspaces of `user` (with at least `role`, if given)."""
        return self.filter(**member_filter("workspace__", user, role))


class SyncSource(models.Model):
    """A folder whose session files Pairfix follows: each file is one session.

    `path` is absolute and lies under one of settings.SYNC_ROOTS. A sync
    claims the source with a conditional UPDATE on `claim`/`claimed_at`, so
    the beat schedule and `manage.py sync` never read one folder twice at once.
    """

    class Format(models.TextChoices):
        ANY = "", "any supported file"
        CLAUDE_CODE = "claude_code", "Claude Code projects folder"
        CODEX = "codex", "Codex sessions folder"
        OPENCLAW = "openclaw", "OpenClaw / pi sessions folder"

    workspace = models.ForeignKey(Workspace, models.CASCADE, related_name="sources")
    name = models.CharField(max_length=100)
    path = models.TextField()
    format = models.CharField(max_length=40, blank=True, choices=Format.choices)
    write_back = models.BooleanField(
        default=False,
        help_text="Replace a file with its repair (keeping a backup beside it).",
    )
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    claim = models.UUIDField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    last_sync = models.DateTimeField(null=True, blank=True)
    last_error = StorableTextField(blank=True)
    file_count = models.PositiveIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0)

    objects = SyncSourceQuerySet.as_manager()

    class Meta:
        ordering = ["workspace", "name"]
        constraints = [
            # Across workspaces: a folder is one workspace's (see sync.do_create_source).
            models.UniqueConstraint(fields=["path"], name="one_source_per_folder")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.path})"

    def get_absolute_url(self) -> str:
        return reverse("transcripts:source_detail", args=[self.pk])


class SyncedFile(models.Model):
    """What the last sync saw of one file of a source, and the session it feeds.

    `size`, `mtime_ns`, `inode` and `device` are the file's stat as last seen
    (a file whose stat is unchanged is not read). `offset` is how many bytes
    are in the session: a JSONL file's partial last line waits beyond it.
    `head_hash` and `tail_hash` are sha256 (hex) of the first and the last
    FINGERPRINT_BYTES before `offset`; growth whose fingerprints still match is
    an append, anything else a rewrite. `revision` is the session revision
    that mirrors the file's first `offset` bytes.
    """

    FINGERPRINT_BYTES = 4096

    source = models.ForeignKey(SyncSource, models.CASCADE, related_name="files")
    path = models.TextField(help_text="Relative to the source's folder.")
    session = models.OneToOneField(Session, models.CASCADE, related_name="synced_file")
    size = models.PositiveBigIntegerField(default=0)
    mtime_ns = models.BigIntegerField(default=0)
    inode = models.BigIntegerField(default=0)
    device = models.BigIntegerField(default=0)
    offset = models.PositiveBigIntegerField(default=0)
    head_hash = models.CharField(max_length=64, blank=True)
    tail_hash = models.CharField(max_length=64, blank=True)
    revision = models.ForeignKey(Revision, models.PROTECT, null=True, blank=True, related_name="+")
    error = StorableTextField(blank=True, help_text="Why the last sync could not read the file.")
    missing_since = models.DateTimeField(
        null=True, blank=True, help_text="When a sync first found the file gone."
    )
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["source", "path"]
        constraints = [models.UniqueConstraint(fields=["source", "path"], name="one_file_per_path")]

    def __str__(self) -> str:
        return f"{self.source.name}: {self.path}"

    @property
    def waiting(self) -> int:
        """Return how many bytes of the file, as last seen, lie beyond `offset`: a partial line."""
        return max(0, self.size - self.offset)


class WorkspacePolicy(models.Model):
    """A workspace's own policy: a table fault kind -> action, plus the synthetic text.

    `actions` is {fault kind id: action id}; kinds not listed are flagged. An
    empty `synthetic_text` means the agent's own interruption text in an
    agent's session file and the generic receipt in a plain message list.
    Offered beside the presets wherever the workspace's sessions are repaired.
    """

    workspace = models.ForeignKey(Workspace, models.CASCADE, related_name="policies")
    name = models.SlugField(max_length=40)
    actions = models.JSONField(default=dict)
    synthetic_text = models.TextField(blank=True)
    description = models.CharField(max_length=200, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "name"], name="one_policy_name_per_workspace"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.workspace})"

    def as_policy(self) -> Any:
        """Return the core Policy this row describes (ValueError when a row is refused)."""
        return custom(self.name, self.actions, self.synthetic_text or None, self.description)
