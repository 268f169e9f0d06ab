"""The format registry: one entry per format, sniffing by confidence, order-free."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import random
from pathlib import Path
from typing import Any

import pytest

import transcripts.formats
from tests.formats.test_real_layouts import FIXTURES, SAMPLES, _first_lines
from transcripts.formats import display, registry
from transcripts.formats.base import LOOSE, Format
from transcripts.formats.openai_chat import OpenAIChat

FILES = sorted(
    p for p in [*SAMPLES.rglob("*.json*"), *FIXTURES.rglob("*.json*")] if ".expect" not in p.name
)


def _scores(path: Path) -> dict[str, float]:
    jsonl, sample = _first_lines(path)
    return {
        f.id: registry.confidence(f, sample, path.name)
        for f in registry.FORMATS.values()
        if f.jsonl == jsonl
    }


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_file_is_claimed_at_the_top_score_by_two_formats(path: Path) -> None:
    scores = _scores(path)
    top = max(scores.values())
    claimed = sorted(fmt for fmt, score in scores.items() if score == top and score > 0)
    assert len(claimed) <= 1, (top, claimed)


# Formats that specialise another: on a file both claim, the specialisation is surer.
SPECIALISES = {"cline": "anthropic", "openai_functions": "openai_chat"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_specialisation_is_surer_than_the_format_it_specialises(path: Path) -> None:
    scores = _scores(path)
    for special, general in SPECIALISES.items():
        if scores.get(special) and scores.get(general):
            assert scores[special] > scores[general], (special, general)


def test_mixed_legacy_and_tool_calls_are_legacy_functions_though_chat_is_sure_too() -> None:
    sample: list[Any] = [
        [
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "f", "arguments": "{}"},
            },
            {"role": "function", "name": "f", "content": "ok"},
            {"role": "assistant", "content": None, "tool_calls": []},
        ]
    ]
    chat = registry.confidence(registry.FORMATS["openai_chat"], sample, "x.json")
    legacy = registry.confidence(registry.FORMATS["openai_functions"], sample, "x.json")
    assert legacy > chat > LOOSE
    assert registry.sniff(sample, "x.json", jsonl=False) is registry.FORMATS["openai_functions"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_format_is_surer_than_one_of_higher_priority_that_claims_the_file(path: Path) -> None:
    jsonl, sample = _first_lines(path)
    # In priority order, the scores of the sure sniffs (a loose one is below them all).
    sure = [
        score
        for f in registry.FORMATS.values()
        if f.jsonl == jsonl and (score := f.sniff(sample, path.name))
    ]
    assert sure == sorted(sure, reverse=True)


@pytest.mark.parametrize("seed", range(5))
def test_shuffling_the_registration_order_changes_nothing(seed: int) -> None:
    entries = list(registry.REGISTERED)
    random.Random(seed).shuffle(entries)
    shuffled = registry.build(entries)
    assert list(shuffled) == list(registry.FORMATS)
    for path in FILES:
        jsonl, sample = _first_lines(path)
        for loose in (True, False):
            found = registry.sniff(sample, path.name, jsonl=jsonl, loose=loose, formats=shuffled)
            expected = registry.sniff(sample, path.name, jsonl=jsonl, loose=loose)
            assert (found and found.id) == (expected and expected.id), path.name


def test_a_tie_goes_to_the_higher_priority_whatever_the_order() -> None:
    # Both sure of it, equally: a dict with `contents` and `history` arrays of Gemini contents.
    content = {"role": "user", "parts": [{"text": "hi"}]}
    sample: list[Any] = [{"contents": [content], "history": [content]}]
    gemini, checkpoint = registry.FORMATS["gemini"], registry.FORMATS["gemini_checkpoint"]
    assert registry.confidence(gemini, sample, "x.json") == registry.confidence(
        checkpoint, sample, "x.json"
    )
    assert gemini.priority > checkpoint.priority
    for order in ([gemini, checkpoint], [checkpoint, gemini]):
        formats = {f.id: f for f in order}
        assert registry.sniff(sample, "x.json", jsonl=False, formats=formats) is gemini


class SecondChat(OpenAIChat):
    id = "second_chat"
    label = "Chat Completions again"


class ChatTwin(OpenAIChat):
    label = "Chat Completions, same id"
    priority = 1


def test_two_formats_with_one_priority_are_refused() -> None:
    with pytest.raises(ValueError, match="share priority 80"):
        registry.build(["transcripts.formats.openai_chat:OpenAIChat", f"{__name__}:SecondChat"])


def test_a_format_registered_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="'openai_chat' is registered twice"):
        registry.build(["transcripts.formats.openai_chat:OpenAIChat", f"{__name__}:ChatTwin"])


def test_an_entry_that_names_no_format_is_refused() -> None:
    with pytest.raises(ValueError, match="names no Format subclass"):
        registry.build(["transcripts.formats.base:linked"])


def test_every_format_class_of_the_package_is_registered_once() -> None:
    """Adding a format is one module and one registry line: a module without its line fails."""
    defined = set()
    for info in pkgutil.iter_modules(transcripts.formats.__path__):
        module = importlib.import_module(f"transcripts.formats.{info.name}")
        for name, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, Format) and value.id and value.__module__ == module.__name__:
                defined.add(f"{module.__name__}:{name}")
    assert sorted(registry.REGISTERED) == sorted(defined)
    assert len(set(registry.REGISTERED)) == len(registry.REGISTERED)


def test_a_display_rule_that_ties_with_another_is_refused() -> None:
    # Gemini's `functionCall` rule holds 90: a second one would leave the order to imports.
    with pytest.raises(ValueError, match="two block rules share priority 90"):
        display.block_rule(90)(lambda node, out: False)
    with pytest.raises(ValueError, match="two envelopes share priority 40"):
        display.envelope("wrapper", 40)
