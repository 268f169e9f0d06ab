"""The faults a repair leaves, found from the plan, equal those of reading the repaired file again.

Compared across the shared workload (tools/gen_sessions.py, every format it
writes), the fault samples, generated scripts of every format and mutated
samples, under every policy preset.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import sessions
from tests.core.test_contracts import BUILDERS, build
from tests.formats.test_fuzz import FILES, _documents, _paths, _replace, json_values
from transcripts import formats
from transcripts.core.model import FaultKind, OpKind, Plan
from transcripts.core.outcome import repaired_faults
from transcripts.engine import PRESETS, Analysis, analyze

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "tools" / "gen_sessions.py"
GENERATED_FORMATS = ("anthropic", "claude_code", "codex", "openai_chat", "openclaw")
# As for tests/formats/test_fuzz.py: PAIRFIX_FUZZ_EXAMPLES asks for a longer run, which
# explores; the suite's run is the same every time (derandomized, no example database), so
# a finding shows up in a long run, never as a flaky suite.
EXAMPLES = int(os.environ.get("PAIRFIX_FUZZ_EXAMPLES", "300"))
LONG_RUN = "PAIRFIX_FUZZ_EXAMPLES" in os.environ
REPEATABLE = {
    "derandomize": not LONG_RUN,
    "database": None if not LONG_RUN else settings.default.database,
}


def derived(analysis: Analysis) -> tuple[int, dict[str, int] | None]:
    """Return (record count, fault counts or None) as found from the plan alone."""
    assert analysis.transcript is not None
    change = formats.rewrite(analysis.transcript, analysis.plan)
    counts = repaired_faults(
        analysis.faults, analysis.plan, change.replaced, change.records, change.placed
    )
    if counts is None:
        return change.record_count, None
    return change.record_count, {str(kind): n for kind, n in counts.items()}


def compare(data: bytes, filename: str, policy: str) -> bool | None:
    """Assert the plan's account of the repaired file is what reading it finds.

    Return None when there is nothing to repair, else whether the fault counts
    came from the plan (True) or needed the second reading (False).
    """
    first = analyze(data, filename, policy)
    if first.error is not None or not first.plan:
        return None
    again = analyze(first.repaired, filename, policy, format=first.format)
    record_count, counts = derived(first)
    assert record_count == again.record_count
    if counts is not None:
        assert counts == Counter(str(f.kind) for f in again.faults)
    # What a job stores: the same values, in the same order.
    assert first.repaired_counts() == (again.record_count, again.fault_counts)
    assert list(first.repaired_counts()[1]) == list(again.fault_counts)
    return counts is not None


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Return faulty sessions of every format the shared generator writes."""
    out = tmp_path_factory.mktemp("workload")
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                str(GENERATOR),
                "--format",
                fmt,
                "--records",
                "300",
                "--sessions",
                "4",
                "--fault-rate",
                "0.25",
                "--parallel-rate",
                "0.4",
                "--result-bytes",
                "20:300",
                "--seed",
                "23",
                "--out-dir",
                str(out / fmt),
            ],
            stdout=subprocess.DEVNULL,
        )
        for fmt in GENERATED_FORMATS
    ]
    assert not any(process.wait() for process in processes)
    manifest_names = {"manifest.json"}
    return sorted(
        path
        for path in out.glob("*/*")
        if path.name not in manifest_names and not path.name.endswith(".faults.json")
    )


@pytest.mark.parametrize("policy", sorted(PRESETS))
def test_it_matches_a_second_reading_of_the_generated_workload(
    workload: list[Path], policy: str
) -> None:
    ways = Counter(compare(path.read_bytes(), path.name, policy) for path in workload)
    assert len(workload) == 4 * len(GENERATED_FORMATS)
    assert ways[None] == 0  # every session has something to repair
    if policy in ("synthesize", "native", "openclaw"):
        # The plans of these presets (results inserted, moved, dropped) are accounted for.
        assert ways[True] >= 0.9 * len(workload)


@pytest.mark.parametrize("policy", sorted(PRESETS))
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_it_matches_a_second_reading_of_each_sample(path: Path, policy: str) -> None:
    compare(path.read_bytes(), path.name, policy)


def test_the_samples_exercise_the_plan_account() -> None:
    ways = Counter(compare(p.read_bytes(), p.name, "synthesize") for p in FILES)
    # Every format's sample with a fault: its repair accounted for from the plan.
    assert ways[True] >= 15
    assert ways[False] <= 2


