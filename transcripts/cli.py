"""The `pairfix` command: check, fix and preview session files, with no server or database.

Pure engine (no Django): every file is read through a `FileSource`, so a
JSON-lines session streams in one pass and its repair streams out again;
nothing reads a session whole but a JSON document, which is one value.

    pairfix check PATH...                    faults per file, with the provider's error text
    pairfix fix PATH... --out DIR            write each repaired file to DIR
    pairfix fix FILE --out NEW.jsonl         write the one repaired file to NEW.jsonl (new)
    pairfix fix PATH... --in-place           replace each file, a backup beside it
    pairfix preview PATH                     what the agent sends when it resumes the file
    pairfix --version                        the installed version

A PATH may be a folder (walked for `*.jsonl` and `*.json` session files),
`-` (standard input), or a pipe, FIFO or `/dev/stdin` (read once, as standard
input is; a character or block device is refused); `--out -` writes the
repaired file to standard output. `--out DIR` never writes over an input of
the run, nor where two inputs' repairs would both go.
Exit status: 0 when every file is healthy (or was written), 1 when a file has
faults (`check`, `fix --dry-run`; `fix` too when a call may still be running,
`pending_result`, left alone) or its resume request would be refused
(`preview`), 2 when a file is unreadable or could not be written, or has no
resume model (`preview`), or is a symbolic link named for `fix --in-place`
(one found in a folder is skipped). With `--json` every run prints one JSON
document on standard output, a refusal too. Human output passes through
`transcripts.visible.terminal_text`: nothing from a transcript or a file name
acts on the terminal.

`manage.py repair` is a thin wrapper over `repair_files`; `report` gives the
machine-readable shape of one file that `--json` and `--report` print.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import functools
import io
import json
import math
import os
import shlex
import signal
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn

import orjson

from transcripts import formats
from transcripts.core.compaction import before_compaction
from transcripts.core.jsontext import escape_lone
from transcripts.core.model import INFORMATIONAL, Action, FaultKind, Transcript
from transcripts.engine import DEFAULT_GRACE, DEFAULT_POLICY, PRESETS, Analysis, FileSource, analyze
from transcripts.replace import (
    FileChanged,
    Stamp,
    SymlinkRefused,
    check_unchanged,
    is_own_file,
    replace_file,
    sha256_of,
    write_file,
)
from transcripts.sizes import binary_size
from transcripts.visible import surrogate_free, terminal_text

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = [
    "Input",
    "Run",
    "check_files",
    "inputs",
    "main",
    "missing_reports",
    "repair_files",
    "report",
]

OK, FAULTS, BAD = 0, 1, 2
SESSION_SUFFIXES = (".jsonl", ".json")
BAR_BYTES = 32 << 20  # files at least this large get a progress bar of their own
DIFF_BYTES = 32 << 20  # --dry-run prints a diff of files up to this size
DIFF_LINE_CHARS = 200

Say = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Input:
    """One session file to read: `path` on disk (None for standard input).

    `name` is shown in messages and reports (a non-UTF-8 byte of the file
    name spelled `\\xff`, see `transcripts.visible.surrogate_free`);
    `relative` is where its repair goes under `--out DIR` (its path below the
    folder it was found in); `walked` says it was found in a folder rather
    than named; `stream` says `path` is no regular file (a pipe, a process
    substitution's `/dev/fd/63`, `/dev/stdin`, a named FIFO, a terminal): its
    bytes come once, in order, and are read as standard input's are (a
    character or block device that is no terminal is refused when opened).
    """

    path: Path | None
    name: str
    relative: Path
    walked: bool = False
    stream: bool = False


def inputs(
    paths: Sequence[str], say_error: Say, *, out: Path | None = None
) -> tuple[list[Input], int]:
    """Return the files `paths` name (folders walked, `-` for stdin) and how many are missing.

    A folder gives every `*.jsonl` and `*.json` regular file below it,
    sorted, a folder's own files before its subfolders', but the backups and
    temporary files of an in-place repair; one of those names that is no
    regular file (a named pipe, a socket, a device, a symbolic link to one or
    to nothing) is skipped with a note, never opened: opening a named pipe
    waits for a writer that may never come. The folder
    `out` (where `fix --out DIR` writes) is skipped with a note when it lies
    inside a folder walked, so a second run reads no repair of the first. A
    path named that is no regular file is read as a stream (`Input.stream`).
    """
    found: list[Input] = []
    missing = 0
    for given in paths:
        if given == "-":
            found.append(Input(None, "<stdin>", Path("stdin")))
            continue
        path = Path(given).expanduser()
        if path.is_dir():
            inside = _inside(out, path) if out is not None else None
            if inside is not None and path.joinpath(*inside).is_dir():
                shown = terminal_text(_name(path.joinpath(*inside)))
                say_error(f"{shown}: skipped: the --out folder (repairs go there, not read)")
            # A folder's own files before those of its subfolders: a Claude Code session
            # (`<id>.jsonl`) before its subagents (`<id>/subagents/agent-*.jsonl`).
            for child in sorted(path.rglob("*"), key=lambda p: (p.parent.parts, p.name)):
                if child.suffix not in SESSION_SUFFIXES or is_own_file(child.name):
                    continue
                if inside is not None and child.relative_to(path).parts[: len(inside)] == inside:
                    continue
                if child.is_file():
                    found.append(Input(child, _name(child), child.relative_to(path), walked=True))
                elif not child.is_dir():
                    shown = terminal_text(_name(child))
                    say_error(f"{shown}: skipped: {_not_regular(child)}, not a regular file")
        elif path.exists():
            found.append(
                Input(path, surrogate_free(given), Path(path.name), stream=not path.is_file())
            )
        else:
            say_error(f"{terminal_text(given)}: cannot read: No such file or directory")
            missing += 1
    return found, missing


def _inside(out: Path, folder: Path) -> tuple[str, ...] | None:
    """Return the parts of the path from `folder` to `out` when `out` lies inside it, else None.

    Both are compared as they resolve (`os.path.realpath`: symbolic links
    followed, a part not there yet taken as named). A folder walk follows no
    symbolic link to a folder, so what it finds of `out` is under these parts.
    """
    real_out, real_folder = Path(os.path.realpath(out)), Path(os.path.realpath(folder))
    if real_out == real_folder or not real_out.is_relative_to(real_folder):
        return None
    return real_out.relative_to(real_folder).parts


def _not_regular(path: Path) -> str:
    """Return what `path`, no regular file and no folder, is: "a named pipe", "a socket", ..."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return "a symbolic link that leads nowhere"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"


def _name(path: Path) -> str:
    """Return `path` as shown and reported: its non-UTF-8 bytes spelled `\\xff`."""
    return surrogate_free(str(path))


def _bar(*args: Any, **kwargs: Any) -> tqdm[Any]:
    """Return a tqdm progress bar; tqdm is imported only when a bar is shown.

    Off a terminal no bar is made, so a `pairfix fix` in a script or a pipe
    never pays for importing it (a twentieth of a second).
    """
    from tqdm import tqdm

    # Bars are updated a chunk at a time; tqdm's monitor thread (which would also
    # reserve a malloc arena of address space) adds nothing.
    tqdm.monitor_interval = 0
    return tqdm(*args, **kwargs)


