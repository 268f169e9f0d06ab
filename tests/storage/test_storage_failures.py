"""A blob missing, truncated or unreachable on S3: the pages say so (503/404), never a 500 nor a
200 with the wrong bytes; a storage outage leaves a timeline to be built on the next visit.

The unreachable S3 is an endpoint on a port of 9700-9749 nothing listens on (`free_port`).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.helpers import sample
from tests.storage.conftest import free_port, s3_client
from transcripts import actions
from transcripts.models import blob_name
from transcripts.storage import s3_storage

pytestmark = [pytest.mark.s3, pytest.mark.usefixtures("s3_settings")]

FAULTY = "formats/claude_code.jsonl"


def dead_s3() -> dict[str, Any]:
    """Return the STORAGES entry of an S3 endpoint nothing answers on (refused at once)."""
    port = free_port(range(9700, 9750))
    return s3_storage(
        {"STORAGE_URL": f"s3://k:s@gone?endpoint_url=http://127.0.0.1:{port}&region=us-east-1"},
        multipart_bytes=5 * 1024 * 1024,
        connect_timeout=1,
        read_timeout=2,
    )


def body(response: Any) -> bytes:
    if hasattr(response, "streaming_content"):
        return b"".join(response.streaming_content)
    return response.content


def client_for(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def test_a_missing_blob_is_not_a_200_nor_a_500(alice, workspace, s3_endpoint, bucket):
    raw = sample(FAULTY)
    session = actions.do_ingest_session(workspace, "s.jsonl", raw, acting_user=alice)
    s3_client(s3_endpoint).delete_object(Bucket=bucket, Key=blob_name(session.head.sha256))
    client = client_for(alice)
    url = reverse("transcripts:download_revision", args=[session.pk, 0])
    try:
        response = client.get(url)
        status, error = response.status_code, None
        body(response)
    except Exception as exc:  # raised while streaming, after a 200 went out
        error = exc
    assert error is None, f"status {status} sent, then the stream raised {error!r}"
    assert status in (404, 503), status


def test_a_truncated_blob_is_not_served_as_the_raw_bytes(alice, workspace, s3_endpoint, bucket):
    raw = sample(FAULTY)
    session = actions.do_ingest_session(workspace, "s.jsonl", raw, acting_user=alice)
    key = blob_name(session.head.sha256)
    s3_client(s3_endpoint).put_object(Bucket=bucket, Key=key, Body=raw[: len(raw) // 2])
    client = client_for(alice)
    response = client.get(reverse("transcripts:download_revision", args=[session.pk, 0]))
    try:
        got = body(response)
    except Exception as exc:
        got = exc
    # Raw is sacred: a 200 must carry exactly the uploaded bytes.
    assert response.status_code != 200 or got == raw, (
        response.status_code,
        response.get("Content-Length"),
        len(got) if isinstance(got, bytes) else got,
    )


@pytest.mark.parametrize("page", ["download_revision", "download_repaired"])
def test_storage_down_is_a_503(alice, workspace, settings, page):
    session = actions.do_ingest_session(workspace, "s.jsonl", sample(FAULTY), acting_user=alice)
    settings.STORAGES = {
        **settings.STORAGES,
        "default": dead_s3(),
    }
    args = [session.pk, 0] if page == "download_revision" else [session.pk]
    client = client_for(alice)
    try:
        response = client.get(reverse(f"transcripts:{page}", args=args))
        status, error = response.status_code, None
        body(response)
    except Exception as exc:
        error = exc
    assert error is None, f"status {status} sent, then the stream raised {error!r}"
    assert status == 503, status


def dead_storage(settings: Any) -> Any:
    saved = settings.STORAGES
    settings.STORAGES = {
        **saved,
        "default": dead_s3(),
    }
    return saved


def test_a_storage_blip_does_not_fail_a_timeline_for_good(alice, workspace, settings):
    from transcripts.models import Timeline

    session = actions.do_ingest_session(workspace, "s.jsonl", sample(FAULTY), acting_user=alice)
    client = client_for(alice)
    url = reverse("transcripts:session_detail", args=[session.pk]) + "?policy=discard"
    saved = dead_storage(settings)
    client.get(url)  # S3 unreachable for a moment
    settings.STORAGES = saved  # S3 back
    response = client.get(url)
    timeline = Timeline.objects.get(revision=session.head, policy="discard")
    assert timeline.status == Timeline.Status.READY, (timeline.status, timeline.error)
    assert response.status_code == 200


def test_an_upload_while_storage_is_down_is_a_503(alice, workspace, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    dead_storage(settings)
    client = client_for(alice)
    response = client.post(
        reverse("transcripts:upload"),
        {"workspace": workspace.pk, "files": [SimpleUploadedFile("s.jsonl", sample(FAULTY))]},
    )
    assert response.status_code == 503, response.status_code
