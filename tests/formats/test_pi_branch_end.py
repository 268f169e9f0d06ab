"""pi/OpenClaw files with lines logged twice or out of order: one repair settles them.

pi loads a session into a Map by entry id, a later line with an id
replacing an earlier one, and builds the context from the file's last entry
up its `parentId` links (pi-coding-agent 0.73.1 session-manager.js
`_buildIndex`, `buildSessionContext`). Pairfix walks that branch too
(`Format.last_copy`), and a repair keeps that branch's end the file's last
line (`core.layout.leaf_last`), so `check` on the repaired file and
`preview` (what pi sends, transcripts/replay/openclaw.py) agree, and
repairing it again changes nothing. Fixtures are in pi's own layout
(tests/formats/pi_branch/), minimised from fuzzed files; tests/cli/test_fast_fix.py
streams them too. They are not among the fixtures tests/formats/test_fuzz.py
mutates: a mutation taking the id off the call line of
openclaw_result_before_call_logged_twice.jsonl leaves no record of its live
branch once repaired, the known gap of a broken parent link (README), which
the mutation tests then report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from transcripts.core.branch import live_path
from transcripts.core.validate import validate
from transcripts.engine import PRESETS, FileSource, analyze
from transcripts.formats import load
from transcripts.replay import preview

FIXTURES = Path(__file__).resolve().parent / "pi_branch"

# fixture -> [(fault kind, tool call id, record)] found in it as written
CASES = {
    # A result parented on its call's tool call id, that line logged twice: pi starts
    # from the second copy.
    "openclaw_result_parented_on_call_id_logged_twice.jsonl": [
        ("displaced_result", "toolu_01Cfgxxxxxxxxxxxxxxxxxxx", 4),
    ],
    # Such a result written last, after a later call of another branch.
    "openclaw_result_parented_on_call_id_at_end.jsonl": [
        ("displaced_result", "toolu_01Xy7Zw6Vu5Ts4Rq3Po2Nm1L", 6),
    ],
    # A result line written before its call, and again after it (the copy pi keeps).
    "openclaw_result_before_call_logged_twice.jsonl": [
        ("missing_result", f"toolu_01A0{k}xxxxxxxxxxxxxxxxxxx", 3) for k in range(2, 6)
    ],
    # A result written after a user message that came in while its call ran, the line
    # logged twice: pi starts from the second copy.
    "openclaw_displaced_result_logged_twice.jsonl": [
        ("displaced_result", "toolu_01Ls0xxxxxxxxxxxxxxxxxxx", 5),
    ],
    # A file whose only entry's parent is not in it (its head cut off): pi walks up to it
    # all the same, so the synthetic results are chained from it.
    "openclaw_calls_parent_missing.jsonl": [
        ("missing_result", f"toolu_01Rd{k}xxxxxxxxxxxxxxxxxxx", 1) for k in range(2)
    ],
    # The last line's parent is written after it; the line before is another branch's.
    "openclaw_leaf_written_before_its_parent.jsonl": [
        ("displaced_result", "call_syn_cat_02", 6),
    ],
    # Results written before their call's message, a model_change between the call and
    # them: a repair hung its synthetic results so that the parents ran in a loop.
    "openclaw_results_before_call_after_model_change.jsonl": [
        ("missing_result", f"toolu_01A0{k}xxxxxxxxxxxxxxxxxxx", 2) for k in range(2, 6)
    ],
}


def _read(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _ids(data: bytes) -> list[str]:
    return [json.loads(line).get("id") for line in data.splitlines()]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_faults_are_those_on_the_branch_pi_sends(name: str) -> None:
    data = _read(name)
    result = analyze(data, name)
    assert [(str(f.kind), f.tool_call_id, f.record) for f in result.faults] == CASES[name]
    # Refused as written where `check` says so (pi itself answers a missing result).
    refused = [f for f in result.faults if f.error and f.kind != "missing_result"]
    assert bool(refused) == bool(preview(result.transcript).violations)


def test_a_uid_logged_twice_stands_for_its_last_line_as_in_pis_index() -> None:
    """pi's Map by id keeps the last line of an id; the first copy is on no branch."""
    name = "openclaw_result_before_call_logged_twice.jsonl"
    transcript = load(_read(name), name)
    assert transcript.last_copy
    assert live_path(transcript) == [1, 3, 4, 5]
    # A file read whole and one streamed walk the same branch.
    with FileSource(FIXTURES / name) as source:
        assert live_path(load(source, name, summaries=False)) == [1, 3, 4, 5]


