"""Policies: for each fault kind, one action. Named presets.

The default synthetic payload is OpenMAIC's interrupted receipt
(integrity-semantics.md §1A, A5): a JSON text with keys ok, error, message.
The `openmaic` and `openclaw` presets reproduce those systems' read-time
repairs row by row of the decision table in integrity-semantics.md §1D, so a
user can see what each would have done to a session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from transcripts.core.markers import OPENCLAW_SENTENCE
from transcripts.core.model import Action, FaultKind

INTERRUPTED_TEXT = (
    '{"ok":false,"error":"interrupted",'
    '"message":"This tool call was interrupted before a result was recorded."}'
)

DEFAULT_POLICY = "synthesize"


@dataclass(frozen=True, slots=True)
class Policy:
    """A table: fault kind -> action. Kinds not listed are only flagged.

    `synthetic_text` is the text of synthesized error results; None means the
    session's own agent's text (`Transcript.native_text`). `replays_aborted`
    says the target runtime sends aborted or errored assistant frames (OpenMAIC
    does; pi, OpenClaw and Claude Code drop them), so their calls need results.
    `recovers_late_results` moves a result that lies beyond the next assistant
    message back to its call; without it the call gets a synthetic result and
    the late one is dropped (OpenClaw before PR #88588). `drops_interrupted_frames`
    removes interrupted assistant frames without calls whenever anything else
    is repaired (OpenMAIC, §1A A4.2).
    """

    name: str
    actions: Mapping[FaultKind, Action] = field(default_factory=dict)
    synthetic_text: str | None = INTERRUPTED_TEXT
    replays_aborted: bool = False
    recovers_late_results: bool = True
    drops_interrupted_frames: bool = False
    description: str = ""

    def action(self, kind: FaultKind) -> Action:
        """Return the action this policy takes on `kind` (flag when unlisted)."""
        return self.actions.get(kind, Action.FLAG)

    def row(self, kind: FaultKind) -> str:
        """Return the policy row for `kind` as recorded in plans and audit records."""
        return f"{self.name}: {kind} -> {self.action(kind)}"


def _table(**actions: Action) -> Mapping[FaultKind, Action]:
    return MappingProxyType({FaultKind(kind): action for kind, action in actions.items()})


_COMMON = {
    "pending_result": Action.KEEP,
    "displaced_result": Action.MOVE,
    "duplicate_result": Action.KEEP_FIRST,
    "duplicate_call_id": Action.KEEP_FIRST,
    "orphaned_result": Action.DROP,
    "result_not_first": Action.MOVE,
    "misordered_results": Action.FLAG,
    "content_after_call": Action.FLAG,
    "aborted_frame": Action.KEEP,
    "malformed_call": Action.DROP,
    "malformed_record": Action.FLAG,
    "existing_synthetic": Action.KEEP,
}

PRESETS: Mapping[str, Policy] = MappingProxyType(
    {
        "synthesize": Policy(
            "synthesize",
            _table(**_COMMON, missing_result=Action.SYNTHESIZE),
            description=(
                "Answer each orphaned call with a synthetic interrupted error result; move "
                "displaced results back; keep the first of duplicates; drop orphaned results "
                "and malformed calls; leave calls of aborted frames alone (they are never sent)."
            ),
        ),
        "discard": Policy(
            "discard",
            _table(**_COMMON, missing_result=Action.DROP),
            description=(
                "Drop incomplete call/result pairs whole, never synthesize; otherwise as "
                "synthesize."
            ),
        ),
        "native": Policy(
            "native",
            _table(**_COMMON, missing_result=Action.SYNTHESIZE),
            synthetic_text=None,
            description=(
                "As synthesize, but each synthetic result carries the agent's own interruption "
                "text (Claude Code's interrupt text, Codex 'aborted', OpenClaw's repair text)."
            ),
        ),
        # OpenMAIC repairOrphanedToolCalls (§1A): results of unknown calls stay where they
        # are, aborted frames with calls are replayed and their calls answered.
        "openmaic": Policy(
            "openmaic",
            _table(
                missing_result=Action.SYNTHESIZE,
                pending_result=Action.SYNTHESIZE,
                displaced_result=Action.MOVE,
                duplicate_result=Action.KEEP_FIRST,
                orphaned_result=Action.KEEP,
                result_not_first=Action.MOVE,
                aborted_frame=Action.KEEP,
            ),
            replays_aborted=True,
            drops_interrupted_frames=True,
            description=(
                "What OpenMAIC's read-time repair does: synthesize its interrupted receipt, "
                "move late results up, keep the first duplicate, leave unknown results in place, "
                "answer the calls of aborted frames."
            ),
        ),
        # OpenClaw repairToolUseResultPairing as of February 2026 (§1B B-1, §1D).
        "openclaw": Policy(
            "openclaw",
            _table(
                missing_result=Action.SYNTHESIZE,
                displaced_result=Action.MOVE,
                duplicate_result=Action.KEEP_FIRST,
                orphaned_result=Action.DROP,
                result_not_first=Action.MOVE,
                aborted_frame=Action.KEEP,
                malformed_call=Action.DROP,
            ),
            synthetic_text="[openclaw] " + OPENCLAW_SENTENCE,
            recovers_late_results=False,
            description=(
                "What OpenClaw's repair does: synthesize its [openclaw] repair text; move a "
                "result back only from before the next assistant message (a later one is "
                "dropped and its call synthesized); drop duplicates and orphans; skip aborted "
                "frames."
            ),
        ),
    }
)
