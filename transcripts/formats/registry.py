"""The registry of native formats: each registered once, chosen by how sure its sniff is.

Each entry of `REGISTERED` names one Format subclass as "module:Class"; its
id, label and sniffing live on the class. Sniffing asks every format of the
file's kind (JSON lines or one JSON document) for its confidence, 0.0 to 1.0
(`Format.sniff`, else `Format.sniff_loose`), and the highest wins; formats
that tie are ranked by their declared `priority`, never by their place here.
The model is pygments' lexer registry (`analyse_text`, `guess_lexer`).

Among the formats of one kind, none is surer of a file than a format of
higher priority that also claims it (Cline, SPECIFIC, outranks Anthropic,
LIKELY): the winner is the sure format of highest priority, which is what the
first-match list this registry replaced chose. A format that breaks this on
purpose says why beside its `priority`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import Any

from transcripts.formats.base import Format, MessageSniff

# One line per format; their order here means nothing.
REGISTERED = (
    "transcripts.formats.anthropic:Anthropic",
    "transcripts.formats.bedrock:Bedrock",
    "transcripts.formats.claude_code:ClaudeCode",
    "transcripts.formats.cline:Cline",
    "transcripts.formats.codex:Codex",
    "transcripts.formats.gemini:Gemini",
    "transcripts.formats.gemini:GeminiCheckpoint",
    "transcripts.formats.gemini_cli:GeminiCli",
    "transcripts.formats.gemini_cli:GeminiCliSession",
    "transcripts.formats.langchain:LangChain",
    "transcripts.formats.openai_chat:OpenAIChat",
    "transcripts.formats.openai_functions:OpenAIFunctions",
    "transcripts.formats.openclaw:OpenClaw",
    "transcripts.formats.openhands:OpenHands",
    "transcripts.formats.responses:Responses",
    "transcripts.formats.vercel_ai:VercelAI",
)


def _format_class(entry: str) -> type[Format]:
    """Return the Format subclass an entry "module:Class" names; raise ValueError if none."""
    module_name, _, class_name = entry.partition(":")
    found = getattr(importlib.import_module(module_name), class_name, None)
    if not (isinstance(found, type) and issubclass(found, Format) and found.id):
        raise ValueError(f"{entry!r} names no Format subclass with an id")
    return found


def build(entries: Iterable[str]) -> dict[str, Format]:
    """Return {format id: format} for `entries`, highest `priority` first.

    Priority order is the order menus list the formats in. Raises ValueError
    when two entries share an id or a priority (a tie nothing would break).
    """
    formats: dict[str, Format] = {}
    priorities: dict[int, str] = {}
    for entry in entries:
        fmt = _format_class(entry)()
        if fmt.id in formats:
            raise ValueError(f"format {fmt.id!r} is registered twice")
        if fmt.priority in priorities:
            raise ValueError(
                f"formats {priorities[fmt.priority]!r} and {fmt.id!r} share priority {fmt.priority}"
            )
        formats[fmt.id] = fmt
        priorities[fmt.priority] = fmt.id
    return dict(sorted(formats.items(), key=lambda item: -item[1].priority))


FORMATS: dict[str, Format] = build(REGISTERED)


def label(format_id: str) -> str:
    """Return the human name of a format id ("Unknown format" for anything else)."""
    fmt = FORMATS.get(format_id)
    return fmt.label if fmt is not None else "Unknown format"


def confidence(fmt: Format, sample: list[Any], filename: str) -> float:
    """Return how sure `fmt` is that `sample` is its format, 0.0 (not) to 1.0 (certain).

    `sample` is the first parsed lines of a JSONL file, or [the document's
    root]. The sure sniff's score, else the loose one's.
    """
    return fmt.sniff(sample, filename) or fmt.sniff_loose(sample, filename)


def sniff(
    sample: list[Any],
    filename: str,
    *,
    jsonl: bool,
    loose: bool = True,
    formats: Mapping[str, Format] | None = None,
) -> Format | None:
    """Return the format most sure of `sample` among the `jsonl` (or document) formats.

    Ties go to the higher `priority`. Loose sniffs are asked only when no sniff
    is sure, and `loose` is True: every sure score is above every loose one.
    None when no format claims the sample. `formats` defaults to the registry.
    """
    candidates = [f for f in (FORMATS if formats is None else formats).values() if f.jsonl == jsonl]
    scored = [(fmt.sniff(sample, filename), fmt) for fmt in candidates]
    if loose and not any(score for score, _ in scored):
        scored = [(fmt.sniff_loose(sample, filename), fmt) for fmt in candidates]
    return _surest(scored)


def _surest(scored: Iterable[tuple[float, Format]]) -> Format | None:
    """Return the format of the highest score above 0.0, the higher `priority` on a tie."""
    claimed = [(score, fmt.priority, fmt) for score, fmt in scored if score > 0]
    return max(claimed, key=lambda item: item[:2])[2] if claimed else None


class _Tally:
    """A MessageSniff's tests, told the messages one at a time."""

    def __init__(self, sniff: MessageSniff) -> None:
        self.sniff = sniff
        self.failed = False  # a test of `every` did not hold for some message
        self.some = [False] * len(sniff.some)
        self.dropped = False  # no longer told: it cannot change what `surest` says

    def score(self, seen: bool) -> float:
        sure = seen and not self.failed and all(self.some) and not self.dropped
        return self.sniff.score if sure else 0.0

    def certain(self, seen: bool) -> float:
        """Return the score this tally keeps whatever messages come next (else 0.0)."""
        return 0.0 if self.sniff.every else self.score(seen)


