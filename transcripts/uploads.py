"""What one upload may hold, and how `.gz` and `.zip` files become sessions.

Limits (settings `UPLOAD_MAX_FILE_SIZE`, `UPLOAD_MAX_TOTAL_SIZE`,
`UPLOAD_MAX_FILES`) count sessions and their bytes after decompression, so a
small archive that expands without end (a decompression bomb) is refused
after reading at most one byte past a limit. `LimitUploadHandler` applies the
same limits to the bytes received, so an oversized request is read and thrown
away rather than spooled to disk. Any refusal refuses the whole upload.
"""

from __future__ import annotations

import gzip
import unicodedata
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, SkipFile, StopUpload
from django.template.defaultfilters import filesizeformat

# Inside a zip: folders and the resource forks macOS adds are not sessions.
_ZIP_SKIPPED = ("__MACOSX/",)
_TAR_SUFFIXES = (".tar.gz", ".tgz", ".tar")


class UploadRefused(Exception):
    """The upload breaks a limit or holds an unreadable archive; the message says which."""


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


def _size(n: int) -> str:
    return str(filesizeformat(n)).replace("\xa0", " ")


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
            f"Up to {self.files} sessions of at most {_size(self.file_size)} each, "
            f"{_size(self.total_size)} in all (after decompression)."
        )


def is_archive(name: str) -> bool:
    """Return True when `name` says the file is a `.gz` or `.zip` to unpack."""
    return name.lower().endswith((".gz", ".zip"))


@dataclass
class Unpacker:
    """Collect the sessions of one upload, file by file, within `limits`.

    `add` raises UploadRefused as soon as a limit is passed or an archive
    cannot be read; `sessions` holds (name, bytes) in upload order.
    """

    limits: Limits
    sessions: list[tuple[str, bytes]] = field(default_factory=list)
    total: int = 0

    def add(self, name: str, stream: IO[bytes]) -> None:
        """Add the sessions in one uploaded file: the file itself, a .gz's content or a .zip's."""
        lower = name.lower()
        if lower.endswith(_TAR_SUFFIXES):
            raise UploadRefused(
                f"“{name}” is a tar archive: upload a .zip, a .gz of one session, "
                "or the session files themselves."
            )
        if lower.endswith(".zip"):
            self._add_zip(name, stream)
        elif lower.endswith(".gz"):
            inner = clean_name(name[: -len(".gz")])
            try:
                with gzip.GzipFile(fileobj=stream, mode="rb") as content:
                    self._add(inner, content, source=f"“{name}”", verb="decompresses to")
            except (OSError, EOFError, zlib.error) as exc:
                raise UploadRefused(f"“{name}” is not a valid gzip file: {exc}.") from None
        else:
            self._add(name, stream, source=f"“{name}”")

    def _add_zip(self, name: str, stream: IO[bytes]) -> None:
        try:
            with zipfile.ZipFile(stream) as archive:
                members = [
                    info
                    for info in archive.infolist()
                    if not info.is_dir() and not info.filename.startswith(_ZIP_SKIPPED)
                ]
                if not members:
                    raise UploadRefused(f"“{name}” holds no files.")
                self._count(len(members))
                for info in members:
                    member = f"“{info.filename}” in “{name}”"
                    if info.flag_bits & 0x1:
                        raise UploadRefused(
                            f"{member} is encrypted: encrypted archives are not accepted."
                        )
                    # The declared size is checked first; reading stops at the limit anyway.
                    if info.file_size > self.limits.file_size:
                        raise self._too_big(member, "decompresses to")
                    with archive.open(info) as content:
                        self._add(
                            clean_name(info.filename),
                            content,
                            source=member,
                            verb="decompresses to",
                            counted=True,
                        )
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
            raise UploadRefused(f"“{name}” is not a valid zip archive: {exc}.") from None

    def _add(
        self,
        name: str,
        content: IO[bytes],
        *,
        source: str,
        verb: str = "is",
        counted: bool = False,
    ) -> None:
        if not counted:
            self._count(1)
        data = content.read(self.limits.file_size + 1)
        if len(data) > self.limits.file_size:
            raise self._too_big(source, verb)
        self.total += len(data)
        if self.total > self.limits.total_size:
            raise UploadRefused(
                f"This upload holds more than {_size(self.limits.total_size)} of sessions "
                f"(after decompression); one upload may hold at most "
                f"{_size(self.limits.total_size)}."
            )
        self.sessions.append((name, data))

    def _count(self, more: int) -> None:
        if len(self.sessions) + more > self.limits.files:
            raise UploadRefused(
                f"This upload holds more than {self.limits.files} sessions; "
                f"one upload may hold at most {self.limits.files}."
            )

    def _too_big(self, what: str, verb: str) -> UploadRefused:
        return UploadRefused(
            f"{what} {verb} more than {_size(self.limits.file_size)}; "
            f"each session may be at most {_size(self.limits.file_size)}."
        )


class LimitUploadHandler(FileUploadHandler):
    """Skip, without storing them, the files of an upload past the limits; keep why in `refused`.

    Put first in `request.upload_handlers`. A plain file may be
    `limits.file_size` bytes, an archive (which may hold many sessions)
    `limits.total_size`; all files together `limits.total_size`, and at most
    `limits.files` files. The bytes of a skipped file are read and dropped.
    """

    def __init__(self, request: Any, limits: Limits) -> None:
        super().__init__(request)
        self.limits = limits
        self.refused: list[str] = []
        self.count = 0
        self.total = 0
        self.limit = 0

    def new_file(self, field_name: str, file_name: str, *args: Any, **kwargs: Any) -> None:
        super().new_file(field_name, file_name, *args, **kwargs)
        self.count += 1
        if self.count > self.limits.files:
            if self.count == self.limits.files + 1:
                self.refused.append(
                    f"This upload holds more than {self.limits.files} files; "
                    f"one upload may hold at most {self.limits.files}."
                )
            raise SkipFile
        archive = is_archive(file_name)
        self.limit = self.limits.total_size if archive else self.limits.file_size

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.total += len(raw_data)
        if start + len(raw_data) > self.limit:
            rule = (
                f"one upload may hold at most {_size(self.limits.total_size)}"
                if self.limit == self.limits.total_size
                else f"each session may be at most {_size(self.limits.file_size)}"
            )
            self.refused.append(f"“{self.file_name}” is more than {_size(self.limit)}; {rule}.")
            raise SkipFile
        if self.total > self.limits.total_size:
            self.refused.append(
                f"This upload is more than {_size(self.limits.total_size)}; "
                f"one upload may hold at most {_size(self.limits.total_size)}."
            )
            # Nothing more of this request is stored: the rest is read and dropped.
            raise StopUpload(connection_reset=False)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


def unpack(files: Iterable[tuple[str, IO[bytes]]], limits: Limits) -> list[tuple[str, bytes]]:
    """Return the (name, bytes) of every session in `files`; raise UploadRefused past a limit."""
    unpacker = Unpacker(limits)
    for name, stream in files:
        unpacker.add(name, stream)
    return unpacker.sessions
