"""Native session formats: sniff, parse into the canonical model, render back byte-faithfully.

The public surface of the package: `registry` holds the formats (one module
each), `load` reads bytes into a Transcript, `render` writes a Transcript
repaired by a Plan, splicing every record no op touches verbatim (DESIGN.md
contract 6). README.md ("Adding a format") says how a format joins.
"""

from __future__ import annotations

from transcripts.formats.loader import FormatError, load
from transcripts.formats.registry import FORMATS, label
from transcripts.formats.renderer import Rewrite, relinked, render, render_to, rewrite

__all__ = [
    "FORMATS",
    "FormatError",
    "Rewrite",
    "label",
    "load",
    "relinked",
    "render",
    "render_to",
    "rewrite",
]
