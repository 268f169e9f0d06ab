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

import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.formats.test_fuzz import fuzz
from transcripts.core.branch import live_path
from transcripts.core.validate import validate
from transcripts.engine import PRESETS, FileSource, analyze
from transcripts.formats import load, openclaw
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
    # The last line is a result whose parentId names no entry: pi sends it alone.
    "openclaw_result_parent_missing.jsonl": [
        ("displaced_result", "toolu_01Cfgxxxxxxxxxxxxxxxxxxx", 2),
    ],
    # Such a result written last, after a user message and a reply that came in while
    # its call ran.
    "openclaw_result_parent_missing_after_later_turns.jsonl": [
        ("displaced_result", "toolu_01Pm5xxxxxxxxxxxxxxxxxxx", 5),
    ],
    # A result whose parentId is null, after a user message, with the rest of the
    # session hanging off it: pi's walk from the last entry stops at it.
    "openclaw_result_parent_null_mid_branch.jsonl": [
        ("displaced_result", "toolu_01Nu6xxxxxxxxxxxxxxxxxxx", 4),
    ],
    # Two results of one message, one parented on no entry, the last one on null.
    "openclaw_results_parent_missing_in_a_row.jsonl": [
        ("displaced_result", f"toolu_01Tw9{k}xxxxxxxxxxxxxxxxxx", k == "b" and 4 or 3) for k in "ab"
    ],
    # A last result whose parent names no entry, for a call another result answered.
    "openclaw_result_parent_missing_call_answered.jsonl": [
        ("orphaned_result", "toolu_01Dp7xxxxxxxxxxxxxxxxxxx", 5),
    ],
    # A last result whose parent names no entry, for a call on a branch pi left.
    "openclaw_result_parent_missing_call_off_branch.jsonl": [
        ("orphaned_result", "toolu_01Ab8xxxxxxxxxxxxxxxxxxx", 5),
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


def _links(data: bytes) -> list[tuple[str, str | None]]:
    """Return (id, parentId) of each entry of a pi file, its header left out."""
    return [(e["id"], e["parentId"]) for e in map(json.loads, data.splitlines()[1:])]


def _settled(data: bytes, name: str) -> bytes:
    """Return the file one `fix` writes, after checking that a second changes nothing."""
    result = analyze(data, name, grace=0)
    again = analyze(result.repaired, name, grace=0)
    assert (again.faults, again.plan.ops, again.repaired) == ([], (), result.repaired)
    return result.repaired


def test_a_last_result_whose_parent_is_missing_is_put_under_its_call() -> None:
    """pi's walk from a result whose parent is not in the file sends that result alone.

    `check` read such a file in file order, found the result after its call
    and said it was healthy, while pi sends the orphan (a 400). Reported as
    an orphan, it was dropped and the tool's output lost, and a second
    repair answered the call: it is a displaced result, parented on its call.
    """
    name = "openclaw_result_parent_missing.jsonl"
    data = _read(name)
    result = analyze(data, name, grace=0)
    assert [(str(f.kind), f.record) for f in result.faults] == [("displaced_result", 2)]
    assert result.faults[0].detail == (
        "its parentId h0000009 names no entry of the file, not the call's entry (record 1): "
        "pi's branch stops here and sends nothing before it"
    )
    assert preview(result.transcript).violations
    repaired = _settled(data, name)
    assert _links(repaired) == [("h0000002", None), ("h0000003", "h0000002")]
    assert repaired.splitlines()[2] == data.splitlines()[2].replace(b"h0000009", b"h0000002")
    sent = preview(load(repaired, name))
    assert [(m.role, m.calls, m.results) for m in sent.messages] == [
        ("assistant", ("toolu_01Cfgxxxxxxxxxxxxxxxxxxx",), ()),
        ("user", (), ("toolu_01Cfgxxxxxxxxxxxxxxxxxxx",)),
    ]
    assert sent.valid


def test_a_lost_last_result_goes_under_its_call_and_the_later_turns_stay_on_the_branch() -> None:
    """The result moves to its call; the turns written while it ran follow it, the last still last.

    Only re-pointed at its call but left as the last line, the result was
    the leaf pi resumes from: the user message and the reply after the call
    went unsent, and `check` said healthy (0d285fb, reverted).
    """
    name = "openclaw_result_parent_missing_after_later_turns.jsonl"
    data = _read(name)
    assert [m.role for m in preview(load(data, name)).messages] == ["user"]  # the orphan alone
    repaired = _settled(data, name)
    assert _links(repaired) == [
        ("j0000001", None),
        ("j0000002", "j0000001"),
        ("j0000005", "j0000002"),  # the result, under its call
        ("j0000003", "j0000005"),  # the line that followed the call, now under the result
        ("j0000004", "j0000003"),  # the last on that branch stays last: pi resumes it
    ]
    assert (
        sorted(repaired.splitlines()[1:])
        == sorted(  # every line kept
            line.replace(b'"parentId":"j0000009"', b'"parentId":"j0000002"').replace(
                b'"id":"j0000003","parentId":"j0000002"', b'"id":"j0000003","parentId":"j0000005"'
            )
            for line in data.splitlines()[1:]
        )
    )
    sent = preview(load(repaired, name))
    call = "toolu_01Pm5xxxxxxxxxxxxxxxxxxx"
    assert [(m.role, m.texts, m.calls, m.results) for m in sent.messages] == [
        ("user", ("What port does the server use?",), (), ()),
        ("assistant", (), (call,), ()),
        ("user", (), (), (call,)),  # the result answering its call
        ("user", ("Also check the log level.",), (), ()),
        ("assistant", ("I will, once the read returns.",), (), ()),
    ]
    assert sent.valid


def test_a_result_with_a_null_parent_mid_branch_moves_to_its_call_and_the_chain_stays_one() -> None:
    """The result's child hangs off the entry before the result's old place; nothing dropped."""
    name = "openclaw_result_parent_null_mid_branch.jsonl"
    data = _read(name)
    assert load(data, name).tree
    repaired = _settled(data, name)
    assert _links(repaired) == [
        ("k0000001", None),
        ("k0000002", "k0000001"),
        ("k0000004", "k0000002"),
        ("k0000003", "k0000004"),
        ("k0000005", "k0000003"),  # it followed the result, now the entry before its old place
        ("k0000006", "k0000005"),
    ]
    sent = preview(load(repaired, name))
    roles = ["user", "assistant", "user", "user", "assistant", "user"]
    assert [m.role for m in sent.messages] == roles
    assert sent.messages[2].results == ("toolu_01Nu6xxxxxxxxxxxxxxxxxxx",)
    assert b'"text":"port = 8080"' in repaired.splitlines()[3]
    assert sent.valid


def test_results_lost_in_a_row_all_go_back_under_their_call() -> None:
    name = "openclaw_results_parent_missing_in_a_row.jsonl"
    repaired = _settled(_read(name), name)
    assert _links(repaired)[1:] == [
        ("p0000002", "p0000001"),
        ("p0000003", "p0000002"),
        ("p0000004", "p0000003"),
    ]
    assert preview(load(repaired, name)).valid


@pytest.mark.parametrize(
    "name",
    [
        "openclaw_result_parent_missing_call_answered.jsonl",
        "openclaw_result_parent_missing_call_off_branch.jsonl",
    ],
)
def test_a_lost_result_of_an_answered_or_abandoned_call_is_an_orphan_still(name: str) -> None:
    """A second result of a call (a duplicate), or one of a call on no branch pi resumes, goes."""
    data = _read(name)
    repaired = _settled(data, name)
    assert repaired.splitlines() == data.splitlines()[:-1]
    assert preview(load(repaired, name)).valid


def test_a_lost_result_repairs_streamed_as_whole() -> None:
    """`pairfix fix` streams a file through a RecordStore: the same bytes as read whole."""
    for name in (
        "openclaw_result_parent_missing_after_later_turns.jsonl",
        "openclaw_result_parent_null_mid_branch.jsonl",
        "openclaw_results_parent_missing_in_a_row.jsonl",
    ):
        whole = analyze(_read(name), name, grace=0).repaired
        with FileSource(FIXTURES / name) as source:
            assert analyze(source, name, grace=0).repaired == whole, name


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


def _lost_in_a_row(count: int) -> bytes:
    """A pi session: `count` calls in a row, then their results, each parentId naming no entry."""
    prompt = {"role": "user", "content": "go"}
    entries: list[dict[str, object]] = [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2025-12-01T09:00:00.000Z"},
        {"type": "message", "id": "u0", "parentId": None, "message": prompt},
    ]
    parent = "u0"
    for k in range(count):
        call = {"type": "toolCall", "id": f"call_{k}", "name": "read", "arguments": {"path": "a"}}
        message = {"role": "assistant", "content": [call], "stopReason": "toolUse"}
        entries.append({"type": "message", "id": f"a{k}", "parentId": parent, "message": message})
        parent = f"a{k}"
    for k in range(count):
        result = {
            "role": "toolResult",
            "toolCallId": f"call_{k}",
            "toolName": "read",
            "content": [{"type": "text", "text": f"output {k}"}],
            "isError": False,
        }
        lost = f"gone{k}"  # no entry has this id
        entries.append({"type": "message", "id": f"r{k}", "parentId": lost, "message": result})
    return b"".join(json.dumps(e).encode() + b"\n" for e in entries)


def _openclaw_calls(data: bytes, path: Path) -> int:
    """Return how many calls of `formats.openclaw`'s functions reading `data` makes, both ways."""
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" and frame.f_code.co_filename == openclaw.__file__:
            calls += 1

    path.write_bytes(data)
    sys.setprofile(count)
    try:
        load(data, path.name)
        with FileSource(path) as source:
            load(source, path.name, summaries=False)
    finally:
        sys.setprofile(None)
    return calls


def test_a_long_run_of_lost_results_is_read_back_in_linear_time(tmp_path: Path) -> None:
    """2,000 lost results in a row: each put back under its call, whole or streamed.

    Each result's call was looked for by walking up from the entry before it,
    and its other answers by reading every result of the file: 24 s read whole
    and 70 s streamed for this file of 4,000 lines, four times that for twice as many.
    The reader's work is counted in calls, not timed: four times the results,
    about four times the calls.
    """
    small = _openclaw_calls(_lost_in_a_row(250), tmp_path / "small.jsonl")
    large = _openclaw_calls(_lost_in_a_row(1000), tmp_path / "large.jsonl")
    assert large < 5 * small, (small, large)
    count = 2000
    data = _lost_in_a_row(count)
    path = tmp_path / "pi.jsonl"
    path.write_bytes(data)
    whole = analyze(data, path.name, "synthesize", grace=0)
    with FileSource(path) as source:
        streamed = analyze(source, path.name, "synthesize", grace=0, summaries=False)
        assert streamed.fault_counts == {"displaced_result": count}
        assert streamed.repaired == whole.repaired
    assert whole.fault_counts == {"displaced_result": count}
    assert b'"text": "output 1999"' in whole.repaired
    assert preview(load(whole.repaired, path.name)).valid


def _pi_walk(data: bytes) -> list[str]:
    """Return the ids pi's buildSessionContext walks from the file's last entry, leaf first.

    pi-coding-agent 0.73.1 session-manager.js walks `parentId` with no guard
    against a loop (`while (current)`): a loop there never ends. Fails on one.
    """
    entries = [json.loads(line) for line in data.splitlines() if line.strip()]
    by_id = {e.get("id"): e for e in entries if "id" in e}
    walked: list[str] = []
    at: dict[str, object] | None = entries[-1]
    while at is not None:
        assert at["id"] not in walked, f"pi's walk loops at {at['id']}"
        walked.append(str(at["id"]))
        parent = at.get("parentId")
        at = by_id.get(parent) if parent else None
    return walked


def _pi_file(entries: list[dict[str, object]]) -> bytes:
    head = {"type": "session", "version": 3, "id": "s", "timestamp": "2025-12-01T09:00:00.000Z"}
    return b"".join(json.dumps(e).encode() + b"\n" for e in [head, *entries])


_USER = {"role": "user", "content": "hi"}
_CALL = {
    "role": "assistant",
    "content": [{"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "a"}}],
    "stopReason": "toolUse",
}
_RESULT = {
    "role": "toolResult",
    "toolCallId": "call_1",
    "toolName": "read",
    "content": [{"type": "text", "text": "port = 8080"}],
    "isError": False,
}


def test_a_parent_loop_on_the_branch_pi_resumes_is_found_and_broken() -> None:
    data = _pi_file(
        [
            {
                "type": "message",
                "id": "u1",
                "parentId": "a1",
                "message": {"role": "user", "content": "hi"},
            },
            {"type": "message", "id": "a1", "parentId": "u1", "message": _CALL},
            {"type": "message", "id": "r1", "parentId": "a1", "message": _RESULT},
        ]
    )
    analysis = analyze(data, "pi.jsonl", "synthesize", grace=0)
    assert analysis.fault_counts != {}
    assert _pi_walk(analysis.repaired)[-1] == "u1"


def test_a_result_parented_on_itself_goes_back_under_its_call_with_its_output(
    tmp_path: Path,
) -> None:
    """A toolResult whose parentId is its own id: pi's walk would never leave it.

    It is read as one whose parent names no entry (under the entry written
    before it), reported as displaced, and put back under its call.
    """
    data = _pi_file(
        [
            {
                "type": "message",
                "id": "u1",
                "parentId": None,
                "message": {"role": "user", "content": "hi"},
            },
            {"type": "message", "id": "a1", "parentId": "u1", "message": _CALL},
            {"type": "message", "id": "r1", "parentId": "r1", "message": _RESULT},
        ]
    )
    analysis = analyze(data, "pi.jsonl", "synthesize", grace=0)
    [fault] = analysis.faults
    assert (str(fault.kind), fault.record) == ("displaced_result", 3)
    assert fault.detail.startswith("its parentId is its own id, not the call's entry")
    repaired = analysis.repaired
    assert _pi_walk(repaired) == ["r1", "a1", "u1"]
    assert b'"text": "port = 8080"' in repaired
    assert preview(load(repaired, "pi.jsonl")).valid
    path = tmp_path / "pi.jsonl"
    path.write_bytes(data)
    with FileSource(path) as source:
        streamed = analyze(source, "pi.jsonl", "synthesize", grace=0, summaries=False)
        out = io.BytesIO()
        streamed.write_repaired(out)
    assert out.getvalue() == repaired
    assert not analyze(repaired, "pi.jsonl", "synthesize", grace=0).plan


def test_a_lost_result_logged_twice_goes_back_under_its_call_with_its_output() -> None:
    """pi holds one entry per id: the two copies of a result are one answer, not a duplicate.

    Counted as two answers, the result was dropped as an orphan and its call
    answered by a synthetic error, the tool's output lost; in a run of lost
    results, every one before it went the same way.
    """
    result = {"type": "message", "id": "r1", "parentId": "gone", "message": _RESULT}
    prompt = {"type": "message", "id": "u1", "parentId": None, "message": _USER}
    data = _pi_file([prompt, {"type": "message", "id": "a1", "parentId": "u1", "message": _CALL}])
    data += json.dumps(result).encode() + b"\n"
    data += json.dumps(result).encode() + b"\n"
    analysis = analyze(data, "pi.jsonl", "synthesize", grace=0)
    assert analysis.fault_counts == {"displaced_result": 1}
    repaired = analysis.repaired
    assert _pi_walk(repaired) == ["r1", "a1", "u1"]
    assert b'"text": "port = 8080"' in repaired
    assert preview(load(repaired, "pi.jsonl")).valid
    assert analyze(repaired, "pi.jsonl", "synthesize", grace=0).fault_counts == {}


def _message(entry_id: str, parent: str | None, message: dict[str, object]) -> dict[str, object]:
    return {"type": "message", "id": entry_id, "parentId": parent, "message": message}


def _call(call_id: str) -> dict[str, object]:
    call = {"type": "toolCall", "id": call_id, "name": "read", "arguments": {"p": 1}}
    return {"role": "assistant", "content": [call], "stopReason": "toolUse"}


def _result(call_id: str, text: str) -> dict[str, object]:
    return {**_RESULT, "toolCallId": call_id, "content": [{"type": "text", "text": text}]}


@pytest.mark.parametrize("policy", ["synthesize", "native"])
def test_a_repair_moving_a_result_up_past_a_dropped_orphan_writes_no_parent_loop(
    policy: str,
) -> None:
    data = _pi_file(
        [
            _message("e2", "e1", _call("c2")),  # its parent names no entry
            _message("e3", "e2", _result("cX", "no call")),  # an orphan, dropped
            _message("e4", "e3", _call("c4")),
            _message("e5", "e4", _result("c2", "OUT5")),  # c2's result, off pi's branch
            {"type": "model_change", "id": "e6", "parentId": "e4", "provider": "anthropic"},
        ]
    )
    repaired = analyze(data, "pi.jsonl", policy, grace=0).repaired
    _pi_walk(repaired)  # fails on a loop
    assert preview(load(repaired, "pi.jsonl")).valid


def test_a_parent_loop_is_reported_on_its_entry_and_broken_there_streamed_as_whole(
    tmp_path: Path,
) -> None:
    """u1 -> a1 -> u1: `check` names u1, whose parentId closes the loop; `fix` makes it the root.

    pi's walk from r1 goes r1, a1, u1, a1, ... and never returns (run against
    pi-coding-agent 0.73.1's `buildSessionContext`: no answer in 120 s).
    Written with a null parent, u1 ends the walk where Pairfix's branch
    starts, and pi sends the prompt, the call and its result.
    """
    data = _pi_file(
        [
            _message("u1", "a1", _USER),
            _message("a1", "u1", _CALL),
            _message("r1", "a1", _RESULT),
        ]
    )
    analysis = analyze(data, "pi.jsonl", "synthesize", grace=0)
    [fault] = analysis.faults
    assert (str(fault.kind), fault.record, fault.tool_call_id) == ("parent_loop", 1, None)
    assert fault.detail.startswith("its parentId a1 names record 2, which pi's walk")
    repaired = analysis.repaired
    assert _links(repaired) == [("u1", None), ("a1", "u1"), ("r1", "a1")]
    assert repaired.splitlines()[2:] == data.splitlines()[2:]  # only u1's link is written anew
    assert _pi_walk(repaired) == ["r1", "a1", "u1"]
    sent = preview(load(repaired, "pi.jsonl"))
    assert [(m.role, m.texts) for m in sent.messages][0] == ("user", ("hi",))
    assert [m.role for m in sent.messages] == ["user", "assistant", "user"]
    assert sent.valid
    path = tmp_path / "pi.jsonl"
    path.write_bytes(data)
    with FileSource(path) as source:
        streamed = analyze(source, "pi.jsonl", "synthesize", grace=0, summaries=False)
        assert streamed.faults == analysis.faults
        out = io.BytesIO()
        streamed.write_repaired(out)
    assert out.getvalue() == repaired
    assert _settled(data, "pi.jsonl") == repaired


def test_an_entry_parented_on_itself_is_a_parent_loop_written_as_a_root() -> None:
    """A user message whose parentId is its own id: pi's walk never leaves it."""
    data = _pi_file([_message("u1", "u1", _USER), _message("a1", "u1", _call("c1"))])
    data += json.dumps(_message("r1", "a1", _result("c1", "OUT"))).encode() + b"\n"
    analysis = analyze(data, "pi.jsonl", "synthesize", grace=0)
    assert [(str(f.kind), f.record) for f in analysis.faults] == [("parent_loop", 1)]
    assert analysis.faults[0].detail.startswith("its parentId is its own id")
    assert _links(analysis.repaired)[0] == ("u1", None)
    assert _pi_walk(analysis.repaired) == ["r1", "a1", "u1"]


def test_a_parent_loop_is_flagged_by_a_policy_that_does_not_break_it() -> None:
    """OpenClaw's own repair leaves parent links alone: its preset reports the loop only."""
    data = _pi_file([_message("u1", "a1", _USER), _message("a1", "u1", _CALL)])
    data += json.dumps(_message("r1", "a1", _RESULT)).encode() + b"\n"
    analysis = analyze(data, "pi.jsonl", "openclaw", grace=0)
    assert analysis.fault_counts == {"parent_loop": 1}
    assert not analysis.plan


_IDS = [f"e{k}" for k in range(1, 8)]


@st.composite
def _pi_sessions(draw: st.DrawFn) -> list[dict[str, object]]:
    """Draw a small pi session: calls, results of them (or of no call), in any order and links.

    Each entry's parentId is usually the entry written before it, else an
    earlier or later entry, its own id, an id no entry holds, a call's id or
    null; results answer a call of the session, written before or after it,
    or none, once, twice or not at all; a line may be logged twice. Each
    call has an id of its own.
    """
    ids = _IDS[: draw(st.integers(1, len(_IDS)))]
    kinds = ["user", "call", "calls", "result", "result", "model"]
    shapes = [draw(st.sampled_from(kinds)) for _ in ids]
    calls = {
        k: [f"c{k}{j}" for j in range(2 if shape == "calls" else 1)]
        for k, shape in enumerate(shapes)
        if shape in ("call", "calls")
    }
    call_ids = [c for ids_here in calls.values() for c in ids_here]
    entries: list[dict[str, object]] = []
    for k, (entry_id, shape) in enumerate(zip(ids, shapes, strict=True)):
        link = draw(
            st.sampled_from(["before"] * 6 + ["earlier", "later", "self", "lost", "call", "null"])
        )
        parent: str | None
        if link == "before":
            parent = ids[k - 1] if k else None
        elif link == "earlier":
            parent = draw(st.sampled_from(ids[: k + 1]))
        elif link == "later":
            parent = draw(st.sampled_from(ids[k:]))
        elif link == "self":
            parent = entry_id
        elif link == "lost":
            parent = "gone"
        elif link == "call" and call_ids:
            parent = draw(st.sampled_from(call_ids))
        else:
            parent = None
        if shape == "model":
            model = {"type": "model_change", "id": entry_id, "parentId": parent}
            entries.append({**model, "provider": "anthropic"})
            continue
        if shape == "user":
            message: dict[str, object] = _USER
        elif shape == "result":
            message = _result(draw(st.sampled_from([*call_ids, "cX"])), f"out {entry_id}")
        else:
            blocks = [
                {"type": "toolCall", "id": c, "name": "read", "arguments": {"p": 1}}
                for c in calls[k]
            ]
            message = {"role": "assistant", "content": blocks, "stopReason": "toolUse"}
        entries.append(_message(entry_id, parent, message))
    if draw(st.booleans()):
        entries.append(draw(st.sampled_from(entries)))  # a line logged twice, written last
    return entries


# As tests/formats/test_fuzz.py: the same examples every run; PAIRFIX_FUZZ_EXAMPLES explores.
@fuzz
@given(entries=_pi_sessions(), policy=st.sampled_from(["synthesize", "native", "discard"]))
def test_no_repair_of_a_pi_session_writes_a_parent_loop_or_needs_another(
    entries: list[dict[str, object]], policy: str
) -> None:
    """Whatever its links, a repaired pi file ends pi's walk, and repairing it again does nothing.

    pi resumes it with a request its provider accepts. Streamed
    (`FileSource`, as `pairfix fix` reads a file), it gives the same faults
    and the same bytes as read whole.
    """
    _settles_without_a_loop(entries, policy)


_e = _message
# Sessions the property above found (shrunk), each kept: what went wrong is in its comment.
FOUND = {
    # A prompt parented on a call's id was read under that call (only results are, as
    # OpenClaw's import does): a loop pi never walks, which the repair then wrote.
    "prompt_parented_on_a_call_id": [
        _e("e1", "c30", _USER),
        _e("e2", "e1", _result("c30", "o2")),
        _e("e3", "e2", _result("c30", "o3")),
        _e("e4", "e3", _call("c30")),
        _e("e5", "e4", _USER),
        _e("e2", "e1", _result("c30", "o2")),
    ],
    # An orphan logged twice, both copies dropped, hands the session to a call's branch;
    # its first copy was re-attached there as the call's answer, so the call got none.
    "orphan_logged_twice_over_a_call": [
        _e("e1", None, _USER),
        _e("e2", "e1", _call("c10")),
        _e("e3", "e1", _result("c10", "o3")),
        _e("e3", "e1", _result("c10", "o3")),
    ],
    # A loop broken at a record the repair drops closed again through the branch the
    # session resumes from.
    "loop_broken_at_a_dropped_orphan": [
        _e("e1", "e4", _USER),
        _e("e2", "e1", _result("c60", "o2")),
        _e("e3", "e2", _result("c60", "o3")),
        _e("e4", "e3", _USER),
        _e("e5", "e4", _USER),
        _e("e6", "e5", _USER),
        _e("e7", "e6", _call("c60")),
        _e("e2", "e1", _result("c60", "o2")),
    ],
    # A result parented on itself, logged twice: streamed, the second copy's link (the
    # uid of the line before) was taken as held, and it read as a loop.
    "self_parented_result_logged_twice": [
        _e("e1", None, _call("c00")),
        _e("e2", "e2", _result("c00", "o2")),
        _e("e2", "e2", _result("c00", "o2")),
    ],
}


@pytest.mark.parametrize("policy", ["synthesize", "native", "discard"])
@pytest.mark.parametrize("name", sorted(FOUND))
def test_a_session_the_property_found_settles_without_a_loop(name: str, policy: str) -> None:
    _settles_without_a_loop(FOUND[name], policy)


def _settles_without_a_loop(entries: list[dict[str, object]], policy: str) -> None:
    """Check that one repair of the pi session `entries` ends pi's walk and settles it."""
    data = _pi_file(entries)
    analysis = analyze(data, "pi.jsonl", policy, grace=0)
    repaired = analysis.repaired
    _pi_walk(repaired)  # fails on a loop
    again = analyze(repaired, "pi.jsonl", policy, grace=0)
    assert not again.plan, (again.faults, again.plan.ops)
    # Settled, it is what pi sends, and the provider takes it: `check` agrees with pi.
    assert preview(again.transcript).valid, again.faults
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pi.jsonl"
        path.write_bytes(data)
        with FileSource(path) as source:
            streamed = analyze(source, "pi.jsonl", policy, grace=0, summaries=False)
            assert streamed.faults == analysis.faults
            out = io.BytesIO()
            streamed.write_repaired(out)
    assert out.getvalue() == repaired
