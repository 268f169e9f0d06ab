"""WSGI entry point."""

from __future__ import annotations

import io
import os
from collections.abc import Iterable
from typing import IO, Any

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

# Request bodies longer than this are read through a buffer of this size.
BODY_BUFFER = 1 << 20


class _Body(io.RawIOBase):
    """A WSGI server's request body as a raw stream, each read as large as the buffer asks."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__()
        self.stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def buffered_input(app: Any) -> Any:
    """Return the WSGI application `app` with long request bodies read a MiB at a time.

    Django's multipart parser reads the body 64 KiB at a time, and gunicorn
    27 answers each such read by copying what it has read ahead: a 264 MB
    upload took 0.5-0.9 s only to be read, against 0.3 s read through this
    buffer (bench/first_view.py's session, measured here under gunicorn).
    """

    def buffered(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        length = environ.get("CONTENT_LENGTH") or ""
        if length.isdigit() and int(length) > BODY_BUFFER:
            body = _Body(environ["wsgi.input"])
            environ["wsgi.input"] = io.BufferedReader(body, BODY_BUFFER)
        result: Iterable[bytes] = app(environ, start_response)
        return result

    return buffered


application = buffered_input(get_wsgi_application())
