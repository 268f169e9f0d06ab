"""A unified diff of a session's bytes before and after a repair, each line cut to be read.

Shared by `pairfix fix --dry-run` and a dry-run job's sample of diffs.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator


def diff_lines(before: bytes, after: bytes, name: str, line_chars: int) -> Iterator[str]:
    """Yield the unified diff of `before` and `after` (one line of context), lines cut.

    The bytes are read as UTF-8 (a bad byte shown as U+FFFD). A line longer
    than `line_chars` is cut as `cut_line` cuts it, against the line it
    replaces or becomes, so the part that changed is in what is shown.
    """
    diff = list(
        difflib.unified_diff(
            before.decode("utf-8", "replace").splitlines(),
            after.decode("utf-8", "replace").splitlines(),
            f"{name} (before)",
            f"{name} (after)",
            n=1,
            lineterm="",
        )
    )
    partners: dict[int, str] = {}  # a changed line's index -> the line it replaces or becomes
    k = 0
    while k < len(diff):
        minus = k
        while k < len(diff) and diff[k][:1] == "-" and not diff[k].startswith("---"):
            k += 1
        plus = k
        while k < len(diff) and diff[k][:1] == "+" and not diff[k].startswith("+++"):
            k += 1
        for j in range(min(plus - minus, k - plus)):  # the i-th "-" line became the i-th "+"
            partners[minus + j], partners[plus + j] = diff[plus + j], diff[minus + j]
        if k == minus:
            k += 1
    for k, line in enumerate(diff):
        yield cut_line(line, partners.get(k), line_chars)


def cut_line(line: str, partner: str | None, line_chars: int) -> str:
    """Return a diff line cut to about `line_chars`, showing where it differs from `partner`.

    A JSON line changed by a repair (a block dropped, a result added) differs
    far past its start: the cut keeps its first characters, then the part
    from just before the first character where the "-" and "+" lines differ.
    """
    if len(line) <= line_chars:
        return line
    head = line_chars // 4
    differs = len(os.path.commonprefix([line[1:], partner[1:]])) + 1 if partner else 0
    if differs <= line_chars - head:
        return line[:line_chars] + "…"
    start = differs - head
    end = start + line_chars - head
    return line[:head] + "…" + line[start:end] + ("…" if end < len(line) else "")
