"""Policies: for each fault kind, one action. Named presets.

The default synthetic payload is OpenMAIC's interrupted receipt
(integrity-semantics.md §1A, A5): a JSON text with keys ok, error, message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from transcripts.core.model import Action, FaultKind

INTERRUPTED_TEXT = (
    '{"ok":false,"error":"interrupted",'
    '"message":"This tool call was interrupted before a result was recorded."}'
)

DEFAULT_POLICY = "synthesize"


@dataclass(frozen=True, slots=True)
class Policy:
    """A table: fault kind -> action. Kinds not listed are only flagged.

    `synthetic_text` is the text of synthesized error results.
    """

    name: str
    actions: Mapping[FaultKind, Action] = field(default_factory=dict)
    synthetic_text: str = INTERRUPTED_TEXT
    description: str = ""

    def action(self, kind: FaultKind) -> Action:
        """Return the action this policy takes on `kind` (flag when unlisted)."""
        return self.actions.get(kind, Action.FLAG)

    def row(self, kind: FaultKind) -> str:
        """Return the policy row for `kind` as recorded in plans and audit records."""
        return f"{self.name}: {kind} -> {self.action(kind)}"


def _table(**actions: Action) -> Mapping[FaultKind, Action]:
    return MappingProxyType({FaultKind(kind): action for kind, action in actions.items()})


PRESETS: Mapping[str, Policy] = MappingProxyType(
    {
        "synthesize": Policy(
            "synthesize",
            _table(
                missing_result=Action.SYNTHESIZE,
                displaced_result=Action.MOVE,
                duplicate_result=Action.KEEP_FIRST,
                orphaned_result=Action.DROP,
            ),
            description=(
                "Answer each orphaned call with a synthetic interrupted error result; move "
                "displaced results back; keep the first of duplicates; drop orphaned results."
            ),
        ),
        "discard": Policy(
            "discard",
            _table(
                missing_result=Action.DROP,
                displaced_result=Action.MOVE,
                duplicate_result=Action.KEEP_FIRST,
                orphaned_result=Action.DROP,
            ),
            description=(
                "Drop incomplete call/result pairs whole, never synthesize; move displaced "
                "results back; keep the first of duplicates; drop orphaned results."
            ),
        ),
    }
)
