"""Turn faults and a policy into a Plan of ops.

A pure function of the transcript and the policy: no clock, no randomness, no
I/O. Repairing a repaired transcript gives an empty plan (DESIGN.md contract 4).
"""

from __future__ import annotations

from transcripts.core.detect import Pairing, Turn, pair
from transcripts.core.model import Action, Fault, FaultKind, Op, OpKind, Plan, Transcript
from transcripts.core.policy import Policy


def _anchor(turn: Turn) -> int:
    """Return the record after which a turn's missing or moved results go."""
    return turn.run[-1] if turn.run else turn.records[-1]


def repair(
    transcript: Transcript, faults: list[Fault], policy: Policy, pairing: Pairing | None = None
) -> Plan:
    """Return the ops that mend `faults` under `policy`, in fault order.

    `pairing` is `detect.pair(transcript)` when the caller already has it.
    Actions a kind does not support (and `keep`/`flag`) yield no op.
    """
    if pairing is None:
        pairing = pair(transcript)
    calls = {(call.id, call.record, call.block): call for call in pairing.turn_of}
    owner = {(res.record, res.block): call for call, res in pairing.answer.items()}
    ops: list[Op] = []
    for fault in faults:
        action = policy.action(fault.kind)
        row = policy.row(fault.kind)
        if fault.kind is FaultKind.MISSING_RESULT:
            call = calls.get((fault.tool_call_id or "", fault.record, fault.block or 0))
            if call is None:
                continue
            if action is Action.SYNTHESIZE:
                ops.append(
                    Op(
                        OpKind.INSERT_RESULT,
                        fault,
                        row,
                        anchor=_anchor(pairing.turn_of[call]),
                        call=call,
                        text=policy.synthetic_text,
                    )
                )
            elif action is Action.DROP:
                ops.append(Op(OpKind.DROP_CALL, fault, row, call.record, call.block, call=call))
        elif fault.kind is FaultKind.DISPLACED_RESULT and action is Action.MOVE:
            call = owner[(fault.record, fault.block or 0)]
            ops.append(
                Op(
                    OpKind.MOVE_RESULT,
                    fault,
                    row,
                    fault.record,
                    fault.block,
                    anchor=_anchor(pairing.turn_of[call]),
                    call=call,
                )
            )
        elif (
            fault.kind is FaultKind.DUPLICATE_RESULT
            and action is Action.KEEP_FIRST
            or fault.kind is FaultKind.ORPHANED_RESULT
            and action is Action.DROP
        ):
            ops.append(Op(OpKind.DROP_RESULT, fault, row, fault.record, fault.block))
    return Plan(policy=policy.name, ops=tuple(ops))