def _is_terminal(stream: Any) -> bool:
    """Return True when `stream` is a terminal (progress bars show only there)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class _Progress(FileSource):
    """A FileSource that advances a progress bar as its bytes stream by."""

    def __init__(self, path: Path, bar: tqdm[Any]) -> None:
        super().__init__(path)
        self.bar = bar

    def chunks(self, start: int, stop: int, reuse: bool = False) -> Iterator[bytes | bytearray]:
        for chunk in super().chunks(start, stop, reuse):
            self.bar.update(len(chunk))
            yield chunk


def _open(item: Input, stdin: BinaryIO, bars: bool) -> tuple[FileSource, tqdm[Any] | None]:
    """Open `item` as a FileSource (a stream is first spooled to an unlinked file).

    A stream (standard input, a pipe, a named FIFO) cannot be read by offset
    (`pread` on it fails with ESPIPE, "Illegal seek"): its bytes are read in
    order, once, to the spool.
    """
    if item.path is None:
        try:
            mode = os.fstat(stdin.fileno()).st_mode
        except (OSError, ValueError):  # io.UnsupportedOperation: bytes in memory
            mode = 0
        _refuse_device(mode, lambda: stdin.isatty())
        return FileSource.spooled(iter(functools.partial(stdin.read, 1 << 20), b"")), None
    if item.stream:
        # Stat first: opening a device can act on it (a tape rewinds when closed).
        _refuse_device(os.stat(item.path).st_mode, functools.partial(_is_our_terminal, item.path))
        # Opening a named FIFO waits for its writer, as `cat fifo` does.
        fd = os.open(item.path, os.O_RDONLY)
        try:
            return FileSource.spooled(iter(functools.partial(os.read, fd, 1 << 20), b"")), None
        finally:
            os.close(fd)
    size = item.path.stat().st_size
    if bars and size >= BAR_BYTES:
        bar = _bar(
            total=size,
            unit="B",
            unit_scale=True,
            desc=terminal_text(item.path.name),
            leave=False,
            disable=None,
        )
        return _Progress(item.path, bar), bar
    return FileSource(item.path), None


def _refuse_device(mode: int, is_terminal: Callable[[], bool]) -> None:
    """Raise OSError when `mode` is a character or block device's that is no terminal.

    A device's bytes may never end (`/dev/zero`, `/dev/urandom`) or be a whole
    disk: spooled, they would fill the temporary folder. A terminal's end
    with Ctrl-D, as `cat` reads them (`/dev/stdin` typed at).
    """
    if stat.S_ISBLK(mode):
        kind = "a block device"
    elif stat.S_ISCHR(mode) and not is_terminal():
        kind = "a character device"
    else:
        return
    raise OSError(
        errno.EINVAL,
        f"{kind}, not a session file (its bytes may never end); save the session to a file "
        "and name that",
    )


def _is_our_terminal(path: Path) -> bool:
    """Return True when `path` is the terminal this process reads (`/dev/stdin` typed at)."""
    try:
        return os.isatty(0) and os.path.samestat(os.stat(path), os.fstat(0))
    except OSError:
        return False


def _case_index(transcript: Transcript | None, index: int | None) -> int | None:
    """Return a record index as the sample cases count it: the line (0-based) of a JSONL file."""
    if index is None or transcript is None or index < 0:
        return index
    if formats.FORMATS[transcript.format].jsonl:
        return transcript.records[index].line - 1
    return index


def report(analysis: Analysis, name: str) -> dict[str, Any]:
    """Return the machine-readable report of one analysed file.

    Shape: `{"path", "format", "provider", "records", "error", "faults": [{"kind",
    "tool_call_id", "record", "block", "error", "detail", "informational"}], "ops": [{"op", "fault",
    "fault_index", "tool_call_id", "record", "block"}]}`. Record indices count as
    the sample cases' `message_index` does: the 0-based line number of a
    JSON-lines file, the index into the message array of a JSON document;
    `fault_index` is the position in `faults` of the fault an op mends; `error`
    is the provider's own error text for the fault; `informational` marks a
    finding that is no fault (an earlier repair's marker: it sets no exit 1).
    """
    transcript = analysis.transcript
    faults = analysis.faults
    position = {id(fault): n for n, fault in enumerate(faults)}
    return {
        "path": name,
        "format": analysis.format,
        "provider": analysis.provider,
        "records": analysis.record_count,
        "error": analysis.error,
        "faults": [
            {
                "kind": str(fault.kind),
                "tool_call_id": fault.tool_call_id,
                "record": _case_index(transcript, fault.record),
                "block": fault.block,
                "error": fault.error,
                "detail": fault.detail,
                "informational": fault.kind in INFORMATIONAL,
            }
            for fault in faults
        ],
        "ops": [
            {
                "op": str(op.kind),
                "fault": str(op.fault.kind),
                "fault_index": position.get(id(op.fault)),
                "tool_call_id": op.tool_call_id,
                "record": _case_index(transcript, op.place),
                "block": op.block,
            }
            for op in analysis.plan.ops
        ],
    }


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{kind}={n}" for kind, n in counts.items()) or "none"


def _summary(analysis: Analysis) -> str:
    """Return "format, faults: kind=n, ...; ops: kind=n, ..." for one analysed file."""
    ops: dict[str, int] = {}
    for op in analysis.plan.ops:
        ops[str(op.kind)] = ops.get(str(op.kind), 0) + 1
    counts = analysis.fault_counts
    facts = {kind: n for kind, n in counts.items() if kind in INFORMATIONAL}
    faults = {kind: n for kind, n in counts.items() if kind not in INFORMATIONAL}
    noted = f" (informational: {_counts(facts)})" if facts else ""
    return f"{analysis.format}, faults: {_counts(faults)}{noted}; ops: {_counts(ops)}"


def _has_faults(analysis: Analysis) -> bool:
    return any(fault.kind not in INFORMATIONAL for fault in analysis.faults)


def _has_resume_model(format_id: str) -> bool:
    """Return True when the agent that writes `format_id` files has a resume model."""
    from transcripts.replay import AGENTS  # only for a file with faults: not at start-up

    return format_id in AGENTS


def _fault_lines(analysis: Analysis) -> Iterator[str]:
    for fault in analysis.faults:
        where = f"record {_case_index(analysis.transcript, fault.record)}"
        if fault.block is not None:
            where += f", block {fault.block}"
        call = f" {fault.tool_call_id}" if fault.tool_call_id else ""
        text = fault.error or fault.detail
        yield f"  {fault.kind}{call} at {where}" + (f": {text}" if text else "")


def _op_lines(analysis: Analysis) -> Iterator[str]:
    for op in analysis.plan.ops:
        call = f" {op.tool_call_id}" if op.tool_call_id else ""
        where = _case_index(analysis.transcript, op.place)
        yield f"  {op.kind}{call} at record {where} (mends {op.fault.kind}, {op.policy_row})"


def _diff(analysis: Analysis, name: str) -> Iterator[str]:
    """Yield the unified diff of the raw and repaired file (cut for files over DIFF_BYTES)."""
    size = len(analysis.raw)
    if size > DIFF_BYTES:
        yield f"  (no diff: {name} is {binary_size(size)}, over {binary_size(DIFF_BYTES)})"
        return
    from transcripts.difftext import diff_lines  # only a dry run shows a diff

    before = analysis.raw if isinstance(analysis.raw, bytes) else analysis.raw[0:size]
    yield from diff_lines(before, analysis.repaired, name, DIFF_LINE_CHARS)


@dataclass
class Run:
    """One command's settings and where its messages go.

    `say` takes the report's lines, `say_error` the errors, each line passed
    through `terminal_text` first (transcript content and file names are
    untrusted: no control or bidirectional character reaches the terminal,
    and a newline in a value cannot start a line); `bars` allows progress
    bars (shown only on a terminal); `stdin` is read for `-`.
    """

    policy: str
    format: str | None
    say: Say
    say_error: Say
    stdin: BinaryIO = field(default_factory=lambda: sys.stdin.buffer)
    bars: bool = True
    # A file written less than this many seconds ago is still being written: its
    # unanswered last calls are pending, not missing (DESIGN contract 9).
    grace: float = DEFAULT_GRACE

    def __post_init__(self) -> None:
        self.say = _escaped(self.say)
        self.say_error = _escaped(self.say_error)


def _escaped(say: Say) -> Say:
    def escaped_say(line: str) -> None:
        say(terminal_text(line))

    return escaped_say


def _analyze(
    run: Run, item: Input, *, summaries: bool = False
) -> tuple[Analysis, FileSource] | str:
    """Return the analysis of `item` and its source, left open.

    When `item` cannot be read, says so and returns the error a report
    gives ("cannot read: <why>"). Records keep their preview texts only
    with `summaries` (see `analyze`).
    """
    try:
        source, bar = _open(item, run.stdin, run.bars)
    except OSError as exc:
        return _unread(run, item, str(exc.strerror))
    try:
        analysis = analyze(
            source,
            item.relative.name,
            run.policy,
            format=run.format,
            summaries=summaries,
            now=time.time(),
            last_write=_appended_at(item, run),
            grace=run.grace,
        )
    except OSError as exc:
        source.close()
        return _unread(run, item, str(exc.strerror))
    except MemoryError as exc:
        # Nothing is written from a file that was not read whole; exit 2.
        source.close()
        return _unread(run, item, "out of memory" + (f" ({exc})" if str(exc) else ""))
    finally:
        if bar is not None:
            bar.close()
    if any(f.kind is FaultKind.PENDING_RESULT for f in analysis.faults):
        policy = analysis.policy
        if policy is not None and policy.action(FaultKind.PENDING_RESULT) is not Action.KEEP:
            # A preset that imitates a repair which cannot tell a running call (openmaic).
            fate = (
                f"the {policy.name} policy answers them all the same "
                f"({policy.row(FaultKind.PENDING_RESULT)})"
            )
        else:
            fate = "they are pending and left alone (--grace 0 once the agent has stopped)"
        run.say_error(
            f"{item.name}: written less than {run.grace:g} s ago, so its last unanswered "
            f"calls may still be running: {fate}"
        )
    return analysis, source


def _unread(run: Run, item: Input, why: str) -> str:
    """Say that `item` cannot be read, and why; return the error its report gives."""
    error = f"cannot read: {why}"
    run.say_error(f"{item.name}: {error}")
    return error


def _appended_at(item: Input, run: Run) -> float | None:
    """Return when `item` was last written, if it is a JSON-lines session (agents append to those).

    A JSON document is written whole, so a recent one is not being written:
    None, and its unanswered calls are faults to repair, not pending.
    """
    jsonl = formats.FORMATS[run.format].jsonl if run.format else item.name.endswith(".jsonl")
    if item.path is None or item.stream or not jsonl:
        return None  # a stream's own time says nothing of the session's (a pipe is new)
    return item.path.stat().st_mtime


def _files_bar(items: list[Input], bars: bool) -> Iterator[Input]:
    if len(items) < 2 or not bars:
        yield from items
        return
    yield from _bar(items, unit="file", desc="sessions", leave=False, disable=None)


def _skipped(run: Run, item: Input, analysis: Analysis, entry: dict[str, Any]) -> bool:
    """Return True (with a note) for a file found in a folder that is not a session file.

    A folder holds other JSON too (Gemini CLI's `logs.json`, settings): a
    `.json` file of valid JSON of no format Pairfix reads is skipped there, not
    reported unreadable. A `.jsonl` file is what agents append sessions to, so
    it is reported, unless it is an agent's own file that is known to be no
    session (`Analysis.agent_file`: a prompt history); a file named on the
    command line always is.
    """
    if item.walked and analysis.agent_file:
        run.say_error(f"{item.name}: skipped: {analysis.agent_file}, not a session file")
        entry["skipped"] = f"not a session file: {analysis.agent_file}"
        return True
    if not (item.walked and analysis.not_a_session and item.relative.suffix == ".json"):
        return False
    run.say_error(f"{item.name}: skipped: not a session file (JSON of no format Pairfix reads)")
    entry["skipped"] = "not a session file"
    return True


def check_files(run: Run, items: list[Input], *, as_json: bool) -> tuple[int, list[Any]]:
    """Report the faults of every file; return the exit status and the reports."""
    status = OK
    reports: list[Any] = []
    for item in _files_bar(items, run.bars):
        opened = _analyze(run, item)
        if isinstance(opened, str):
            reports.append({"path": item.name, "error": opened})
            status = BAD
            continue
        analysis, source = opened
        with source:
            entry = report(analysis, item.name)
            reports.append(entry)
            if _skipped(run, item, analysis, entry):
                continue
            if analysis.error:
                run.say_error(_unreadable_line(item, analysis, "check"))
                status = BAD
                continue
            if _has_faults(analysis):
                status = max(status, FAULTS)
            hidden = (
                before_compaction(analysis.transcript) if analysis.transcript is not None else None
            )
            if as_json:
                _resume_line(analysis, item, entry)
            if hidden is not None:
                entry["before_compaction"] = {
                    "record": _case_index(analysis.transcript, hidden.boundary),
                    "records": len(hidden.hidden),
                    "faults": len(hidden.faults),
                }
            if not as_json:
                run.say(f"{item.name}: {_summary(analysis)}")
                for line in _fault_lines(analysis):
                    run.say(line)
                if resume_line := _resume_line(analysis, item, entry):
                    run.say(resume_line)
                if hidden is not None and hidden.faults:
                    # What the web page shows apart: the agent no longer sends that history.
                    at = _case_index(analysis.transcript, hidden.boundary)
                    more = len(hidden.faults)
                    run.say(
                        f"  {more} more fault{'s' if more != 1 else ''} "
                        f"before the compaction at record {at}, "
                        f"not counted: the agent sends only what follows it "
                        f"({len(hidden.hidden)} records before it are not sent)"
                    )
    return status, reports


# Up to this size a faulty file's check also says whether its agent's own resume is
# accepted (the preview reads each record once more); above it, only how to see it.
RESUME_VERDICT_BYTES = 64 * 1024 * 1024


def _resume_line(analysis: Analysis, item: Input, entry: dict[str, Any]) -> str:
    """Return the line on what the agent sends resuming a faulty file ("" when none applies).

    The faults above are of a request sent as the file is; the agent that
    wrote it drops or mends some of them first (`transcripts.replay`), so
    its 400 may not come. For a file up to RESUME_VERDICT_BYTES the line
    gives that resume's verdict, also set in `entry["resume"]` as
    {"agent", "modelled_on", "written_by", "provider", "accepted", "error"}:
    `modelled_on` names the agent's version the model follows, `written_by`
    the version the file says wrote it (None where it does not say). An
    accepted verdict for a file another version wrote says so, and that
    `fix` makes it valid for any. Empty for pending calls alone.
    """
    kinds = {f.kind for f in analysis.faults} - INFORMATIONAL - {FaultKind.PENDING_RESULT}
    if not kinds:
        return ""
    if analysis.transcript is None or not _has_resume_model(analysis.format):
        return ""
    hint = _preview_hint(item)
    if len(analysis.raw) > RESUME_VERDICT_BYTES:
        return (
            f"  the agent that wrote it mends or drops some faults itself when it resumes: {hint}"
        )
    from transcripts.replay import CannotPreview, preview
    from transcripts.replay.base import written_by

    try:
        resumed = preview(analysis.transcript)
    except CannotPreview as exc:
        # The faults stand as found; only what the agent sends is not modelled (a file
        # check reads on, the files after it too).
        return f"  what the agent sends on resume is not modelled: {exc}"
    if resumed is None:
        return ""
    error = resumed.violations[0].error if resumed.violations else ""
    writer = written_by(analysis.transcript)
    entry["resume"] = {
        "agent": resumed.agent,
        "modelled_on": resumed.modelled_on,
        "written_by": writer,
        "provider": resumed.provider,
        "accepted": resumed.valid,
        "error": error,
    }
    # The verdict is of one version's resume: a user's agent may be older or newer.
    version = f" (as {resumed.modelled_on} does; other versions may not)"
    if resumed.valid:
        modelled = resumed.modelled_on.rsplit(" ", 1)[-1]
        # What `fix` does under the policy of this run: it may leave some faults as found.
        left = _left_as_found(analysis)
        remedy = (
            f"`pairfix fix` leaves {', '.join(sorted(left))} as its policy says "
            f"({_why_left(analysis, left)})"
            if left
            else "`pairfix fix` makes it valid for any version"
        )
        other = (
            f"; this file was written by {resumed.agent} {writer}, which may send it as it "
            f"is and get the error above: {remedy}"
            if writer is not None and writer != modelled
            else ""
        )
        return (
            f"  resumed as it is, {resumed.agent} mends or drops these itself{version} and "
            f"{resumed.provider} accepts its request{other}; {hint}"
        )
    if not resumed.messages:
        # No request at all: the agent never gets that far (pi round a parent loop).
        return f"  resumed as it is, {resumed.agent}{version} sends no request ({error}): repair it"
    return (
        f"  resumed as it is, {resumed.agent}{version} still sends a request "
        f"{resumed.provider} refuses ({error}): repair it; {hint}"
    )


def _preview_hint(item: Input) -> str:
    """Return how to see what `item`'s agent sends: a command that can work for it."""
    if item.path is None:
        return "`pairfix preview -` shows what it sends, given the same standard input"
    if item.stream:
        return (
            f"save these bytes to a file and `pairfix preview FILE` shows what it sends "
            f"({item.name} is not a regular file: it was read once, as a stream)"
        )
    # The path as given (its name's bytes as they are), not `name`, which spells them.
    return f"`pairfix preview {_shell_word(str(item.path))}` shows what it sends"


def _shell_word(name: str) -> str:
    """Return `name` as one word a POSIX shell reads back as `name`, an option's `-` guarded.

    `s p.jsonl` becomes `'s p.jsonl'` (`shlex.quote`); `-x.jsonl` becomes
    `-- -x.jsonl`, so the command does not take it for an option. A name
    with characters a terminal would act on (a newline, an escape, a byte of
    a non-UTF-8 name) is spelled in `$'...'` quotes (POSIX.1-2024, bash,
    zsh), those characters as `\\xHH` bytes: printed, it is still the name.
    """
    quoted = shlex.quote(name) if terminal_text(name) == name else _dollar_quoted(name)
    return f"-- {quoted}" if name.startswith("-") else quoted


def _dollar_quoted(name: str) -> str:
    spelled = []
    for char in name:
        point = ord(char)
        if char in "\\'":
            spelled.append("\\" + char)
        elif 0xDC80 <= point <= 0xDCFF:  # a byte of a non-UTF-8 name (os.fsdecode)
            spelled.append(f"\\x{point - 0xDC00:02x}")
        elif terminal_text(char) != char:
            spelled.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
        else:
            spelled.append(char)
    return "$'" + "".join(spelled) + "'"


def _stdout_writer(stdout: BinaryIO) -> Callable[[Analysis], None]:
    def write(analysis: Analysis) -> None:
        analysis.write_repaired(stdout)
        stdout.flush()

    return write


def repair_files(
    run: Run,
    items: list[Input],
    *,
    out: Path | None,
    in_place: bool = False,
    dry_run: bool = False,
    stdout: BinaryIO | None = None,
    out_file: bool = False,
) -> tuple[int, list[Any]]:
    """Repair every file: into the folder `out`, to `stdout` (`out` None), or in place.

    With `out_file`, `out` is the file the one repair goes to; it must not
    exist yet. A repair is written whole or not at all
    (`transcripts.replace.write_file`).

    Returns the exit status (BAD when any file could not be read or written,
    else, for a dry run, FAULTS when any file would change) and the reports,
    each with `written` (the path written, or None) and, in place, `backup`
    and, when the file had other hard links (left as they were), `other_links`.
    Never overwrites an input through `out`; in place, a file is replaced
    only if its size, modification time, inode and sha256 are what they were
    when it was read (see `transcripts.replace`), and a healthy file is left
    untouched.
    """
    status = OK
    reports: list[Any] = []
    targets: dict[int, Path] = {}
    if out is not None and not in_place:
        targets = {id(item): out if out_file else out / item.relative for item in items}
    # Decided before anything is written: a repair written first must not change an
    # input read later (nor the file another input's repair goes to).
    refused = _clashes(items, targets, run.stdin)
    for item in _files_bar(items, run.bars):
        target = targets.get(id(item))
        refusal = refused.get(id(item)) or _refusal(item, target, out_file, in_place, dry_run)
        if refusal is not None:
            message, error = refusal
            run.say_error(message)
            reports.append({"path": item.name, "error": error})
            status = BAD
            continue
        if in_place and item.path is not None and item.path.is_symlink():
            # Replacing the link would turn it into a regular file and leave its target
            # unrepaired (and the backup a hard link to the link): its target is the session.
            target_of = _name(Path(os.path.realpath(item.path)))
            if item.walked:
                run.say_error(
                    f"{item.name}: symbolic link; skipped (repair its target instead: {target_of})"
                )
                reports.append({"path": item.name, "skipped": "symbolic link", "written": None})
                continue
            run.say_error(
                f"{item.name}: is a symbolic link; not repaired in place "
                f"(repair its target instead: {target_of})"
            )
            reports.append({"path": item.name, "error": "symbolic link"})
            status = BAD
            continue
        stamp = sha = None
        other_links = 0
        if in_place and item.path is not None and not dry_run:
            try:
                stamp, sha = Stamp.of(item.path), sha256_of(item.path)
                other_links = os.stat(item.path).st_nlink - 1
            except (OSError, FileChanged) as exc:
                reports.append({"path": item.name, "error": _unread(run, item, str(exc))})
                status = BAD
                continue
        opened = _analyze(run, item)
        if isinstance(opened, str):
            reports.append({"path": item.name, "error": opened})
            status = BAD
            continue
        analysis, source = opened
        with source:
            entry = report(analysis, item.name)
            entry["written"] = None
            reports.append(entry)
            if _skipped(run, item, analysis, entry):
                continue
            if analysis.error:
                run.say_error(_unreadable_line(item, analysis, "fix"))
                status = BAD
                continue
            if dry_run:
                if analysis.plan or _pending(analysis):
                    status = max(status, FAULTS)
                run.say(f"{item.name}: {_summary(analysis)}")
                for line in _op_lines(analysis):
                    run.say(line)
                if analysis.plan:
                    for line in _diff(analysis, item.name):
                        run.say(line)
                continue
            try:
                if in_place:
                    assert item.path is not None and stamp is not None and sha is not None
                    if not analysis.plan:
                        run.say(f"{item.name}: {_summary(analysis)}; left as it was")
                        if _pending(analysis):
                            status = max(status, FAULTS)
                        continue
                    path = item.path
                    backup = replace_file(
                        path,
                        analysis.write_repaired,
                        functools.partial(check_unchanged, path, stamp, sha),
                        now=datetime.now(UTC),
                    )
                    entry["written"], entry["backup"] = _name(path), _name(backup)
                    run.say(f"{item.name}: {_summary(analysis)} -> {path} (backup {backup.name})")
                    if other_links:
                        entry["other_links"] = other_links
                        run.say_error(_links_note(item, other_links, backup))
                elif target is None:
                    assert stdout is not None
                    _stdout_writer(stdout)(analysis)
                    entry["written"] = "-"
                    run.say(f"{item.name}: {_summary(analysis)} -> standard output")
                else:
                    try:
                        target.parent.mkdir(parents=True, exist_ok=True)
                    except FileExistsError:
                        # mkdir's refusal of a file where a folder must be: not a file
                        # made while the repair was written (that is write_file's below).
                        above = _file_above(target) or target.parent
                        raise NotADirectoryError(
                            errno.ENOTDIR, f"{_name(above)} is not a folder"
                        ) from None
                    # In an --out folder a file of the repair's name is replaced (a run
                    # again over its own earlier output): said, as nothing else would.
                    replaced = not out_file and os.path.lexists(target)
                    write_file(target, analysis.write_repaired, new=out_file)
                    entry["written"] = _name(target)
                    run.say(f"{item.name}: {_summary(analysis)} -> {target}")
                    if replaced:
                        entry["replaced"] = True
                        run.say_error(
                            f"{item.name}: {_name(target)} was there already and is replaced "
                            "(no backup is kept in an --out folder)"
                        )
            except FileChanged as exc:
                run.say_error(f"{exc}")
                entry["error"] = surrogate_free(str(exc))
                status = BAD
            except FileExistsError:
                run.say_error(
                    f"{item.name}: {_name(target or Path())} was made while the repair was "
                    "written; not overwritten"
                )
                entry["error"] = "--out file exists"
                status = BAD
            except SymlinkRefused as exc:
                run.say_error(f"{item.name}: {exc}")
                entry["error"] = "symbolic link"
                status = BAD
            except OSError as exc:
                where = item.path if in_place else target
                run.say_error(f"{item.name}: cannot write {where}: {exc.strerror or exc}")
                entry["error"] = surrogate_free(f"cannot write {where}")
                status = BAD
            if entry["written"] and _pending(analysis):
                status = max(status, FAULTS)
            if entry["written"] and (left := _left_as_found(analysis)):
                policy = analysis.policy.name if analysis.policy else run.policy
                why = _why_left(analysis, left)
                run.say_error(f"{item.name}: left as found under {policy}: {_counts(left)} ({why})")
    return status, reports


def _clashes(
    items: list[Input], targets: dict[int, Path], stdin: BinaryIO
) -> dict[int, tuple[str, str]]:
    """Return, by `id` of the input, why its repair must not go to its target in `targets`.

    Refused: a target that is the same file (`st_dev`, `st_ino`, symbolic
    links followed) as an input of the run, the input itself or another; and
    a target two inputs' repairs would both go to (compared as they resolve),
    for each of the two. Each value is (the message, the report's `error`).
    """
    inputs_by_file: dict[tuple[int, int], Input] = {}
    for item in items:
        try:
            found = os.stat(item.path) if item.path is not None else os.fstat(stdin.fileno())
        except (OSError, ValueError):  # gone since, or standard input held in memory
            continue
        inputs_by_file.setdefault((found.st_dev, found.st_ino), item)
    resolved = functools.cache(os.path.realpath)  # one per folder, not one per file
    sharing: dict[tuple[str, str], list[Input]] = {}
    for item in items:
        if (target := targets.get(id(item))) is not None:
            sharing.setdefault((resolved(target.parent), target.name), []).append(item)
    refused: dict[int, tuple[str, str]] = {}
    for item in items:
        target = targets.get(id(item))
        if target is None:
            continue
        try:
            there = os.stat(target)
        except OSError:
            hit = None
        else:
            hit = inputs_by_file.get((there.st_dev, there.st_ino))
        others = [o for o in sharing[resolved(target.parent), target.name] if o is not item]
        shown = _name(target)
        if hit is item:
            # Raw is sacred: never overwrite an input with its repair.
            refused[id(item)] = (
                f"{item.name}: --out would write its repair over the file itself ({shown}); "
                "not written",
                "--out would overwrite the input",
            )
        elif hit is not None:
            over = hit.name if shown == hit.name else f"{shown} (the file {hit.name})"
            refused[id(item)] = (
                f"{item.name}: --out would write its repair over {over}, an input of this run; "
                "not written",
                f"--out would overwrite the input {hit.name}",
            )
        elif others:
            names = ", ".join(o.name for o in others)
            refused[id(item)] = (
                f"{item.name}: --out would write its repair to {shown}, as it would the "
                f"repair of {names}; {'neither' if len(others) == 1 else 'none of them'} "
                "is written (name them in separate runs)",
                f"same output name as {names}",
            )
    return refused


def _refusal(
    item: Input, target: Path | None, out_file: bool, in_place: bool, dry_run: bool
) -> tuple[str, str] | None:
    """Return (message, report error) when `item` is refused before it is read, else None."""
    if out_file and target is not None and not dry_run and os.path.lexists(target):
        # A file named as the repair's may be another session: never replaced unasked.
        return (
            f"{item.name}: {_name(target)} exists; not overwritten "
            "(remove it, or name another file or a folder)",
            "--out file exists",
        )
    if in_place and item.path is None:
        return (
            f"{item.name}: standard input cannot be repaired in place; use --out",
            "standard input cannot be repaired in place",
        )
    if in_place and item.stream:
        # Checked before the symbolic link (/dev/stdin is one) and before any read.
        return (
            f"{item.name}: not a regular file (a pipe, a FIFO or a device): it cannot be "
            "replaced in place; use --out DIR",
            "not a regular file",
        )
    return None


# The command that writes a compressed file's session to standard output, by packing.
_DECOMPRESS = {"gzip": "zcat", "bzip2": "bzcat", "xz": "xzcat", "zstd": "zstdcat"}


def _unreadable_line(item: Input, analysis: Analysis, command: str) -> str:
    """Return the line that says `item` is unreadable, naming the file once.

    `analysis.error` names the file as the engine was given it; here the
    input's name opens the line instead. A compressed file named by path
    gets the pipe that reads it (`zcat FILE | pairfix check -`); a stream's
    bytes came once, so no command is named for it.
    """
    error = analysis.error or ""
    own = f"{analysis.filename}: "
    if error.startswith(own):
        error = error[len(own) :]
    line = f"{item.name}: unreadable: {error}"
    cat = _DECOMPRESS.get(analysis.packing)
    if cat is not None and item.path is not None and not item.stream:
        rest = " --out DIR" if command == "fix" else ""
        line += f", or pipe it in: `{cat} {shlex.quote(item.name)} | pairfix {command} -{rest}`"
    return line


def _links_note(item: Input, others: int, backup: Path) -> str:
    """Return the warning for a file repaired in place that had `others` more hard links.

    The repair is a new file renamed onto this one name (so it is written
    whole or not at all, and the backup is the original itself): every other
    name of the original still holds its bytes, faults and all. They are the
    backup's other names.
    """
    links = "1 other hard link" if others == 1 else f"{others} other hard links"
    mount = backup.resolve().parent
    try:
        while mount != mount.parent and mount.parent.stat().st_dev == mount.stat().st_dev:
            mount = mount.parent
    except OSError:
        pass  # a folder above that cannot be read: the search starts below it
    return (
        f"{item.name}: had {links}: only this name was repaired, the other names still hold "
        f"the bytes as they were (they are the backup's: `find {shlex.quote(_name(mount))} "
        f"-xdev -samefile {shlex.quote(_name(backup))}` lists them)"
    )


def _pending(analysis: Analysis) -> bool:
    """Return True when a call of the file may still be running (`pending_result`).

    Such a call is left alone, as `check` counts it: resumed now, the file
    would be refused, so `fix` exits 1 for it too, written or not.
    """
    return any(fault.kind is FaultKind.PENDING_RESULT for fault in analysis.faults)


def _why_left(analysis: Analysis, left: dict[str, int]) -> str:
    """Return what the faults a repair left mean: for unreadable lines alone, what the agent does.

    An agent skips a line it cannot parse when it loads its file
    (`Transcript.malformed_note`), so such a line alone is no refusal.
    """
    transcript = analysis.transcript
    if set(left) == {FaultKind.MALFORMED_RECORD} and transcript and transcript.malformed_note:
        return f"{transcript.malformed_note.rstrip('.')}; `--policy discard` drops such lines"
    return "the provider may still refuse the file: check it"


def _left_as_found(analysis: Analysis) -> dict[str, int]:
    """Return the counts of the faults the plan mends none of (its policy keeps or flags them).

    Findings that are no fault and calls still running (`pending_result`) are left out.
    """
    mended = {id(op.fault) for op in analysis.plan.ops}
    left: dict[str, int] = {}
    for fault in analysis.faults:
        if fault.kind in INFORMATIONAL or fault.kind is FaultKind.PENDING_RESULT:
            continue
        if id(fault) not in mended:
            left[str(fault.kind)] = left.get(str(fault.kind), 0) + 1
    return left


def _message_line(message: Any) -> str:
    parts = [message.role]
    text = " ".join(" ".join(t.split()) for t in message.texts)
    if text:
        parts.append(repr(text if len(text) <= 80 else text[:79] + "…"))
    if message.calls:
        parts.append("calls " + ", ".join(message.calls))
    if message.results:
        parts.append("answers " + ", ".join(message.results))
    return "  " + " ".join(parts)


def _repaired_source(analysis: Analysis) -> FileSource:
    """Return the repaired file of `analysis`, written to a temporary file already unlinked."""
    fd, path = tempfile.mkstemp(prefix="pairfix-preview-")
    os.unlink(path)  # at once: nothing is left behind, however the process ends
    with os.fdopen(fd, "w+b") as f:
        analysis.write_repaired(f)
        f.flush()
        return FileSource.of_file(f)


def preview_file(
    run: Run,
    item: Input,
    *,
    write_json: Callable[[bytes], None] | None = None,
    repaired: bool = False,
) -> int:
    """Print what the file's agent sends on resuming it; return the exit status.

    With `repaired`, the preview is of the file as `run.policy` repairs it
    (the repair read back like any file), not of the file as it is. With
    `write_json`, the preview goes to it as one JSON document (bytes)
    instead of to `run.say` as lines.
    """
    # The agent's loader sends texts: the records keep theirs.
    opened = _analyze(run, item, summaries=True)
    if isinstance(opened, str):
        return BAD
    analysis, source = opened
    with source:
        if analysis.error or analysis.transcript is None:
            run.say_error(_unreadable_line(item, analysis, "preview"))
            return BAD
        if repaired:
            try:
                fixed = _repaired_source(analysis)
            except OSError as exc:
                run.say_error(f"{item.name}: cannot write its repair: {exc.strerror or exc}")
                return BAD
            with fixed:
                again = analyze(
                    fixed, item.relative.name, run.policy, format=analysis.format, summaries=True
                )
                return _show_preview(run, item, again, write_json, f" as {run.policy} repairs it")
        return _show_preview(run, item, analysis, write_json, "")


def _show_preview(
    run: Run,
    item: Input,
    analysis: Analysis,
    write_json: Callable[[bytes], None] | None,
    repaired: str,
) -> int:
    """Print the resume preview of an analysed file; `repaired` says which repair it is of."""
    from transcripts.replay import CannotPreview, preview

    if analysis.error or analysis.transcript is None:
        run.say_error(_unreadable_line(item, analysis, "preview"))
        return BAD
    try:
        result = preview(analysis.transcript)
    except CannotPreview as exc:
        run.say_error(f"{item.name}: {exc}")
        return BAD
    if result is None:
        run.say_error(
            f"{item.name}: {analysis.format_label} is a message list, not an agent's own "
            "session file: no agent loads it, so there is no resume to preview "
            "(`pairfix check` shows what its provider would refuse)"
        )
        return BAD
    if write_json is not None:
        write_json(
            _json(
                {
                    "path": item.name,
                    "repaired_by": run.policy if repaired else None,
                    "agent": result.agent,
                    "provider": result.provider,
                    "valid": result.valid,
                    "messages": result.messages,
                    "violations": result.violations,
                    "dropped": [
                        {
                            "record": _case_index(analysis.transcript, d.record),
                            "what": d.what,
                            "reason": d.reason,
                            "tool_call_id": d.tool_call_id,
                        }
                        for d in result.dropped
                    ],
                    "added": result.added,
                },
            )
            + b"\n"
        )
    elif not result.messages and result.violations:
        # The agent sends nothing: it never gets as far as a request (pi round a parent loop).
        run.say(
            f"{item.name}{repaired}: {result.agent} sends no request: {result.violations[0].error}"
        )
    else:
        run.say(
            f"{item.name}{repaired}: {result.agent} resumes it with {len(result.messages)} "
            f"messages to {result.provider}"
        )
        for message in result.messages:
            run.say(_message_line(message))
        for dropped in result.dropped:
            call = f" {dropped.tool_call_id}" if dropped.tool_call_id else ""
            record = _case_index(analysis.transcript, dropped.record)
            run.say(f"  dropped: {dropped.what}{call} of record {record}: {dropped.reason}")
        for added in result.added:
            run.say(f"  added by the agent:{_message_line(added)[1:]}")
        if result.valid:
            run.say(f"  {result.provider} accepts the request")
        for violation in result.violations:
            run.say(f"  {result.provider} refuses it: {violation.error}")
    return OK if result.valid else FAULTS


def _seconds(text: str) -> float:
    """Parse a --grace value: a finite number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, and finite: {text!r}")
    return value


class _UsageError(Exception):
    """A command line argparse refuses: raised in place of argparse's exit, so --json is kept."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(self, message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pairfix",
        description="Check and repair LLM agent sessions whose tool calls and results no "
        "longer pair up.",
        epilog="Exit status: 0 healthy or written, 1 faults found, 2 unreadable or not written.",
    )
    # Answered before parsing (`main`); listed here so that --help shows it.
    parser.add_argument("--version", action="store_true", help="print the installed version")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = _Parser(add_help=False)
    # No default here: `preview` shows the repaired file only when a policy is named.
    common.add_argument(
        "--policy",
        choices=sorted(PRESETS),
        help=f"repair policy for check and fix (default {DEFAULT_POLICY}); preview shows the "
        "file as it is unless a policy is named, then as that policy repairs it",
    )
    common.add_argument(
        "--format", choices=sorted(formats.FORMATS), help="read the file as this format"
    )
    common.add_argument(
        "--json", action="store_true", help="print a machine-readable report on standard output"
    )
    common.add_argument(
        "--grace",
        type=_seconds,
        default=DEFAULT_GRACE,
        metavar="SECONDS",
        help=f"a file written less than this long ago is still being written: its last "
        f"unanswered calls are pending and left alone (default {DEFAULT_GRACE:g}; 0 once "
        "the agent has stopped)",
    )
    check = commands.add_parser(
        "check", parents=[common], help="report each file's faults with the provider's error text"
    )
    check.add_argument("paths", nargs="+", metavar="PATH", help="a file, a folder, or - (stdin)")
    fix = commands.add_parser("fix", parents=[common], help="repair files")
    fix.add_argument("paths", nargs="+", metavar="PATH", help="a file, a folder, or - (stdin)")
    where = fix.add_mutually_exclusive_group()
    where.add_argument(
        "--out",
        metavar="DIR",
        help="write each repair to DIR under its name; for one file, a new file's name"
        " ending .jsonl or .json is the file to write (- for stdout)",
    )
    where.add_argument(
        "--in-place", action="store_true", help="replace each file, keeping a backup beside it"
    )
    fix.add_argument(
        "--dry-run", action="store_true", help="print the plan and a diff; write nothing"
    )
    preview = commands.add_parser(
        "preview", parents=[common], help="show what the agent sends when it resumes the file"
    )
    preview.add_argument("paths", nargs=1, metavar="PATH", help="a file, or - (stdin)")
    parser.set_defaults(preview_parser=preview)
    return parser


def _version() -> str:
    """Return the installed package's version ("0.1.0"), or "unknown" when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pairfix")
    except PackageNotFoundError:
        return "unknown"


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    stderr: io.TextIOBase | None = None,
) -> int:
    """Run `pairfix` with `argv` (default: the command line); return the exit status.

    With `--json`, every run prints one JSON document on standard output,
    a refusal too: `{"policy", "status": 2, "error", "files"}` for `check`
    and `fix`, `{"path", "status": 2, "error"}` for `preview`, and
    `{"status": 2, "error", "files": []}` for a command line argparse refuses.
    """
    out_bytes = stdout if stdout is not None else sys.stdout.buffer
    err = stderr if stderr is not None else sys.stderr
    given = sys.argv[1:] if argv is None else list(argv)
    if given[:1] == ["--version"]:  # whatever follows, as other tools' --version does
        out_bytes.write(f"pairfix {_version()}\n".encode())
        out_bytes.flush()
        return OK
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        extra = exc.parser is parser and exc.message.startswith("unrecognized arguments")
        if extra and given and given[0] == "preview":
            # `pairfix preview A B`: the extra path is preview's to refuse, not the top level's.
            exc = _UsageError(
                parser.get_default("preview_parser"),
                "preview takes one session file (a file, or - for standard input); "
                "run it once per file",
            )
        # As argparse says it (its exit status is 2 too), and with --json a document.
        exc.parser.print_usage(err)
        err.write(terminal_text(f"{exc.parser.prog}: error: {exc.message}") + "\n")
        if any(a.startswith("--j") and "--json".startswith(a) for a in given):
            refused = {"status": BAD, "error": surrogate_free(exc.message), "files": []}
            out_bytes.write(_json(refused) + b"\n")
            out_bytes.flush()
        return BAD
    to_stdout = args.command == "fix" and args.out == "-"
    text_out = err if to_stdout else None
    policy = args.policy or DEFAULT_POLICY
    errors: list[str] = []

    def say(line: str) -> None:
        if text_out is not None:
            text_out.write(line + "\n")
        else:
            out_bytes.write((line + "\n").encode())

    def say_error(line: str) -> None:
        # terminal_text maps its own output to itself: a line escaped already is kept.
        line = terminal_text(line)
        errors.append(line)
        err.write(line + "\n")

    def refuse(line: str, files: Sequence[dict[str, Any]] = ()) -> int:
        """Say why the run is refused; with --json, print the refusal's document too."""
        say_error(line)
        if args.json:
            # Exact, as --json keeps every value (a name's non-UTF-8 bytes spelled \xff).
            error = surrogate_free(line)
            document = {"policy": policy, "status": BAD, "error": error, "files": list(files)}
            out_bytes.write(_json(document) + b"\n")
            out_bytes.flush()
        return BAD

    if args.command == "fix" and args.out is None and not args.in_place and not args.dry_run:
        return refuse("fix needs --out DIR or --in-place (or --dry-run, which writes nothing)")
    target = None
    if args.command == "fix" and not (args.in_place or to_stdout or args.out is None):
        target = Path(args.out).expanduser()
    out_file = target is not None and _names_a_file(target)
    run = Run(
        policy=policy,
        format=args.format,
        say=(lambda line: None) if args.json and args.command != "preview" else say,
        say_error=say_error,
        grace=args.grace,
        # tqdm starts its monitor thread when a bar is made, shown or not: off a
        # terminal no bar is made at all, so the process stays one thread.
        bars=_is_terminal(err),
    )
    if stdin is not None:
        run.stdin = stdin
    items, missing = inputs(
        args.paths, run.say_error, out=target if target is not None and not out_file else None
    )
    if args.command == "preview":
        return _preview_main(run, args, items, missing, out_bytes, errors)
    if to_stdout and len(items) + missing != 1:
        return refuse("--out - takes exactly one input file", missing_reports(args.paths))
    if args.json and to_stdout:
        return refuse("--json and --out - both write to standard output; choose one")
    if args.command == "check":
        status, reports = check_files(run, items, as_json=args.json)
    else:
        shown = str(target)  # say_error escapes the line for the terminal
        if out_file and (len(items) + missing > 1 or any(item.walked for item in items)):
            assert target is not None
            return refuse(
                f"--out {shown} names one file (it ends {target.suffix}), and "
                "more than one session file was given: name a folder for several",
                missing_reports(args.paths),
            )
        if target is not None and not out_file and target.exists() and not target.is_dir():
            return refuse(
                f"--out {shown} exists and is not a folder: name a folder, or a new file "
                "ending .jsonl or .json (- for standard output)",
                missing_reports(args.paths),
            )
        above = _file_above(target) if target is not None and not args.dry_run else None
        if above is not None:
            return refuse(
                f"--out {shown}: {above} is not a folder (a file is "
                "there), so nothing can be written under it",
                missing_reports(args.paths),
            )
        if target is not None and not out_file and not args.dry_run:
            try:
                target.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                return refuse(
                    f"--out {shown}: cannot create: {exc.strerror or exc}",
                    missing_reports(args.paths),
                )
        status, reports = repair_files(
            run,
            items,
            out=target,
            in_place=args.in_place,
            dry_run=args.dry_run,
            stdout=out_bytes if to_stdout else None,
            out_file=out_file,
        )
    document: dict[str, Any] = {"policy": policy, "status": status, "files": reports}
    if missing:
        status = document["status"] = BAD
        reports.extend(missing_reports(args.paths))
    elif not items or all("skipped" in entry for entry in reports):
        # An empty folder is not a healthy session: nothing was checked. Nor is a folder
        # of other JSON only (settings, logs), each file skipped.
        plural = "not session files" if len(items) > 1 else "not a session file"
        skipped = f" ({len(items)} skipped: {plural})" if items else ""
        line = f"{', '.join(args.paths)}: no session files found{skipped}"
        say_error(line)
        status = document["status"] = BAD
        document["error"] = surrogate_free(line)
    if args.json:
        out_bytes.write(_json(document) + b"\n")
    out_bytes.flush()
    return status


def _preview_main(
    run: Run,
    args: argparse.Namespace,
    items: list[Input],
    missing: int,
    out_bytes: BinaryIO,
    errors: list[str],
) -> int:
    """Run `pairfix preview`; with --json, print one document whatever the outcome."""
    wrote: list[bytes] = []

    def write_json(document: bytes) -> None:
        wrote.append(document)
        out_bytes.write(document)

    given = surrogate_free(args.paths[0])
    if missing:
        status = BAD
    elif not items:
        run.say_error(f"{given}: no session files found")
        status = BAD
    elif items[0].walked:
        # A folder holds sessions the agent resumes one at a time: which one is meant?
        held = f"{len(items)} session files" if len(items) > 1 else f"one, {items[0].name}"
        run.say_error(
            f"{given}: is a folder; preview shows one session file: name it "
            f"(this folder holds {held}; `pairfix check` lists them)"
        )
        status = BAD
    else:
        given = items[0].name
        status = preview_file(
            run,
            items[0],
            write_json=write_json if args.json else None,
            repaired=args.policy is not None,
        )
    if args.json and not wrote:
        line = errors[-1] if errors else "no preview"
        prefix = f"{terminal_text(given)}: "
        error = line[len(prefix) :] if line.startswith(prefix) else line
        out_bytes.write(_json({"path": given, "status": status, "error": error}) + b"\n")
    out_bytes.flush()
    return status


def _file_above(path: Path) -> Path | None:
    """Return the nearest of the folders `path` is under that is there but no folder, if any.

    For `--out notes.txt/fixed.jsonl`: `notes.txt`. None when the nearest one
    there is a folder (the rest are made as the repair is written).
    """
    for parent in path.parents:
        if os.path.lexists(parent):
            return None if parent.is_dir() else parent
    return None


def _names_a_file(out: Path) -> bool:
    """Return True when `--out` names the file a repair goes to, not a folder.

    That is when `out` is no folder and ends as a session file does
    (`.jsonl`, `.json`, in any case). It then takes one named file's repair.
    """
    return out.suffix.lower() in SESSION_SUFFIXES and not out.is_dir()


def _json(document: Any) -> bytes:
    """Return `document` as indented JSON, any lone surrogate in it written as its escape.

    The bytes of a non-UTF-8 file name are spelled `\\xff` where the name
    enters a report; a lone surrogate still left is the transcript's own (a
    tool call id or text a Node program cut mid-pair), written `\\ud83d` as
    the session file writes it. orjson refuses to write one.
    """
    try:
        return orjson.dumps(document, option=orjson.OPT_INDENT_2)
    except orjson.JSONEncodeError:
        text = json.dumps(document, indent=2, ensure_ascii=False, default=_fields)
        return escape_lone(text).encode()


def _fields(value: Any) -> Any:
    """Return a dataclass's fields as orjson writes them (a preview's messages are ones)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def missing_reports(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Return the report entries of the `paths` that do not exist."""
    return [
        {"path": surrogate_free(str(p)), "error": "cannot read: No such file or directory"}
        for p in paths
        if str(p) != "-" and not Path(p).expanduser().exists()
    ]


class _Ended(BaseException):
    """The process was told to end (SIGTERM, SIGHUP): raised to unwind as Ctrl-C does."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number
        self.name = signal.Signals(number).name


def _end_by_signal(number: int, frame: Any) -> None:
    raise _Ended(number)


def entry_point() -> None:
    """The console script: run `main` and exit with its status.

    A reader that stops early (`pairfix check DIR | head`) ends the run quietly,
    as other command-line tools do, with the status a closed pipe gives (141).
    Ctrl-C, SIGTERM and SIGHUP unwind the run (every temporary file is
    removed, no file is half-written) and exit with 128 plus the signal's
    number, saying so in one line.
    """
    # Ended by kill or a closed terminal: unwound as Ctrl-C is, so no temporary file stays.
    for ended in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(ended, _end_by_signal)
    try:
        status = main()
        sys.stdout.flush()
    except _Ended as exc:
        sys.stderr.write(f"pairfix: stopped by {exc.name}; no file was left half-written\n")
        status = 128 + exc.number
    except KeyboardInterrupt:
        sys.stderr.write("pairfix: interrupted; no file was left half-written\n")
        status = 128 + signal.SIGINT
    except BrokenPipeError:
        # Python would complain again while flushing at exit: point stdout at nothing.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 128 + signal.SIGPIPE
    except MemoryError:
        # Out of memory past the read (a file is replaced only once written whole).
        sys.stderr.write("pairfix: out of memory; no file was left half-written\n")
        status = BAD
    sys.exit(status)


if __name__ == "__main__":
    entry_point()
