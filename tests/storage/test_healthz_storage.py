"""`/healthz` asks the bucket: 200 while it answers, 503 naming storage when it does not."""

import socket
import threading
import time

import pytest
from django.urls import reverse

from tests.storage.conftest import free_port, storage_url
from transcripts import health
from transcripts.health import WAIT
from transcripts.storage import s3_storage

pytestmark = [pytest.mark.s3, pytest.mark.django_db]


def use(settings, url, read_timeout=2):
    settings.STORAGES = {
        **settings.STORAGES,
        "default": s3_storage(
            {"STORAGE_URL": url},
            multipart_bytes=8 << 20,
            connect_timeout=1,
            read_timeout=read_timeout,
        ),
    }


def test_it_reports_the_bucket_ok(client, s3_settings):
    body = client.get(reverse("healthz")).json()
    assert body["checks"]["storage"]["status"] == "ok"


def test_a_bucket_that_is_not_there_is_an_error(client, settings, s3_endpoint):
    use(settings, storage_url(s3_endpoint, "no-such-bucket"))

    response = client.get(reverse("healthz"))

    assert response.status_code == 503
    storage = response.json()["checks"]["storage"]
    assert (storage["error"], storage["reason"]) == (
        "ClientError",
        "the bucket does not exist (NoSuchBucket)",
    )


def test_a_server_that_is_not_there_is_an_error_within_seconds(client, settings):
    use(settings, storage_url(f"http://127.0.0.1:{free_port(range(9100, 9140))}", "blobs"))

    response = client.get(reverse("healthz"))

    assert response.status_code == 503
    storage = response.json()["checks"]["storage"]
    assert storage["error"] == "EndpointConnectionError"
    assert storage["ms"] < 5000
    assert response.json()["checks"]["database"]["status"] == "ok"


def test_a_server_that_accepts_and_never_answers_is_an_error_within_seconds(client, settings):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", free_port(range(9100, 9140))))
        listener.listen(8)  # accepts connections, never answers
        # The settings' default read timeout (30 s, three attempts): the check has its own.
        endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}"
        use(settings, storage_url(endpoint, "blobs"), read_timeout=30)

        response = client.get(reverse("healthz"))

    assert response.status_code == 503
    storage = response.json()["checks"]["storage"]
    assert (storage["status"], storage["error"], storage["reason"]) == (
        "error",
        "ReadTimeoutError",
        "no answer within 2 s",
    )
    assert storage["ms"] < 4000
    assert response.json()["checks"]["database"]["status"] == "ok"


class _DrippedHeaders:
    """A server that answers each request's headers a byte every 0.5 s, for ever."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", free_port(range(9100, 9140))))
        self.listener.listen(8)
        self.accepted = 0
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed: the test is over
                return
            self.accepted += 1
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                while not self.stopped.wait(0.5):
                    conn.sendall(b"a")
            except OSError:
                pass

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()


def test_a_server_that_answers_a_byte_at_a_time_is_an_error_within_seconds(client, settings):
    # Each byte comes well within the read timeout: only the wait for the check ends it.
    server = _DrippedHeaders()
    try:
        endpoint = f"http://127.0.0.1:{server.listener.getsockname()[1]}"
        use(settings, storage_url(endpoint, "blobs"))
        start = time.monotonic()

        first = client.get(reverse("healthz"))
        second = client.get(reverse("healthz"))

        assert time.monotonic() - start < 2 * (WAIT + 1)
        for response in first, second:
            assert response.status_code == 503
            storage = response.json()["checks"]["storage"]
            assert (storage["status"], storage["error"], storage["reason"]) == (
                "error",
                "TimeoutError",
                f"no whole answer within {WAIT} s",
            )
            assert response.json()["checks"]["database"]["status"] == "ok"
        # The second request waited for the first one's check, still held: one thread.
        assert server.accepted == 1
    finally:
        server.close()
        # The held check ends with the server: no later test's request waits for it.
        health._running["storage"].result(timeout=10)
