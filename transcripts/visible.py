"""Spell out the characters of untrusted text that would act on a terminal or reorder a line.

Pure Python (no Django): shared by the web pages' `visible` filter
(`transcripts.templatetags.faults`) and the `pairfix` command's human output
(`transcripts.cli`). Transcript content and file names are untrusted; shown
raw, an escape sequence in a tool call id can clear a terminal or retitle it
(ECMA-48 CSI/OSC), and a bidirectional control can make `gnp.exe` read as
`exe.png` (Unicode TR #36, "Bidirectional Text Spoofing").
"""

from __future__ import annotations

import re
import unicodedata

# Bidirectional controls (Unicode UAX #9): the ones that reorder the text around them.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NOT_PRINTABLE_ASCII = re.compile("[^\x20-\x7e]")
# Control (Cc), format (Cf, bidi controls among them), surrogate (Cs) and line/paragraph
# separators (Zl, Zp): each changes how a terminal or a line shows what follows it.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _code_point(char: str) -> str:
    return f"[U+{ord(char):04X}]"


def spell_bidi(text: str) -> str:
    """Return `text` with its bidirectional controls spelled out, e.g. "[U+202E]"."""
    return _BIDI.sub(lambda m: _code_point(m.group()), text)


# What a page shows nothing for (C0 and C1 controls and DEL, tab and line ends
# aside), what reorders the line around it, and lone surrogates, which a UTF-8
# page cannot hold (JSON's `\\ud83d`, half of an emoji a Node program cut).
_UNSEEN = re.compile("[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f\ud800-\udfff]|" + _BIDI.pattern)


def page_text(text: str) -> str:
    """Return `text` as a web page should show it: nothing in it hidden or reordering.

    Bidirectional controls become "[U+202E]"; C0 and C1 controls and DEL
    (tab, newline and carriage return kept, which a `<pre>` shows) become
    `\\x1b`-style escapes, so an id holding an escape or a NUL does not pass
    for another id. A lone surrogate becomes "[U+D83D]" (`\\xff` for the bytes
    of a non-UTF-8 file name, as `terminal_text` spells them).
    """
    if text.isascii() and text.isprintable():
        return text
    return _UNSEEN.sub(_spell, text)


def _spell(match: re.Match[str]) -> str:
    char = match.group()
    point = ord(char)
    if point < 0xA0:  # C0, DEL and C1 controls, as Python spells them
        return f"\\x{point:02x}"
    if 0xDC80 <= point <= 0xDCFF:  # a byte of a non-UTF-8 file name (os.fsdecode)
        return f"\\x{point - 0xDC00:02x}"
    if unicodedata.category(char) in _HIDDEN:
        return _code_point(char)
    return char


def terminal_text(text: str) -> str:
    """Return `text` safe to print on one terminal line: nothing in it acts on the terminal.

    C0 and C1 controls and DEL (newline and tab included) become `\\x1b`-style
    escapes; the bytes of a non-UTF-8 file name that `os.fsdecode` turned into
    lone surrogates become `\\xff`; other surrogates, format characters
    (bidirectional controls, zero-width characters) and line or paragraph
    separators become "[U+202E]". Printable ASCII, backslash included, is
    kept as it is, so the result of `terminal_text` maps to itself.
    """
    return _NOT_PRINTABLE_ASCII.sub(_spell, text)


def surrogate_free(text: str) -> str:
    """Return `text` with the lone surrogates of a non-UTF-8 file name spelled `\\xff`.

    Everything else is kept: a JSON encoder escapes controls itself but
    cannot encode a lone surrogate.
    """
    if text.isascii():
        return text
    return re.sub("[\ud800-\udfff]", _spell, text)
