"""A file read by byte ranges, so a large session never sits in memory whole."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, BinaryIO

CHUNK = 1 << 20  # bytes per read when streaming (1 MiB)
# copy_file_range's refusals that mean "not here" (another file system on an older
# kernel, a target opened to append, a file system without it), not a failed write.
_NO_KERNEL_COPY = {errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EBADF}


class FileSource:
    """The bytes of a file, sliced like `bytes` but read on demand with `pread`.

    Supports `source[a:b]` (bytes), `len(source)`, `startswith` and
    `endswith`. Use as a context manager, or call `close`. Raises OSError when
    the file cannot be opened or read.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_RDONLY)
        self._size = os.fstat(self._fd).st_size

    @classmethod
    def of_file(cls, f: IO[bytes]) -> FileSource:
        """Return a FileSource of the open OS-level file `f`, on a descriptor of its own.

        `f` may be closed after. Raises OSError (io.UnsupportedOperation) when
        `f` has no file descriptor.
        """
        source = cls.__new__(cls)
        source.path = Path(str(getattr(f, "name", "")))
        source._fd = os.dup(f.fileno())
        source._size = os.fstat(source._fd).st_size
        return source

    @classmethod
    def spooled(cls, chunks: Iterable[bytes]) -> FileSource:
        """Return a FileSource of `chunks` written to a temporary file, already unlinked.

        For bytes that arrive as a stream (standard input, object storage):
        they are held on disk, not in memory, and the file goes when closed.
        Raises OSError when the temporary folder cannot be written; its
        `strerror` then names the folder ("the temporary folder /tmp is full
        (No space left on device)"), which `TMPDIR` sets.
        """
        try:
            fd, path = tempfile.mkstemp(prefix="pairfix-spool-")
        except OSError as exc:
            raise _spool_error(exc) from exc
        # Unlinked at once: nothing is left behind, however the process ends.
        os.unlink(path)
        with os.fdopen(fd, "w+b") as f:
            for chunk in chunks:
                try:
                    f.write(chunk)
                except OSError as exc:
                    raise _spool_error(exc) from exc
            try:
                f.flush()
            except OSError as exc:
                raise _spool_error(exc) from exc
            source = cls.of_file(f)
        source.path = Path(path)
        return source

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, where: slice) -> bytes:
        start, stop, step = where.indices(self._size)
        if step != 1:
            raise ValueError("FileSource slices take no step")
        return os.pread(self._fd, max(0, stop - start), start)

    def startswith(self, prefix: bytes) -> bool:
        """Return True when the file begins with `prefix`."""
        return self[0 : len(prefix)] == prefix

    def endswith(self, suffix: bytes) -> bool:
        """Return True when the file ends with `suffix`."""
        return self[max(0, self._size - len(suffix)) : self._size] == suffix

    def read_into(self, buffer: bytearray, start: int) -> int:
        """Read the bytes from `start` into `buffer` (at most its length); return how many.

        Fewer at the file's end (0 past it). Raises OSError when reading fails.
        """
        return os.preadv(self._fd, [buffer], start)

    def spans(self, spans: Iterable[tuple[int, int]]) -> Iterator[bytes]:
        """Yield the bytes of each (start, stop) of `spans`, read CHUNK bytes or more at a time.

        Spans in file order (each starting at or after the one before) are read
        in runs: one read for the many records of a chunk, not one each. A span
        that starts before the run held is read on its own. Raises OSError when
        reading fails.
        """
        held, at = b"", 0
        for start, stop in spans:
            if start < at or stop > at + len(held):
                at = start
                held = self[start : max(stop, start + CHUNK)]
            yield held[start - at : stop - at]

    def chunks(self, start: int, stop: int, reuse: bool = False) -> Iterator[bytes | bytearray]:
        """Yield the bytes from `start` to `stop`, a chunk at a time.

        With `reuse`, each chunk is read into one bytearray, yielded again and
        again: a chunk is valid until the next is asked for. That saves a new
        object, and the kernel's fresh pages for it, per chunk (a tenth of a
        second a gigabyte).
        """
        if not reuse:
            while start < stop:
                data = self[start : min(stop, start + CHUNK)]
                if not data:
                    return
                yield data
                start += len(data)
            return
        buffer = bytearray()
        while start < stop:
            if len(buffer) != min(CHUNK, stop - start):
                buffer = bytearray(min(CHUNK, stop - start))
            read = self.read_into(buffer, start)
            if not read:
                return
            if read < len(buffer):
                del buffer[read:]
            yield buffer
            start += read

    def copy_to(self, out: BinaryIO, start: int, stop: int) -> None:
        """Write the bytes from `start` to `stop` to `out`, as `out.write(self[start:stop])` would.

        Into a regular file the kernel copies them (`os.copy_file_range`, Linux
        4.5+: no pass through Python, a reflink where the file system shares
        extents); where it cannot (a pipe, standard output, a file opened to
        append, another file system on an older kernel) they are read and
        written a chunk at a time. Bytes past the file's end are not written.
        Raises OSError when reading or writing fails.
        """
        stop = min(stop, self._size)
        target = _regular_file(out)
        if target is not None and start < stop:
            out.flush()
            at, copied = out.tell(), -1
            try:
                while start < stop:
                    copied = os.copy_file_range(self._fd, target, stop - start, start, at)
                    if copied == 0:
                        break  # the file ended early (cut while read): nothing more to copy
                    start, at = start + copied, at + copied
            except OSError as exc:
                if exc.errno not in _NO_KERNEL_COPY:
                    raise
            finally:
                # copy_file_range with offsets leaves the descriptor's own offset alone.
                out.seek(at)
            if start >= stop or copied == 0:
                return
        # Sliced, not `chunks`: a subclass's progress counts the read, not the write.
        for offset in range(start, stop, CHUNK):
            out.write(self[offset : min(stop, offset + CHUNK)])

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> FileSource:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def _regular_file(out: BinaryIO) -> int | None:
    """Return the descriptor of `out` when it is a seekable regular file, else None."""
    try:
        fd = out.fileno()
        seekable = out.seekable()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return None
    return fd if seekable and stat.S_ISREG(os.fstat(fd).st_mode) else None


