"""The error of a blob that storage cannot hand back as stored.

Its own module so that both the models and the S3 storage (loaded by
settings, before any model) raise the same class.
"""

from __future__ import annotations


class BlobUnreadable(OSError):
    """A blob the storage cannot hand back as stored: missing, or not the size or hash recorded."""


def damaged(name: str) -> str:
    """Return the message for the blob `name` whose bytes do not hash to its name."""
    return f"the blob {name} in storage does not hash to its name: its bytes are damaged"
