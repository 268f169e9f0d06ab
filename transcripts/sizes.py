"""File sizes as people read them, in binary units named as IEC 80000-13 names them."""

from __future__ import annotations

__all__ = ["binary_size"]

_UNITS = ("KiB", "MiB", "GiB", "TiB")


def binary_size(n: int | float) -> str:
    """Return `n` bytes as "1 byte", "512 bytes", "1.5 KiB", "32.0 MiB", "1.2 GiB".

    A KiB is 1024 bytes, a MiB 1024 KiB, and so on (IEC 80000-13): the units
    the limits are set in (`4 * 1024 * 1024`), labelled as what they are,
    not as "MB" (a million bytes). One decimal above a KiB, rounded.
    """
    if n < 1024:
        count = int(n)
        return "1 byte" if count == 1 else f"{count} bytes"
    value, unit = n / 1024, _UNITS[0]
    for larger in _UNITS[1:]:
        if round(value, 1) < 1024:
            break
        value, unit = value / 1024, larger
    return f"{value:.1f} {unit}"
