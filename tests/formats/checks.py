"""Checks the per-format tests share: a repair is valid, final and splices what it keeps."""

from __future__ import annotations

from transcripts.core.validate import validate
from transcripts.engine import Analysis, analyze
from transcripts.formats import load


def repaired(
    data: bytes, name: str, policy: str = "synthesize", same_format: bool = True
) -> Analysis:
    """Return the analysis of `data`, having checked its repair.

    The repaired bytes break no pairing rule of the provider, are repaired to
    themselves, and hold every record no op touched byte for byte, in the
    original order. They sniff as the same format unless `same_format` is
    False: a repair that drops the only calls of a file may leave nothing
    that tells its format from plain chat messages.
    """
    result = analyze(data, name, policy)
    assert result.error is None, result.error
    sniffed = load(result.repaired, name)
    assert validate(sniffed) == []
    if same_format:
        assert sniffed.format == result.format
    out = load(result.repaired, name, result.format)
    assert validate(out) == []
    again = analyze(result.repaired, name, policy, result.format)
    assert not again.plan
    assert again.repaired == result.repaired
    raw = load(data, name)
    touched = {i for op in result.plan.ops for i in (op.record, op.target) if i is not None}
    kept = [data[r.start : r.end] for r in raw.records if r.index not in touched]
    copies = iter(result.repaired[r.start : r.end] for r in out.records)
    # Each kept record is found in the output after the one before it.
    assert all(any(copy == record for copy in copies) for record in kept)
    return result


def faults(result: Analysis) -> list[tuple[str, str | None, int]]:
    """Return (kind, tool call id, record index) of each fault found."""
    return [(str(f.kind), f.tool_call_id, f.record) for f in result.faults]
