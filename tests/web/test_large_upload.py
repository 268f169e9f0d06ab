"""A long session (107 MB, 20,000 records) comes in through every way in, never held in memory.

The form and the API are served by a live server in this process and sent
the file over HTTP a chunk at a time, so the only memory an upload may take
is the server's: tracemalloc's peak during the request must stay well below
the file's size (more than 100 MiB). `ingest` is run in this process.
"""

import hashlib
import http.client
import io
import re
import tracemalloc
import uuid
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core.management import call_command

from tests.helpers import generated_session
from transcripts import actions
from transcripts.models import Session

pytestmark = pytest.mark.django_db(transaction=True)

CHUNK = 1 << 20
# Staged, analysed and stored a chunk at a time, an upload of this session takes about
# 25 MiB; held whole it would take more than 100.
PEAK = 60 * 2**20


@pytest.fixture
def read_now(settings):
    """Have uploads read during the request, whatever their size: the path whose memory counts."""
    settings.INGEST_INLINE_BYTES = settings.UPLOAD_MAX_FILE_SIZE


@pytest.fixture
def long_session():
    path = generated_session(20_000, seed=15, result_bytes="100:50000")
    assert 107_000_000 < path.stat().st_size < settings.UPLOAD_MAX_FILE_SIZE
    return path


def _sha256(path):
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _multipart(fields, field, path, boundary):
    """Return (length, chunks) of a multipart body with `fields` and the file at `path`."""
    head = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode()
        for key, value in fields.items()
    )
    head += (
        f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; '
        f'filename="{path.name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    def chunks():
        yield head
        with path.open("rb") as f:
            while chunk := f.read(CHUNK):
                yield chunk
        yield tail

    return len(head) + path.stat().st_size + len(tail), chunks()


def _connect(live_server):
    where = urlsplit(live_server.url)
    return http.client.HTTPConnection(where.hostname, where.port, timeout=300)


def _post_file(live_server, url, fields, field, path, headers):
    """POST the file at `path` (multipart, field `field`) to the live server, a chunk at a time.

    Return (status, Location header, tracemalloc's peak in bytes during the request).
    """
    boundary = uuid.uuid4().hex
    length, body = _multipart(fields, field, path, boundary)
    connection = _connect(live_server)
    tracemalloc.start()
    try:
        connection.request(
            "POST",
            url,
            body=body,
            headers={
                **headers,
                "Content-Type": f"multipart/form-data; boundary={boundary}",
                "Content-Length": str(length),
            },
        )
        response = connection.getresponse()
        response.read()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        connection.close()
    return response.status, response.getheader("Location"), peak


def _check_stored(path):
    session = Session.objects.get()
    assert (session.name, session.format, session.record_count) == (
        path.name,
        "claude_code",
        20_000,
    )
    assert (session.head.size, session.head.sha256) == (path.stat().st_size, _sha256(path))
    return session


def test_a_107_mb_session_uploads_through_the_form(
    live_server, client, alice, workspace, long_session, read_now
):
    client.force_login(alice)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    connection = _connect(live_server)
    connection.request("GET", "/", headers={"Cookie": cookie})
    page = connection.getresponse()
    html = page.read().decode()
    connection.close()
    csrf_cookie = re.search(r"csrftoken=([^;]+)", page.getheader("Set-Cookie")).group(1)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)

    status, location, peak = _post_file(
        live_server,
        "/sessions/upload/",
        {"csrfmiddlewaretoken": token, "workspace": workspace.pk},
        "files",
        long_session,
        {"Cookie": f"{cookie}; csrftoken={csrf_cookie}"},
    )
    assert status == 302, status
    assert location == _check_stored(long_session).get_absolute_url()
    assert peak < PEAK, f"peak {peak / 2**20:.1f} MiB"


def test_the_api_takes_it_the_same_way(live_server, alice, workspace, long_session, read_now):
    _, secret = actions.do_create_api_token(workspace, "runtime", acting_user=alice)
    status, _, peak = _post_file(
        live_server,
        "/api/sessions",
        {},
        "file",
        long_session,
        {"Authorization": f"Bearer {secret}"},
    )
    assert status == 201, status
    _check_stored(long_session)
    assert peak < PEAK, f"peak {peak / 2**20:.1f} MiB"


def test_by_default_the_api_stores_it_unread_for_a_worker(
    live_server, alice, workspace, long_session, monkeypatch
):
    sent = []
    monkeypatch.setattr(
        "transcripts.tasks.count_session.apply_async", lambda args, **_: sent.append(*args)
    )
    _, secret = actions.do_create_api_token(workspace, "runtime", acting_user=alice)
    status, _, peak = _post_file(
        live_server,
        "/api/sessions",
        {},
        "file",
        long_session,
        {"Authorization": f"Bearer {secret}"},
    )
    assert status == 201, status
    session = Session.objects.get()
    assert (session.analysed, session.format, session.record_count) == (False, "unknown", 0)
    assert (session.head.size, session.head.sha256) == (
        long_session.stat().st_size,
        _sha256(long_session),
    )
    assert sent == [session.pk]
    assert peak < PEAK, f"peak {peak / 2**20:.1f} MiB"


def test_ingest_reads_it_a_chunk_at_a_time(alice, workspace, long_session):
    tracemalloc.start()
    try:
        call_command(
            "ingest", str(long_session), "--workspace", workspace.name, stdout=io.StringIO()
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    _check_stored(long_session)
    assert peak < PEAK, f"peak {peak / 2**20:.1f} MiB"
