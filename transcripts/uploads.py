"""What one upload may hold, and how its files become sessions staged on disk.

Every way in (the upload form, the API, `manage.py ingest`) goes through
the same `Limits` (settings `UPLOAD_MAX_FILE_SIZE`, `UPLOAD_MAX_TOTAL_SIZE`,
`UPLOAD_MAX_FILES`), enforced while the bytes arrive, and nothing holds a
session whole in memory:

- `LimitUploadHandler` counts the files and bytes of a request as they are
  received and drops, unstored, what passes a limit; `StagingUploadHandler`
  writes each file to a temporary file (in `FILE_UPLOAD_TEMP_DIR`), hashing
  it on the way.
- `Unpacker` turns each file into `Staged` sessions: a plain file as it is,
  a `.gz`'s or a `.zip`'s content decompressed a chunk at a time into a
  temporary file of its own, within the limits after decompression (so a
  decompression bomb is stopped one byte past a limit). Any failure to read
  an archive is an `UploadRefused` with a message.
- `StagingFile` writes bytes that come from elsewhere (a synced file, a
  revision and the records appended to it) to a staged file, hashing them.
- `store` copies a staged session into the blob storage, a chunk at a time.

Any refusal refuses the whole upload.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
import time
import unicodedata
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from django.conf import settings
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import (
    FileUploadHandler,
    SkipFile,
    StopUpload,
    TemporaryFileUploadHandler,
)
from django.http import HttpRequest
from django.http.multipartparser import MultiPartParser

from transcripts.formats.source import FileSource
from transcripts.models import BlobContent, blob_absent, blob_name
from transcripts.sizes import binary_size

# Inside a zip: folders and the resource forks macOS adds are not sessions.
_ZIP_SKIPPED = ("__MACOSX/",)
_TAR_SUFFIXES = (".tar.gz", ".tgz", ".tar")
CHUNK = 1 << 20  # bytes per read and write while staging (1 MiB)


class UploadRefused(Exception):
    """The upload breaks a limit or holds an unreadable archive; the message says which."""


class LimitPassed(UploadRefused):
    """The upload breaks a limit: a file's size, the total size or the number of files."""


def printable_name(name: str, default: str = "session") -> str:
    """Return `name` NFC normalised, with printable characters only and no surrounding spaces.

    Drops control and format characters: bidi overrides (which make
    `gnp.exe` read as `exe.png`), zero-width characters, NUL. `default`
    replaces a name left empty.
    """
    name = "".join(c for c in unicodedata.normalize("NFC", name) if c.isprintable()).strip()
    return name or default


def clean_name(name: str, default: str = "session") -> str:
    """Return `name` as a safe file name: its last path component, `printable_name`d.

    Folders (`/` or `\\`) are dropped; `default` replaces a name left
    empty, `.` or `..`.
    """
    name = printable_name(name.replace("\\", "/").rsplit("/", 1)[-1], default)
    return default if name in (".", "..") else name


def shown_name(name: str) -> str:
    """Return `name` with each character that does not print spelt as [U+XXXX], for messages."""
    return "".join(c if c.isprintable() else f"[U+{ord(c):04X}]" for c in name)


def unusable_name(name: str) -> str | None:
    """Return why `name` cannot name a session (nothing left once cleaned), or None if it can."""
    if clean_name(name, default="") not in ("", ".", ".."):
        return None
    return (
        f"“{shown_name(name)}” is not a usable file name: once folders, invisible and "
        "control characters are taken out, nothing (or only “.” or “..”) is left. "
        "Rename the file and upload it again."
    )


