"""A blob missing, truncated or unreachable on S3: the pages say so (503/404), never a 500 nor a
200 with the wrong bytes; a storage outage leaves a timeline to be built on the next visit.

The unreachable S3 is an endpoint on a port that refuses connections (`refusing_port`).
"""

from __future__ import annotations

import http.server
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.config import Config
from django.test import Client
from django.urls import reverse

from tests.helpers import sample
from tests.storage.conftest import free_port, refusing_port, s3_client, serving, storage_url
from transcripts import actions
from transcripts.models import BlobUnreadable, blob_name
from transcripts.storage import s3_storage

pytestmark = [pytest.mark.s3, pytest.mark.usefixtures("s3_settings")]

FAULTY = "formats/claude_code.jsonl"


def dead_s3(endpoint: str | None = None) -> dict[str, Any]:
    """Return the STORAGES entry of an S3 endpoint nothing answers on (refused at once).

    With `endpoint`, that server's instead. One attempt a request: the
    client's retries would only add their backoff (2 s a test).
    """
    endpoint = endpoint or f"http://127.0.0.1:{refusing_port()}"
    entry = s3_storage(
        {"STORAGE_URL": f"s3://k:s@gone?endpoint_url={endpoint}&region=us-east-1"},
        multipart_bytes=5 * 1024 * 1024,
        connect_timeout=1,
        read_timeout=2,
    )
    entry["OPTIONS"]["client_config"] = entry["OPTIONS"]["client_config"].merge(
        Config(retries={"max_attempts": 1, "mode": "standard"})
    )
    return entry


