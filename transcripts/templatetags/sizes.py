"""Template filters about sizes."""

from __future__ import annotations

from django import template

from transcripts.sizes import binary_size as size_text

register = template.Library()


@register.filter
def binary_size(n: int | float | None) -> str:
    """Return `n` bytes as "1000 bytes", "1.5 KiB", "32.0 MiB" (see `transcripts.sizes`).

    Unlike Django's `filesizeformat`, which divides by 1024 and prints "KB"
    and "MB", the label says the unit computed. The number and its unit are
    kept on one line (a no-break space). None gives "".
    """
    if n is None:
        return ""
    return size_text(n).replace(" ", "\xa0")