@settings(max_examples=EXAMPLES, deadline=None, **REPEATABLE)
@given(
    name=st.sampled_from(sorted(BUILDERS)),
    script=sessions.scripts(),
    policy=st.sampled_from(sorted(PRESETS)),
)
def test_it_matches_a_second_reading_of_generated_scripts(
    name: str, script: sessions.Script, policy: str
) -> None:
    filename, data = build(name, script)
    compare(data, filename, policy)


@settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], **REPEATABLE
)
@given(path=st.sampled_from(FILES), data=st.data(), policy=st.sampled_from(sorted(PRESETS)))
def test_it_matches_a_second_reading_of_mutated_samples(
    path: Path, data: st.DataObject, policy: str
) -> None:
    jsonl, docs = _documents(path)
    k = data.draw(st.integers(0, len(docs) - 1))
    target = data.draw(st.sampled_from(_paths(docs[k])))
    docs[k] = _replace(docs[k], target, data.draw(json_values))
    if jsonl:
        raw = "".join(json.dumps(doc) + "\n" for doc in docs).encode()
    else:
        raw = json.dumps(docs[0], indent=2).encode()
    compare(raw, path.name, policy)


def test_it_declines_a_plan_that_drops_calls() -> None:
    data = (ROOT / "demo/samples/formats/claude_code.jsonl").read_bytes()
    analysis = analyze(data, "claude_code.jsonl", "discard")
    assert {op.kind for op in analysis.plan.ops} & {OpKind.DROP_CALL}
    assert derived(analysis)[1] is None


def test_it_declines_a_fault_the_plan_leaves() -> None:
    data = (ROOT / "demo/samples/formats/claude_code.jsonl").read_bytes()
    analysis = analyze(data, "claude_code.jsonl", "synthesize")
    assert analysis.transcript is not None
    [insert] = [op for op in analysis.plan.ops if op.kind is OpKind.INSERT_RESULT]
    # The same faults, but a plan that does not mend the missing result.
    partial = Plan(analysis.plan.policy, tuple(op for op in analysis.plan.ops if op is not insert))
    assert repaired_faults(analysis.faults, partial, (), (), partial.ops) is None


def test_a_synthetic_result_counts_as_existing_synthetic() -> None:
    # A plain message list gets the generic receipt, a marker of a repair.
    data = (ROOT / "demo/samples/formats/openai_chat.json").read_bytes()
    analysis = analyze(data, "openai_chat.json", "synthesize")
    assert analysis.fault_counts == {str(FaultKind.MISSING_RESULT): 1}
    assert [op.kind for op in analysis.plan.ops] == [OpKind.INSERT_RESULT]
    assert derived(analysis) == (10, {"existing_synthetic": 1})
    # Claude Code's own interrupt text, the default in its own file, is no marker of a
    # repair: nothing is left.
    data = (ROOT / "demo/samples/formats/claude_code.jsonl").read_bytes()
    for policy in ("synthesize", "native"):
        assert derived(analyze(data, "claude_code.jsonl", policy)) == (12, {})


def test_an_insert_into_a_message_that_loses_its_orphan_is_counted_from_the_plan() -> None:
    # The only other result of the message the insert targets is an orphan, dropped:
    # the inserted result stays (the repair is idempotent), so the plan's account holds.
    doc = json.loads((ROOT / "demo/samples/formats/gemini.json").read_text())
    doc["contents"][1]["parts"][0]["functionCall"]["id"] = None
    data = json.dumps(doc, indent=2).encode()
    analysis = analyze(data, "gemini.json", "synthesize")
    again = analyze(analysis.repaired, "gemini.json", "synthesize", format=analysis.format)
    assert (again.record_count, again.fault_counts) == (5, {})
    assert derived(analysis) == (5, {})
    assert analysis.repaired_counts() == (5, {})


@pytest.mark.parametrize("policy", ["synthesize", "native", "openclaw"])
def test_it_matches_a_second_reading_of_results_before_their_call_under_a_lost_line(
    policy: str,
) -> None:
    # Found by the mutated samples: the pi entry holding the first call's result is a
    # null line. The repair links the re-attached result under the first synthetic one;
    # the chain it ends must be written last, or a second reading finds four calls
    # unanswered where the plan counts their synthetic results.
    name = "openclaw_results_before_their_call.jsonl"
    _, docs = _documents(ROOT / "tests/formats/fixtures" / name)
    docs[5] = None
    data = "".join(json.dumps(doc) + "\n" for doc in docs).encode()
    analysis = analyze(data, name, policy)
    assert analysis.fault_counts == {"missing_result": 5, "malformed_record": 1}
    assert compare(data, name, policy) is True
    assert derived(analysis) == (12, {"existing_synthetic": 5, "malformed_record": 1})