class _SlowDown(http.server.BaseHTTPRequestHandler):
    """Answers every request as S3 does when it throttles: 503 SlowDown."""

    def _refuse(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        xml = (
            b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
            b"<Message>Please reduce your request rate.</Message></Error>"
        )
        self.send_response(503)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(xml)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(xml)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _refuse

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def throttling_s3() -> Iterator[str]:
    """Yield the endpoint of a server on 127.0.0.1 that answers 503 SlowDown to everything."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port(range(9700, 9750))), _SlowDown)
    with serving(server) as port:
        yield f"http://127.0.0.1:{port}"


def body(response: Any) -> bytes:
    if hasattr(response, "streaming_content"):
        return b"".join(response.streaming_content)
    return response.content


def client_for(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def put_one_bit_flipped(endpoint: str, bucket: str, sha256: str, raw: bytes) -> None:
    """Overwrite the blob named by `sha256` with `raw`, one bit of byte 100 flipped.

    The size is the same and the object is put with no checksum: only the name's hash tells.
    """
    damaged = raw[:100] + bytes([raw[100] ^ 1]) + raw[101:]
    s3_client(endpoint).put_object(Bucket=bucket, Key=blob_name(sha256), Body=damaged)


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


def test_s3_throttling_is_an_outage_not_a_failure(alice, workspace, settings, throttling_s3):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from transcripts.models import Job, JobItem, Timeline

    sessions = [
        actions.do_ingest_session(workspace, f"s{n}.jsonl", sample(FAULTY), acting_user=alice)
        for n in range(2)
    ]
    job = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    [ids] = actions.do_fan_out_job(job.pk)
    settings.STORAGES = {**settings.STORAGES, "default": dead_s3(throttling_s3)}
    client = client_for(alice)

    upload = client.post(
        reverse("transcripts:upload"),
        {"workspace": workspace.pk, "files": [SimpleUploadedFile("t.jsonl", sample(FAULTY))]},
    )
    assert upload.status_code == 503
    assert (
        "The upload could not be stored (ClientError); nothing was kept" in upload.content.decode()
    )
    response = client.get(reverse("transcripts:download_revision", args=[sessions[0].pk, 0]))
    assert response.status_code == 503 and "file storage" in body(response).decode()
    url = reverse("transcripts:session_detail", args=[sessions[0].pk]) + "?policy=discard"
    assert client.get(url).status_code == 503
    timeline = Timeline.objects.get(revision=sessions[0].head, policy="discard")
    assert (timeline.status, timeline.error) == (Timeline.Status.QUEUED, "")
    # A job's chunk is left to its retry, its items neither failed nor done.
    assert actions.do_run_job_items(job.pk, ids) == ids
    assert set(JobItem.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"running"}
    job.refresh_from_db()
    assert (job.status, job.failed, job.done) == (Job.Status.RUNNING, 0, 0)


def test_the_missing_blob_page_names_the_storage_and_the_blob(
    alice, workspace, s3_endpoint, bucket
):
    session = actions.do_ingest_session(workspace, "s.jsonl", sample(FAULTY), acting_user=alice)
    key = blob_name(session.head.sha256)
    s3_client(s3_endpoint).delete_object(Bucket=bucket, Key=key)

    response = client_for(alice).get(reverse("transcripts:download_revision", args=[session.pk, 0]))

    assert response.status_code == 503
    page = response.content.decode()
    assert "file storage" in page and f"{key} is missing from storage" in page


def test_a_damaged_blob_of_the_right_size_is_cut_short_before_its_last_bytes(
    alice, workspace, s3_endpoint, bucket
):
    raw = sample(FAULTY)
    session = actions.do_ingest_session(workspace, "s.jsonl", raw, acting_user=alice)
    put_one_bit_flipped(s3_endpoint, bucket, session.head.sha256, raw)

    response = client_for(alice).get(reverse("transcripts:download_revision", args=[session.pk, 0]))

    # The size matches, so the response is begun; the hash is known only at the end, and the
    # last chunk is withheld: the client gets fewer bytes than Content-Length, never `damaged`.
    assert (response.status_code, response["Content-Length"]) == (200, str(len(raw)))
    sent: list[bytes] = []
    with pytest.raises(BlobUnreadable, match="does not hash to its name"):
        sent.extend(response.streaming_content)
    assert len(b"".join(sent)) < len(raw)


def test_a_job_fails_a_session_whose_blob_is_damaged_and_writes_no_repair_of_it(
    alice, workspace, s3_endpoint, bucket
):
    from transcripts.models import Job, JobItem

    raw = sample(FAULTY)
    session = actions.do_ingest_session(workspace, "s.jsonl", raw, acting_user=alice)
    put_one_bit_flipped(s3_endpoint, bucket, session.head.sha256, raw)
    job = actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    [ids] = actions.do_fan_out_job(job.pk)

    assert actions.do_run_job_items(job.pk, ids) == []

    job.refresh_from_db()
    assert (job.status, job.failed, job.done) == (Job.Status.DONE, 1, 0)
    item = JobItem.objects.get(pk=ids[0])
    assert item.status == JobItem.Status.FAILED
    assert "does not hash to its name: its bytes are damaged" in item.error
    session.refresh_from_db()
    assert session.head.number == 0


def test_the_api_answers_a_missing_blob_with_a_503(alice, workspace, s3_endpoint, bucket):
    from rest_framework.test import APIClient

    session = actions.do_ingest_session(workspace, "s.jsonl", sample(FAULTY), acting_user=alice)
    s3_client(s3_endpoint).delete_object(Bucket=bucket, Key=blob_name(session.head.sha256))
    _, secret = actions.do_create_api_token(workspace, "runtime", acting_user=alice)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")

    response = api.get(f"/api/sessions/{session.pk}/revisions/0/content")

    assert response.status_code == 503
    assert response["Retry-After"] == "30"
    error = response.json()["error"]
    assert error["code"] == "unavailable" and "file storage is down" in error["message"]


def test_a_storage_blip_leaves_the_timeline_queued_behind_a_503(alice, workspace, settings):
    from transcripts.models import Timeline

    session = actions.do_ingest_session(workspace, "s.jsonl", sample(FAULTY), acting_user=alice)
    url = reverse("transcripts:session_detail", args=[session.pk]) + "?policy=discard"
    dead_storage(settings)

    response = client_for(alice).get(url)

    assert response.status_code == 503 and "file storage is down" in response.content.decode()
    timeline = Timeline.objects.get(revision=session.head, policy="discard")
    assert (timeline.status, timeline.claim, timeline.error) == (Timeline.Status.QUEUED, None, "")


def test_a_storage_blip_leaves_a_job_chunk_to_its_retry(alice, workspace, settings):
    from transcripts.models import Job, JobItem

    sessions = [
        actions.do_ingest_session(workspace, f"s{n}.jsonl", sample(FAULTY), acting_user=alice)
        for n in range(2)
    ]
    job = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    [ids] = actions.do_fan_out_job(job.pk)
    saved = dead_storage(settings)

    # Unwritten and still claimed, so returned busy: the task retries them after the lease.
    assert actions.do_run_job_items(job.pk, ids) == ids
    assert set(JobItem.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"running"}
    job.refresh_from_db()
    assert (job.status, job.failed, job.done) == (Job.Status.RUNNING, 0, 0)

    settings.STORAGES = saved
    settings.JOB_CLAIM_LEASE = 0  # the lease has passed when the retry comes
    assert actions.do_run_job_items(job.pk, ids) == []
    job.refresh_from_db()
    assert (job.status, job.failed, job.done) == (Job.Status.DONE, 0, 2)


def test_a_page_waiting_for_its_build_with_storage_down_shows_the_bar_alone(
    alice, workspace, settings
):
    session = actions.do_ingest_session(workspace, "s.jsonl", sample(FAULTY), acting_user=alice)
    settings.TIMELINE_INLINE_BYTES = 0  # built by a worker: the page gives a first look meanwhile
    client = client_for(alice)
    url = reverse("transcripts:session_detail", args=[session.pk])
    assert "A first look" in client.get(url).content.decode()
    dead_storage(settings)
    response = client.get(url)
    html = response.content.decode()
    assert response.status_code == 200
    assert "Preparing the timeline" in html and "A first look" not in html


# A bucket that does not exist: the storage is misconfigured, which no session's bytes cause.
MISSING_BUCKET = "pairfix-no-such-bucket"


def missing_bucket(settings: Any, s3_endpoint: str, storage_client: str) -> None:
    """Make the default storage a bucket the test server does not have."""
    settings.STORAGES = {
        **settings.STORAGES,
        "default": s3_storage(
            {
                "STORAGE_URL": storage_url(s3_endpoint, MISSING_BUCKET),
                "STORAGE_CLIENT": storage_client,
            },
            multipart_bytes=5 * 1024 * 1024,
            connect_timeout=1,
            read_timeout=2,
        ),
    }


def test_an_upload_to_a_bucket_that_does_not_exist_is_a_503_that_says_so(
    alice, workspace, settings, s3_endpoint, storage_client
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from transcripts.models import Session

    missing_bucket(settings, s3_endpoint, storage_client)
    staging = Path(settings.FILE_UPLOAD_TEMP_DIR)
    before = set(staging.iterdir())

    response = client_for(alice).post(
        reverse("transcripts:upload"),
        {"workspace": workspace.pk, "files": [SimpleUploadedFile("s.jsonl", sample(FAULTY))]},
    )

    assert response.status_code == 503
    page = " ".join(response.content.decode().split())
    assert (
        "The upload could not be stored: the file storage is misconfigured: its bucket "
        "does not exist (NoSuchBucket). Nothing was kept."
    ) in page
    assert MISSING_BUCKET not in page  # the operator's word, not every member's
    assert Session.objects.count() == 0
    assert set(staging.iterdir()) == before


def test_an_api_upload_to_a_bucket_that_does_not_exist_is_a_503_that_says_so(
    alice, workspace, settings, s3_endpoint, storage_client
):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from rest_framework.test import APIClient

    from transcripts.models import Session

    _, secret = actions.do_create_api_token(workspace, "runtime", acting_user=alice)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    missing_bucket(settings, s3_endpoint, storage_client)
    staging = Path(settings.FILE_UPLOAD_TEMP_DIR)
    before = set(staging.iterdir())

    response = api.post(
        "/api/sessions", {"file": SimpleUploadedFile("s.jsonl", sample(FAULTY))}, format="multipart"
    )

    assert response.status_code == 503
    assert response.json() == {
        "error": {
            "code": "unavailable",
            "message": (
                "The file storage is misconfigured: its bucket "
                "does not exist (NoSuchBucket). Nothing was stored."
            ),
        }
    }
    assert Session.objects.count() == 0
    assert set(staging.iterdir()) == before


def test_a_bucket_that_does_not_exist_leaves_a_job_chunk_to_its_retry(
    alice, workspace, settings, s3_endpoint, storage_client
):
    from transcripts.models import Job, JobItem

    sessions = [
        actions.do_ingest_session(workspace, f"s{n}.jsonl", sample(FAULTY), acting_user=alice)
        for n in range(2)
    ]
    job = actions.do_start_job(workspace, sessions, policy="synthesize", acting_user=alice)
    [ids] = actions.do_fan_out_job(job.pk)
    saved = settings.STORAGES
    missing_bucket(settings, s3_endpoint, storage_client)

    # Every session would fail alike: the chunk stops, as for storage that is down.
    assert actions.do_run_job_items(job.pk, ids) == ids
    assert set(JobItem.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"running"}
    job.refresh_from_db()
    assert (job.status, job.failed, job.done) == (Job.Status.RUNNING, 0, 0)

    settings.STORAGES = saved  # the bucket set right
    settings.JOB_CLAIM_LEASE = 0
    assert actions.do_run_job_items(job.pk, ids) == []
    job.refresh_from_db()
    assert (job.status, job.failed, job.done) == (Job.Status.DONE, 0, 2)


def test_a_download_from_a_bucket_that_does_not_exist_is_a_503_that_says_so(
    alice, workspace, settings, s3_endpoint, storage_client
):
    session = actions.do_ingest_session(workspace, "s.jsonl", sample(FAULTY), acting_user=alice)
    missing_bucket(settings, s3_endpoint, storage_client)

    response = client_for(alice).get(reverse("transcripts:download_revision", args=[session.pk, 0]))

    assert response.status_code == 503
    page = " ".join(response.content.decode().split())
    assert ("its file storage is misconfigured: its bucket does not exist (NoSuchBucket)") in page
    assert MISSING_BUCKET not in page