@dataclass
class Limits:
    """The most one upload may hold: bytes of one session, bytes in all, sessions in all."""

    file_size: int
    total_size: int
    files: int

    @classmethod
    def from_settings(cls) -> Limits:
        """Return the limits the settings set."""
        return cls(
            file_size=settings.UPLOAD_MAX_FILE_SIZE,
            total_size=settings.UPLOAD_MAX_TOTAL_SIZE,
            files=settings.UPLOAD_MAX_FILES,
        )

    def describe(self) -> str:
        """Return the limits as a sentence for the upload form's help text."""
        return (
            f"Up to {self.files} sessions of at most {binary_size(self.file_size)} each, "
            f"{binary_size(self.total_size)} in all (after decompression)."
        )

    def too_many(self, what: str = "files") -> str:
        """Return the message that refuses an upload of more than `files` files (or sessions)."""
        return (
            f"This upload holds more than {self.files} {what}; "
            f"one upload may hold at most {self.files}."
        )


def is_archive(name: str) -> bool:
    """Return True when `name` says the file is a `.gz` or `.zip` to unpack."""
    return name.lower().endswith((".gz", ".zip"))


@dataclass
class Staged:
    """One session's bytes in a local file: `size` bytes whose sha256 (hex) is `sha256`."""

    name: str
    path: Path
    size: int
    sha256: str

    def source(self) -> FileSource:
        """Return the staged bytes as a FileSource (close it after use)."""
        return FileSource(self.path)


def store(staged: Staged, *, present: set[str] | None = None) -> str:
    """Put `staged` into the blob storage (once per content); return its sha256.

    Local storage moves the staged file into place when it can (Django's
    `file_move_safe`: a rename on the same file system), so the file is not
    there afterwards; object storage is sent it a chunk at a time, in parts
    of settings.STORAGE_MULTIPART_BYTES. `present` is as for
    `models.store_blob`. Raises OSError when the storage fails.
    """
    if blob_absent(staged.sha256, present):
        name = blob_name(staged.sha256)
        with staged.path.open("rb") as f:
            default_storage.save(name, _StagedFile(f, staged.path, staged.sha256, name))
    return staged.sha256


class _StagedFile(BlobContent):
    """A staged file as storage takes it: with its path, so a local storage moves it."""

    def __init__(self, file: IO[bytes], path: Path, sha256: str, name: str) -> None:
        super().__init__(file, sha256, name=name)
        self.path = path

    def temporary_file_path(self) -> str:
        """Return the staged file's path (what FileSystemStorage moves instead of copying)."""
        return str(self.path)


# A staged file older than this is a leftover of a process killed mid-copy (kill -9,
# the OOM killer, a worker's hard time limit): no sync or upload stages for so long.
STAGED_MAX_AGE = 6 * 3600  # seconds


def sweep_staged(now: float | None = None) -> int:
    """Delete this host's staged files older than STAGED_MAX_AGE; return how many.

    Only Pairfix's own (`staged-*` in `staging_dir()`); a file that goes
    meanwhile is skipped. The sync and job sweeps of the beat schedule run it
    on the host that runs them.
    """
    cutoff = (time.time() if now is None else now) - STAGED_MAX_AGE
    removed = 0
    for path in staging_dir().glob("staged-*"):
        try:
            if path.is_file() and path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed


def staging_dir() -> Path:
    """Return the folder staged files are written to (FILE_UPLOAD_TEMP_DIR), made if missing."""
    path = Path(settings.FILE_UPLOAD_TEMP_DIR or tempfile.gettempdir())
    path.mkdir(parents=True, exist_ok=True)
    return path


