"""The faults a repair leaves, found from the plan instead of by reading the repaired file.

A bulk job stores the new head's fault counts with every revision it writes.
Reading the repaired file again costs as much as the first reading; for the
plans this module can account for, the answer follows from the plan: the
faults it mends are gone, the results it writes are counted for what they are
(a synthetic result is `existing_synthetic`), and nothing else changes.
`repaired_faults` returns None for every other plan, and the caller reads the
repaired file (tests/core/test_outcome.py holds both ways equal).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable

from transcripts.core.markers import synthetic_marker
from transcripts.core.model import Fault, FaultKind, Op, OpKind, Plan, Record, Role

# Ops that only add, move, drop or reorder tool results: the calls, the assistant
# messages and so the turns stay as they were. Dropping a call or a record may
# merge turns or change what the format reads the provider from.
ACCOUNTED_OPS = frozenset(
    {OpKind.INSERT_RESULT, OpKind.MOVE_RESULT, OpKind.DROP_RESULT, OpKind.RESULTS_FIRST}
)
# Faults a plan leaves as they are, which no result added or moved elsewhere can change.
LEFT_ALONE = frozenset({FaultKind.EXISTING_SYNTHETIC, FaultKind.MALFORMED_RECORD})


def repaired_faults(
    faults: Iterable[Fault],
    plan: Plan,
    replaced: Iterable[int],
    records: Iterable[Record],
    placed: Collection[Op],
) -> Counter[FaultKind] | None:
    """Return {fault kind: count} of the transcript `plan` repairs, or None when it can't tell.

    `faults` are the transcript's faults (`detect`, not live), `plan` their
    repair; `replaced` are the raw indexes of the records the repaired file
    drops or writes with other blocks, `records` the records it writes new or
    with other blocks, classified as reading the file classifies them, and
    `placed` the insert and move ops whose result it holds (`formats.rewrite`
    gives all three). It can tell when every op is in ACCOUNTED_OPS, every
    insert and move is placed, and every fault is either mended by an op or
    of a kind in LEFT_ALONE: then a fault in a record that stays is still
    there, and each result of a written record that an earlier repair
    synthesized is one `existing_synthetic` (as `detect` reports it).
    """
    for op in plan.ops:
        if op.kind not in ACCOUNTED_OPS:
            return None
        # An insert into a record the plan drops whole is lost: its call stays unanswered.
        if op.kind in (OpKind.INSERT_RESULT, OpKind.MOVE_RESULT) and op not in placed:
            return None
    mended = {op.fault for op in plan.ops}
    gone = set(replaced)
    counts: Counter[FaultKind] = Counter()
    for fault in faults:
        if fault in mended:
            continue
        if fault.kind not in LEFT_ALONE:
            return None
        if fault.record not in gone:
            counts[fault.kind] += 1
    for record in records:
        if record.role is Role.META:
            continue
        counts[FaultKind.EXISTING_SYNTHETIC] += sum(
            synthetic_marker(result.text) is not None for result in record.results
        )
    return +counts
