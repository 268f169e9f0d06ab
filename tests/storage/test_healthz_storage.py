"""`/healthz` asks the bucket: 200 while it answers, 503 naming storage when it does not."""

import socket

import pytest
from django.urls import reverse

from tests.storage.conftest import free_port, storage_url
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
