"""A streamed call's arguments digest is the digest of its canonical text, whatever its length."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from transcripts.formats.base import _ARGS_KEPT, _digested, args_digest, canonical

# Characters of one to four UTF-8 bytes, so that a cut falls inside a character too.
_CHARS = st.sampled_from(["a", "é", "✓", "😀", '"', "\\", "\n"])
_TEXT = st.lists(_CHARS, max_size=4 * _ARGS_KEPT + 40).map("".join)
_ARGS = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(_ARGS)
def test_a_digest_is_that_of_the_canonical_text(args: Any) -> None:
    assert _digested(args) == args_digest(canonical(args))


def test_texts_about_the_kept_length_digest_as_their_canonical_text() -> None:
    for char in ("a", "é", "✓", "😀"):
        for length in range(_ARGS_KEPT - 16, _ARGS_KEPT + 16):
            for args in ({"t": char * length}, {"t": char * length * 4}, [char] * length):
                assert _digested(args) == args_digest(canonical(args)), (char, length)
    # Exactly _ARGS_KEPT characters of four bytes, then more: the cut is past the bytes read.
    args = {"k": "😀" * (4 * _ARGS_KEPT)}
    assert _digested(args) == args_digest(canonical(args))
