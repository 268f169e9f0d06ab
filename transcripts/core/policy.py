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
    is repaired (OpenMAIC, §1A A4.2). `native_for_agents` writes the agent's
    own interruption text instead of `synthetic_text` in a session file an
    agent wrote (`Transcript.agent`), so the resumed model reads what it would
    have read.
    """

    name: str
    actions: Mapping[FaultKind, Action] = field(default_factory=dict)
    synthetic_text: str | None = INTERRUPTED_TEXT
    replays_aborted: bool = False
    recovers_late_results: bool = True
    drops_interrupted_frames: bool = False
    description: str = ""
    native_for_agents: bool = False

    def action(self, kind: FaultKind) -> Action:
        """Return the action this policy takes on `kind` (flag when unlisted)."""
        return self.actions.get(kind, Action.FLAG)

    def row(self, kind: FaultKind) -> str:
        """Return the policy row for `kind` as recorded in plans and audit records."""
        return f"{self.name}: {kind} -> {self.action(kind)}"

    def text_for(self, native_text: str, agent: bool) -> str:
        """Return the text of a synthetic result in a session whose agent writes `native_text`."""
        if self.synthetic_text is None or (agent and self.native_for_agents):
            return native_text
        return self.synthetic_text


# The actions each fault kind can take (what `repair` knows how to do); `keep` and
# `flag` always, which yield no op.
ALLOWED: Mapping[FaultKind, frozenset[Action]] = MappingProxyType(
    {
        kind: frozenset({Action.KEEP, Action.FLAG, *extra})
        for kind, extra in {
            FaultKind.MISSING_RESULT: {Action.SYNTHESIZE, Action.DROP},
            FaultKind.PENDING_RESULT: {Action.SYNTHESIZE, Action.DROP},
            FaultKind.ORPHANED_RESULT: {Action.DROP},
            FaultKind.DUPLICATE_RESULT: {Action.KEEP_FIRST},
            FaultKind.DUPLICATE_CALL_ID: {Action.RENAME, Action.KEEP_FIRST},
            FaultKind.DISPLACED_RESULT: {Action.MOVE},
            FaultKind.MISORDERED_RESULTS: set(),
            FaultKind.RESULT_NOT_FIRST: {Action.MOVE},
            FaultKind.CONTENT_AFTER_CALL: {Action.MOVE, Action.DROP},
            FaultKind.ABORTED_FRAME: {Action.DROP},
            FaultKind.MALFORMED_CALL: {Action.DROP, Action.RENAME},
            FaultKind.MALFORMED_RECORD: {Action.DROP},
            FaultKind.EXISTING_SYNTHETIC: set(),
            FaultKind.ORPHANED_REASONING: {Action.DROP},
            FaultKind.PARENT_LOOP: {Action.MOVE},
        }.items()
    }
)


def refused(kind: FaultKind, action: Action) -> str | None:
    """Return why `kind` cannot take `action` (a sentence for a form), or None when it can."""
    if action in ALLOWED[kind]:
        return None
    can = ", ".join(sorted(str(a) for a in ALLOWED[kind]))
    return f"{kind} cannot take the action {action}; it can take {can}"


def _table(**actions: Action) -> Mapping[FaultKind, Action]:
    return MappingProxyType({FaultKind(kind): action for kind, action in actions.items()})


_COMMON = {
    "pending_result": Action.KEEP,
    "displaced_result": Action.MOVE,
    "duplicate_result": Action.KEEP_FIRST,
    "duplicate_call_id": Action.RENAME,
    "orphaned_result": Action.DROP,
    "result_not_first": Action.MOVE,
    "misordered_results": Action.FLAG,
    "content_after_call": Action.MOVE,
    "aborted_frame": Action.KEEP,
    "malformed_call": Action.DROP,
    "malformed_record": Action.FLAG,
    "existing_synthetic": Action.KEEP,
    "orphaned_reasoning": Action.DROP,
    "parent_loop": Action.MOVE,
}

PRESETS: Mapping[str, Policy] = MappingProxyType(
    {
        "synthesize": Policy(
            "synthesize",
            _table(**_COMMON, missing_result=Action.SYNTHESIZE),
            native_for_agents=True,
            description=(
                "Answer each orphaned call with a synthetic error result: in an agent's own "
                "session file the text that agent writes (Claude Code's interrupt text, Codex "
                "'aborted', OpenClaw's repair text), in a plain message list the generic "
                "interrupted receipt; move displaced results back; keep the first of "
                "duplicates and rename ids the provider refuses; split content after a call "
                "into its own message; drop orphaned results, lone reasoning items and "
                "malformed calls; leave calls of aborted frames alone (they are never sent); "
                "write the pi entry whose parent link closes a loop as its branch's root."
            ),
        ),
        "discard": Policy(
            "discard",
            _table(**{**_COMMON, "malformed_record": Action.DROP}, missing_result=Action.DROP),
            native_for_agents=True,
            description=(
                "Drop incomplete call/result pairs whole, never synthesize, and drop lines "
                "that are not JSON (kept in the audit record); otherwise as synthesize."
            ),
        ),
        "native": Policy(
            "native",
            _table(**_COMMON, missing_result=Action.SYNTHESIZE),
            synthetic_text=None,
            description=(
                "As synthesize, but every synthetic result carries the format's own "
                "interruption text, plain message lists included (Claude Code's interrupt "
                "text, Codex 'aborted', OpenClaw's repair text)."
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


def resolve(name: str, extra: Mapping[str, Policy] | None = None) -> Policy:
    """Return the policy called `name`: a preset, else one of `extra` (a workspace's own).

    Raises KeyError naming the policy when neither holds it.
    """
    if name in PRESETS:
        return PRESETS[name]
    if extra is not None and name in extra:
        return extra[name]
    raise KeyError(f"unknown policy {name!r}")


def custom(
    name: str, actions: Mapping[str, str], synthetic_text: str | None, description: str = ""
) -> Policy:
    """Return a workspace policy: {fault kind id: action id}, plus the synthetic text.

    Kinds not listed are flagged; an empty or None `synthetic_text` means the
    agent's own interruption text in an agent's session and the generic
    receipt elsewhere (as the default preset). Raises ValueError with one
    sentence per row a kind cannot take, or for unknown kinds and actions.
    """
    problems: list[str] = []
    table: dict[FaultKind, Action] = {}
    for kind_id, action_id in actions.items():
        try:
            kind, action = FaultKind(kind_id), Action(action_id)
        except ValueError:
            problems.append(f"unknown fault kind or action: {kind_id} -> {action_id}")
            continue
        why = refused(kind, action)
        if why is not None:
            problems.append(why)
        table[kind] = action
    if problems:
        raise ValueError("; ".join(problems))
    if synthetic_text:
        return Policy(name, MappingProxyType(table), synthetic_text, description=description)
    return Policy(name, MappingProxyType(table), native_for_agents=True, description=description)