class StagingFile:
    """A session's bytes written to a new staged file a chunk at a time, hashed on the way.

    `write` adds bytes at the end. With `lines`, what the session holds is
    the bytes up to and with the last newline written (a partial last line
    is not part of it): only those are hashed, and `finish` cuts the file
    there. Bytes after the last newline of a chunk are hashed when a later
    chunk's newline completes their line, read back from the staged file,
    so memory holds a chunk at most. Use as a context manager, or call
    `close`: it deletes the staged file if `store` has not moved it into the
    blob storage. Raises OSError when the staging folder cannot be written.
    """

    def __init__(self, name: str, *, lines: bool = False) -> None:
        self.name = name
        self.lines = lines
        fd, temporary = tempfile.mkstemp(dir=staging_dir(), prefix="staged-")
        self._fd = fd
        self.path = Path(temporary)
        self.written = 0  # bytes written to the staged file
        self.counted = 0  # of which part of the session (and hashed)
        self.last = b""  # the last byte written, b"" before the first
        self._digest = hashlib.sha256()

    def read(self, size: int, offset: int = 0) -> bytes:
        """Return `size` bytes written at `offset` (fewer at the end); before `finish`."""
        return os.pread(self._fd, size, offset)

    def write(self, chunk: bytes) -> None:
        """Add `chunk` at the end of the staged file."""
        if not chunk:
            return
        start = self.written
        view = memoryview(chunk)
        while view:
            view = view[os.write(self._fd, view) :]
        self.written += len(chunk)
        self.last = chunk[-1:]
        cut = chunk.rfind(b"\n") + 1 if self.lines else len(chunk)
        if not cut:
            return
        # The partial line that earlier chunks ended with is complete now: hash it too.
        for at in range(self.counted, start, CHUNK):
            self._digest.update(os.pread(self._fd, min(CHUNK, start - at), at))
        self._digest.update(memoryview(chunk)[:cut])
        self.counted = start + cut

    def finish(self) -> Staged:
        """Close the staged file, cut after its last newline with `lines`; return it as Staged."""
        if self.counted < self.written:
            os.ftruncate(self._fd, self.counted)
        os.close(self._fd)
        self._fd = -1
        return Staged(self.name, self.path, self.counted, self._digest.hexdigest())

    def close(self) -> None:
        """Close and delete the staged file, unless storage moved it (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> StagingFile:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


@contextmanager
def _reading(what: str) -> Iterator[None]:
    """Turn any failure to read an archive into an UploadRefused saying `what` is not valid.

    Python's zip, gzip, bzip2 and LZMA readers raise many kinds of error on
    bad input (BadZipFile, zlib.error, EOFError, OSError, LZMAError,
    UnicodeDecodeError for a member name that is not UTF-8, ValueError,
    struct.error, NotImplementedError for an unknown method...): all of them
    mean the same to the person uploading.
    """
    try:
        yield
    except UploadRefused:
        raise
    except UnicodeDecodeError:
        raise UploadRefused(f"{what}: a file name in it is not valid UTF-8.") from None
    except Exception as exc:  # noqa: BLE001 - any error of the stdlib readers, see above
        reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        reason = reason.rstrip(".") or type(exc).__name__
        raise UploadRefused(f"{what}: {reason}.") from None


@dataclass
class Unpacker:
    """Stage the sessions of one upload, file by file, within `limits`.

    `add` raises UploadRefused as soon as a limit is passed or an archive
    cannot be read; `sessions` holds the staged sessions in upload order.
    Use as a context manager, or call `close`: it deletes the files it wrote.
    """

    limits: Limits
    sessions: list[Staged] = field(default_factory=list)
    total: int = 0
    _written: list[Path] = field(default_factory=list)

    def add(self, name: str, stream: IO[bytes], *, unpack: bool = True) -> None:
        """Add the sessions of one file: the file, or with `unpack` a .gz's or .zip's content.

        A file Django staged (`StagingUploadHandler`) is used where it is,
        not copied; any other stream is copied to a staged file.
        """
        lower = name.lower()
        if unpack and lower.endswith(_TAR_SUFFIXES):
            raise UploadRefused(
                f"“{name}” is a tar archive: upload a .zip, a .gz of one session, "
                "or the session files themselves."
            )
        if unpack and lower.endswith(".zip"):
            self._add_zip(name, stream)
        elif unpack and lower.endswith(".gz"):
            inner = clean_name(name[: -len(".gz")])
            what = f"“{name}” is not a valid gzip file"
            with _reading(what):
                content = gzip.GzipFile(fileobj=stream, mode="rb")
            with content:
                self._stage(
                    inner, content, source=f"“{name}”", verb="decompresses to", reading=what
                )
        elif isinstance(stream, UploadedFile) and hasattr(stream, "sha256"):
            self._count(1)
            if stream.size is None or stream.size > self.limits.file_size:
                raise self._too_big(f"“{name}”", "is")
            path = Path(stream.temporary_file_path())  # type: ignore[attr-defined]
            self._accept(Staged(name, path, stream.size, stream.sha256))
        else:
            self._stage(name, stream, source=f"“{name}”")

    def _add_zip(self, name: str, stream: IO[bytes]) -> None:
        what = f"“{name}” is not a valid zip archive"
        with _reading(what):
            archive = zipfile.ZipFile(stream)
        with archive:
            members = [
                info
                for info in archive.infolist()
                if not info.is_dir() and not info.filename.startswith(_ZIP_SKIPPED)
            ]
            if not members:
                raise UploadRefused(f"“{name}” holds no files.")
            self._count(len(members), "sessions")
            for info in members:
                member = f"“{shown_name(info.filename)}” in “{name}”"
                if info.flag_bits & 0x1:
                    raise UploadRefused(
                        f"{member} is encrypted: encrypted archives are not accepted."
                    )
                # The declared size is checked first; reading stops at the limit anyway.
                if info.file_size > self.limits.file_size:
                    raise self._too_big(member, "decompresses to")
                with _reading(what):
                    content = archive.open(info)
                with content:
                    self._stage(
                        clean_name(info.filename),
                        content,
                        source=member,
                        verb="decompresses to",
                        counted=True,
                        reading=what,
                    )

    def _stage(
        self,
        name: str,
        content: IO[bytes] | gzip.GzipFile,
        *,
        source: str,
        verb: str = "is",
        counted: bool = False,
        reading: str | None = None,
    ) -> None:
        """Copy `content` to a staged file, hashing it, stopping one byte past the size limit.

        Reads of `content` that fail are an UploadRefused saying `reading`
        (an archive's failures); a failure to write the staged file is an
        OSError, as any storage failure.
        """
        if not counted:
            self._count(1)
        digest = hashlib.sha256()
        size = 0
        fd, temporary = tempfile.mkstemp(dir=staging_dir(), prefix="staged-")
        path = Path(temporary)
        self._written.append(path)
        with os.fdopen(fd, "wb") as out:
            while True:
                want = min(CHUNK, self.limits.file_size + 1 - size)
                if reading is None:
                    chunk = content.read(want)
                else:
                    with _reading(reading):
                        chunk = content.read(want)
                if not chunk:
                    break
                size += len(chunk)
                if size > self.limits.file_size:
                    raise self._too_big(source, verb)
                self._check_total(size)
                digest.update(chunk)
                out.write(chunk)
        self._accept(Staged(name, path, size, digest.hexdigest()))

    def _accept(self, staged: Staged) -> None:
        self.total += staged.size
        self._check_total(0)
        self.sessions.append(staged)

    def _check_total(self, more: int) -> None:
        if self.total + more > self.limits.total_size:
            raise LimitPassed(
                f"This upload holds more than {binary_size(self.limits.total_size)} of sessions "
                f"(after decompression); one upload may hold at most "
                f"{binary_size(self.limits.total_size)}."
            )

    def _count(self, more: int, what: str = "files") -> None:
        if len(self.sessions) + more > self.limits.files:
            raise LimitPassed(self.limits.too_many(what))

    def _too_big(self, what: str, verb: str) -> LimitPassed:
        return LimitPassed(
            f"{what} {verb} more than {binary_size(self.limits.file_size)}; "
            f"each session may be at most {binary_size(self.limits.file_size)}."
        )

    def close(self) -> None:
        """Delete the staged files this unpacker wrote (not those Django staged)."""
        for path in self._written:
            path.unlink(missing_ok=True)
        self._written.clear()

    def __enter__(self) -> Unpacker:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


class LimitUploadHandler(FileUploadHandler):
    """Skip, without storing them, the files of an upload past the limits; keep why in `refused`.

    Put first in `request.upload_handlers`. A plain file may be
    `limits.file_size` bytes, an archive (which may hold many sessions, when
    `archives` says they are unpacked) `limits.total_size`; all files
    together `limits.total_size`, and at most `limits.files` files: the
    first file past that count stops the upload (the rest of the body is
    read and dropped). A file whose name is unusable (`unusable_name`) is
    skipped with the reason, as are files past a size limit.
    """

    def __init__(self, request: Any, limits: Limits, *, archives: bool = True) -> None:
        super().__init__(request)
        self.limits = limits
        self.archives = archives
        self.refused: list[str] = []
        self.unusable: list[str] = []  # the names refused, not the sizes or counts
        self.count = 0
        self.total = 0
        self.limit = 0

    def new_file(self, field_name: str, file_name: str, *args: Any, **kwargs: Any) -> None:
        super().new_file(field_name, file_name, *args, **kwargs)
        self.count += 1
        if self.count > self.limits.files:
            self.refused.append(self.limits.too_many())
            raise StopUpload(connection_reset=False)
        if reason := unusable_name(file_name):
            self.refused.append(reason)
            self.unusable.append(file_name)
            raise SkipFile
        archive = self.archives and is_archive(file_name)
        self.limit = self.limits.total_size if archive else self.limits.file_size

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.total += len(raw_data)
        if start + len(raw_data) > self.limit:
            rule = (
                f"one upload may hold at most {binary_size(self.limits.total_size)}"
                if self.limit == self.limits.total_size
                else f"each session may be at most {binary_size(self.limits.file_size)}"
            )
            self.refused.append(
                f"“{shown_name(self.file_name or '')}” is more than "
                f"{binary_size(self.limit)}; {rule}."
            )
            raise SkipFile
        if self.total > self.limits.total_size:
            self.refused.append(
                f"This upload is more than {binary_size(self.limits.total_size)}; "
                f"one upload may hold at most {binary_size(self.limits.total_size)}."
            )
            # Nothing more of this request is stored: the rest is read and dropped.
            raise StopUpload(connection_reset=False)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


class StagingUploadHandler(TemporaryFileUploadHandler):
    """Write each uploaded file to a temporary file as it arrives, hashing it on the way.

    The file it returns has `sha256` (hex), so `Unpacker` takes it as a
    staged session without reading it again. The only upload handler in
    settings (FILE_UPLOAD_HANDLERS): no upload is held in memory.
    """

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.digest = hashlib.sha256()

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        self.digest.update(raw_data)
        super().receive_data_chunk(raw_data, start)

    def file_complete(self, file_size: int) -> UploadedFile[bytes]:
        uploaded = super().file_complete(file_size)
        assert uploaded is not None  # a TemporaryFileUploadHandler always makes the file
        uploaded.sha256 = self.digest.hexdigest()  # type: ignore[attr-defined]
        return uploaded


class NameKeepingParser(MultiPartParser):
    """Django's multipart parser, but a file whose name cleans to nothing is kept, not dropped.

    Django drops such a part silently (a file named `..`, or only
    zero-width characters), so a form would say "This field is required".
    Kept, it reaches `LimitUploadHandler`, which refuses it saying what is
    wrong with the name.
    """

    def sanitize_file_name(self, file_name: str) -> str | None:
        clean: str | None = super().sanitize_file_name(file_name)
        return clean or file_name


def keep_unusable_names(request: HttpRequest) -> None:
    """Make `request` parse its multipart body with `NameKeepingParser` (before it is read)."""

    def parse_file_upload(meta: Any, data: Any) -> Any:
        return NameKeepingParser(meta, data, request.upload_handlers, request.encoding).parse()

    # An instance attribute: HttpRequest._load_post_and_files calls self.parse_file_upload.
    request.parse_file_upload = parse_file_upload  # type: ignore[assignment]
