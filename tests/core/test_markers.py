"""An earlier repair's marker is recognised by its text, and the quick test never misses one."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from transcripts.core.markers import OPENCLAW_SENTENCE, may_be_marker, synthetic_marker
from transcripts.formats.base import marker_text, preview

MARKERS = [
    "[openclaw] " + OPENCLAW_SENTENCE,
    "[clawdbot] " + OPENCLAW_SENTENCE,
    '{"ok": false, "error": "interrupted"}',
    "No result provided",
    "Skipped due to queued user message.",
    "[Tool result missing due to internal error]",
    "aborted",
]
SPACE = st.sampled_from([" ", "\t", "\n", "\r", "\x0b", "\x0c", "\u00a0", "\u2003", "\u3000"])
TEXTS = st.one_of(
    st.text(),
    st.builds(
        lambda before, marker, after: before + marker + after,
        st.text(SPACE),
        st.sampled_from(MARKERS),
        st.text(SPACE),
    ),
)


def test_every_marker_is_recognised_past_whitespace() -> None:
    for marker in MARKERS:
        assert synthetic_marker(marker) is not None
        assert synthetic_marker(" \u2003\n" + marker.replace(" ", "\t  ") + "\n") is not None
    assert synthetic_marker("aborted by the user") is None
    assert synthetic_marker("") is None


@given(TEXTS)
def test_the_quick_test_passes_every_marker(text: str) -> None:
    if synthetic_marker(text) is not None:
        assert may_be_marker(text)


@given(st.one_of(TEXTS, st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": TEXTS}))))
def test_a_result_keeps_its_text_without_previews_exactly_when_it_is_a_marker(
    content: Any,
) -> None:
    shown = preview(content)
    assert marker_text(content) == (shown if synthetic_marker(shown) else "")


def test_pairfixs_own_synthesized_result_is_not_put_down_to_openmaic_alone() -> None:
    # `synthesize` writes OpenMAIC's receipt: the text cannot tell the two apart.
    from transcripts.core.policy import INTERRUPTED_TEXT

    assert synthetic_marker(INTERRUPTED_TEXT) == (
        "OpenMAIC's receipt, which Pairfix's synthesize policy writes too"
    )
    assert synthetic_marker("[Tool result missing due to internal error]") == "Claude Code"