@pytest.mark.parametrize("policy", sorted(PRESETS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_one_repair_settles_it_and_check_agrees_with_what_pi_sends(name: str, policy: str) -> None:
    data = _read(name)
    result = analyze(data, name, policy)
    again = analyze(result.repaired, name, policy)
    assert not again.plan, again.plan.ops
    assert again.repaired == result.repaired
    refused = [f for f in again.faults if f.error]
    assert bool(refused) == bool(preview(again.transcript).violations)
    if result.plan:
        assert not refused
        assert validate(load(result.repaired, name)) == []


def test_the_repair_keeps_the_branch_end_last_and_every_line() -> None:
    """Moved to its call, a result that ended the branch leaves the line now ending it last."""
    name = "openclaw_leaf_written_before_its_parent.jsonl"
    data = _read(name)
    repaired = analyze(data, name, "native").repaired
    assert _ids(repaired)[1:] == [f"e000000{k}" for k in (1, 2, 3, 5, 6, 4)]
    links = {e["id"]: e["parentId"] for e in map(json.loads, repaired.splitlines()[1:])}
    assert links["e0000005"] == "e0000003"
    assert links["e0000004"] == "e0000005"
    assert [m.role for m in preview(load(repaired, name)).messages] == [
        "user",
        "assistant",
        "user",
        "user",
    ]


def test_a_relinked_result_logged_twice_gets_the_link_pi_reads() -> None:
    """pi reads the last copy's parentId: that is the one the repair writes.

    The first copy, on no branch pi reads, goes (as any copy of a line the
    repair changes: `repair._relogged`).
    """
    name = "openclaw_result_parented_on_call_id_logged_twice.jsonl"
    data = _read(name)
    repaired = analyze(data, name, "native").repaired
    lines = data.splitlines()
    assert repaired.splitlines() == [
        *lines[:3],
        lines[4].replace(b'"parentId":"toolu_01Cfgxxxxxxxxxxxxxxxxxxx"', b'"parentId":"c0000002"'),
    ]


def test_a_moved_result_logged_twice_takes_its_other_copy_with_it() -> None:
    """The copy pi keeps (the last) moves to its call; the first, left, would make a cycle.

    Left where it was, the first copy still parented the moved result's child
    on a line of that id, and pi, reading the last copy of each id, walked
    f0000003 -> f0000004 -> f0000003 (its `getBranch` has no cycle guard).
    """
    name = "openclaw_displaced_result_logged_twice.jsonl"
    repaired = analyze(_read(name), name, "native").repaired
    assert _ids(repaired)[1:] == ["f0000001", "f0000002", "f0000004", "f0000003"]
    links = {e["id"]: e["parentId"] for e in map(json.loads, repaired.splitlines()[1:])}
    assert links == {
        "f0000001": None,
        "f0000002": "f0000001",
        "f0000004": "f0000002",
        "f0000003": "f0000004",
    }
    sent = preview(load(repaired, name))
    assert [m.role for m in sent.messages] == ["user", "assistant", "user", "user"]
    assert sent.valid


def test_synthetic_results_are_chained_from_an_entry_whose_parent_is_missing() -> None:
    """No link of the file names an entry of it; pi still walks from its last entry.

    Read as a file without links, the repair wrote each synthetic result with
    `parentId: null`: pi's leaf was then the last of them, and it sent that
    lone result (a 400) where the file as written was accepted.
    """
    name = "openclaw_calls_parent_missing.jsonl"
    data = _read(name)
    assert load(data, name).tree
    repaired = analyze(data, name, "native").repaired
    entries = [json.loads(line) for line in repaired.splitlines()[1:]]
    assert entries[0]["parentId"] == "g0000001"  # as written
    assert [e["parentId"] for e in entries[1:]] == [e["id"] for e in entries[:-1]]
    sent = preview(load(repaired, name))
    assert [m.role for m in sent.messages] == ["assistant", "user"]
    assert sent.valid


def test_a_last_result_whose_parent_is_missing_is_what_pi_sends_alone() -> None:
    """pi's walk from a result whose parent is not in the file sends that result alone.

    `check` read such a file in file order, found the result after its call
    and said it was healthy, while pi sends the orphan (a 400).
    """
    name = "openclaw_result_parent_missing.jsonl"
    result = analyze(_read(name), name)
    assert [(str(f.kind), f.record) for f in result.faults] == [("orphaned_result", 2)]
    assert preview(result.transcript).violations


@pytest.mark.parametrize("policy", ["synthesize", "native", "discard"])
def test_a_repair_writes_no_parent_loop(policy: str) -> None:
    data = _read("openclaw_results_before_call_after_model_change.jsonl")
    repaired = analyze(data, "pi.jsonl", policy, grace=0).repaired
    entries = [json.loads(line) for line in repaired.splitlines()]
    parent = {e.get("id"): e.get("parentId") for e in entries}
    # pi's getBranch walks from the last entry up parentId with no guard against a loop.
    seen, at = set(), entries[-1]["id"]
    while at is not None and at in parent:
        assert at not in seen, f"a parent loop at {at}"
        seen.add(at)
        at = parent[at]
    assert "b0000001" in seen  # the user's prompt is on the branch pi sends
