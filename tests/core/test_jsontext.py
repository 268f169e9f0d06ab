"""Which texts hold a lone surrogate: every code point, not only the ones Python's UTF-8 writes."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from transcripts.core.jsontext import escape_lone, has_lone

_SURROGATE = re.compile("[\ud800-\udfff]")
# Every code point, surrogates too (st.text leaves them out unless asked).
_ANY_TEXT = st.text(st.characters(blacklist_categories=()))


@given(_ANY_TEXT)
def test_a_text_holds_a_lone_surrogate_when_one_of_its_code_points_is_a_surrogate(
    text: str,
) -> None:
    assert has_lone(text) is (_SURROGATE.search(text) is not None)


def test_lone_surrogates_are_written_as_their_escapes() -> None:
    assert (has_lone("é✓😀"), has_lone("ok \ud83d"), has_lone("\udfff")) == (False, True, True)
    assert escape_lone('"a\ud83d é"') == '"a\\ud83d é"'