# Takes whole lines of a chunk itself: (chunk, pos, offset) -> (pos, offset) of the first
# line it leaves, which is then yielded as ever. The chunk is valid only during the call.
Taker = Callable[[bytes | bytearray, int, int], tuple[int, int]]


def iter_lines(
    data: bytes | FileSource, take: list[Taker | None] | None = None
) -> Iterator[tuple[int, int, bytes, bool]]:
    """Yield (start, end, line, terminated) for each line, without its line end.

    `end` excludes a `\\r\\n` or `\\n`; `terminated` says whether a `\\n` followed.
    Reads a FileSource a chunk at a time. Once `take[0]` is set, each chunk's
    lines are offered to it first, from the next line on: those it takes are
    not yielded.
    """
    size = len(data)
    if isinstance(data, bytes):
        pos = 0
        while pos < size:
            newline = data.find(b"\n", pos)
            stop = size if newline < 0 else newline
            end = stop - 1 if stop > pos and data[stop - 1 : stop] == b"\r" else stop
            yield pos, end, data[pos:end], newline >= 0
            pos = size if newline < 0 else newline + 1
        return
    # A line is cut from its chunk; one that spans chunks is joined once, at its end, so
    # a line of any length costs its bytes, not a copy for each chunk it spans.
    offset = 0  # file offset of the line being read
    pending: list[bytes] = []  # its bytes from earlier chunks
    for chunk in data.chunks(0, size, reuse=True):
        pos = 0
        view = memoryview(chunk)  # lines are copied out of the chunk once, as bytes
        while True:
            if take is not None and take[0] is not None and not pending:
                pos, offset = take[0](chunk, pos, offset)
            newline = chunk.find(b"\n", pos)
            if newline < 0:
                break
            if pending:
                pending.append(bytes(view[:newline]))
                line = b"".join(pending)
                pending = []
                length = len(line)
                if line.endswith(b"\r"):
                    line = line[:-1]
            else:
                length = newline - pos
                cut = newline - 1 if newline > pos and chunk[newline - 1] == 13 else newline
                line = bytes(view[pos:cut])
            yield offset, offset + len(line), line, True
            offset += length + 1
            pos = newline + 1
        view.release()  # the chunk's buffer is read into again next
        if pos < len(chunk):
            pending.append(bytes(chunk[pos:]))
    if pending:
        line = b"".join(pending)
        # As for bytes: a last line's `\r` is its line end, a `\n` or not.
        if line.endswith(b"\r"):
            line = line[:-1]
        yield offset, offset + len(line), line, False


def _spool_error(exc: OSError) -> OSError:
    """Return `exc` (a failed write to the temporary folder) as an OSError naming that folder."""
    folder = tempfile.gettempdir()
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        reason = f"the temporary folder {folder} is full ({exc.strerror})"
        return OSError(exc.errno, f"{reason}; set TMPDIR to a folder with room")
    return OSError(exc.errno, f"cannot write to the temporary folder {folder} ({exc.strerror})")
