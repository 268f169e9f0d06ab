"""The API's JSON renderer: DRF's, able to send a string holding a lone surrogate."""

from __future__ import annotations

from typing import Any

from rest_framework import renderers


class _AsciiJSONRenderer(renderers.JSONRenderer):
    ensure_ascii = True


class JSONRenderer(renderers.JSONRenderer):
    """Render JSON as DRF does (UTF-8 kept); all-ASCII when a string holds a lone surrogate.

    A tool call id or a text cut mid-pair by a Node program holds a lone
    surrogate, which UTF-8 cannot encode. JSON escapes it (`\\ud83d`,
    RFC 8259 §7), as the session file does; DRF's `ensure_ascii` writes every
    character outside ASCII so, and a client's JSON parser reads back the
    same string.
    """

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            return _AsciiJSONRenderer().render(data, accepted_media_type, renderer_context)
