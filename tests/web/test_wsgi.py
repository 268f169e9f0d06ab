"""The WSGI entry point: long request bodies are read through a buffer, byte for byte."""

import io
import os

from project.wsgi import BODY_BUFFER, buffered_input


def _reader(environ, start_response):
    """A WSGI application that reads its body 64 KiB at a time, as Django's parser does."""
    stream = environ["wsgi.input"]
    parts = []
    while chunk := stream.read(64 * 1024):
        parts.append(chunk)
    start_response("200 OK", [])
    return [type(stream).__name__.encode(), b"\n", b"".join(parts)]


def _post(data, length=None):
    environ = {"CONTENT_LENGTH": str(len(data) if length is None else length)}
    environ["wsgi.input"] = io.BytesIO(data)
    kind, _, body = b"".join(buffered_input(_reader)(environ, lambda *a: None)).partition(b"\n")
    return kind.decode(), body


def test_a_long_body_is_read_whole_through_the_buffer():
    data = os.urandom(3 * BODY_BUFFER + 12_345)
    assert _post(data) == ("BufferedReader", data)


def test_a_short_body_is_read_as_the_server_gives_it():
    assert _post(b"x" * 100) == ("BytesIO", b"x" * 100)
    assert _post(b"", length="")[0] == "BytesIO"