class DocumentSniff:
    """The registry's sniff of a JSON document whose message array is read an item at a time.

    `root` is the document with that array (`array`: None for the root
    itself, else the root's member holding it) still empty. After `see` of
    each of its items in order, `surest` and `confidence` answer as `sniff`
    and `confidence` answer of the whole document ([root], jsonl False),
    without the array ever held whole; before, of the items seen so far.
    """

    def __init__(
        self,
        root: Any,
        array: str | None,
        filename: str,
        formats: Mapping[str, Format] | None = None,
        keep: str | None = None,
    ) -> None:
        """`keep` names a format whose `score` and `confidence` will be asked (one chosen).

        The tests of any other format are dropped once it can no longer be
        the surest: once a sure sniff of a format ranked above it will hold
        whatever comes next (no test of `every` is left that could fail); a
        loose sniff, once any sure one will hold. Its `score` is then 0.0.
        """
        chosen = FORMATS if formats is None else formats
        self.formats = [f for f in chosen.values() if not f.jsonl]
        self.keep = keep
        self.seen = False
        self.scores: dict[tuple[str, bool], float | _Tally] = {}
        # The tests still open: (tally, test of `every`?, rank, test).
        self.open: list[tuple[_Tally, bool, int, Any]] = []
        for fmt in self.formats:
            for loose in (False, True):
                found = fmt.message_sniff(root, filename, loose)
                if isinstance(found, float):
                    self.scores[fmt.id, loose] = found
                elif found.array != array:
                    self.scores[fmt.id, loose] = found.run(found.messages(root))
                else:
                    tally = _Tally(found)
                    self.scores[fmt.id, loose] = tally
                    self.open += [(tally, True, k, t) for k, t in enumerate(found.every)]
                    self.open += [(tally, False, k, t) for k, t in enumerate(found.some)]
        self._drop()

    def _drop(self) -> None:
        """Drop the tests of the sniffs that can no longer be the surest (see `__init__`)."""
        held = [
            (found if isinstance(found, float) else found.certain(self.seen), fmt.priority)
            for fmt in self.formats
            for found in (self.scores[fmt.id, False],)
        ]
        best = max((item for item in held if item[0] > 0), default=None)
        if best is None:
            return
        for fmt in self.formats:
            if fmt.id == self.keep:
                continue
            for loose in (False, True):
                found = self.scores[fmt.id, loose]
                if not isinstance(found, _Tally):
                    continue
                if loose or (found.sniff.score, fmt.priority) < best:
                    found.dropped = True

    def see(self, message: Any) -> None:
        """Put the tests to the next item of the array."""
        self.seen = True
        settled = False
        for tally, every, rank, test in self.open:
            if tally.failed or tally.dropped:
                settled = True
            elif every:
                if not test(message):
                    tally.failed = settled = True
            elif test(message):
                tally.some[rank] = settled = True
        if settled:
            self._drop()
            self.open = [
                item
                for item in self.open
                if not (item[0].failed or item[0].dropped)
                and (item[1] or not item[0].some[item[2]])
            ]

    def score(self, fmt: Format, loose: bool) -> float:
        """Return `fmt`'s sniff (`loose`: its loose one) of the document."""
        found = self.scores[fmt.id, loose]
        return found if isinstance(found, float) else found.score(self.seen)

    def confidence(self, fmt: Format) -> float:
        """Return `confidence(fmt, [root], ...)` of the document."""
        return self.score(fmt, False) or self.score(fmt, True)

    def surest(self, loose: bool = True) -> Format | None:
        """Return `sniff([root], ..., jsonl=False, loose=loose)` of the document."""
        scored = [(self.score(fmt, False), fmt) for fmt in self.formats]
        if loose and not any(score for score, _ in scored):
            scored = [(self.score(fmt, True), fmt) for fmt in self.formats]
        return _surest(scored)
