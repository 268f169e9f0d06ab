"""Blobs on a real S3 API server: every way bytes go in and out, and nothing on local disk.

Runs against moto's standalone server (tests/storage/conftest.py) with a real
Celery worker. The media folder is checked empty at the end of each test.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.files.storage import default_storage, storages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.helpers import sample, wait_for_job
from tests.storage.conftest import MULTIPART_BYTES, keys
from tests.sync.conftest import age, call, reply, user
from transcripts import actions
from transcripts.actions import runner, sync
from transcripts.engine import analyze
from transcripts.models import (
    BlobContent,
    BlobUnreadable,
    Revision,
    Session,
    SyncedFile,
    blob_name,
    open_blob,
)
from transcripts.storage import S3BlobStorage
from transcripts.timeline import RevisionBytes

pytestmark = [pytest.mark.s3, pytest.mark.usefixtures("s3_settings")]

FAULTY = "formats/claude_code.jsonl"
BROKEN = (
    user("u1", None, "list the files")
    + call("a1", "u1", "toolu_1")
    + user("u2", "a1", "hello?")
    + reply("a2", "u2")
)


def on_every_client(storage: Any, event: str, handler: Any) -> None:
    """Register `handler` for `event` on `storage`'s clients: this thread's, and those made later.

    A job's blob threads (runner.ChunkBlobs) each make a client of their own
    (django-storages keeps one per thread); each is made from a new boto3
    session, and a client starts with its session's handlers.
    """
    storage.connection.meta.client.meta.events.register(event, handler)
    create = storage._create_session

    def with_handler() -> Any:
        session = create()
        session.events.register(event, handler)
        return session

    storage._create_session = with_handler


def requests_made(storage: Any) -> Counter[str]:
    """Count, by operation name (HeadObject, PutObject...), the requests `storage` sends.

    Those of its boto3 client, and those of its obstore client (each call one request).
    """
    made: Counter[str] = Counter()
    on_every_client(storage, "before-call.s3.*", lambda model, **_: made.update([model.name]))
    fast = storage.fast_client()
    for method, operation in (("get", "GetObject"), ("put", "PutObject"), ("size", "HeadObject")):
        if fast is not None:
            sent = getattr(fast, method)

            def counted(*args: Any, _sent: Any = sent, _operation: str = operation) -> Any:
                made.update([_operation])
                return _sent(*args)

            setattr(fast, method, counted)
    return made


def plant(bucket: str, key: str, data: bytes, sha256: str) -> None:
    """Put `data` as `key` with `sha256` (hex) as its stored checksum, as a damaged copy holds it.

    Through boto3 with the checksum given: moto keeps it without checking the bytes.
    """
    default_storage.connection.meta.client.put_object(
        Bucket=bucket,
        Key=key,
        Body=data,
        ChecksumAlgorithm="SHA256",
        ChecksumSHA256=base64.b64encode(bytes.fromhex(sha256)).decode(),
    )


def headers_sent(storage: Any, operation: str) -> list[dict[str, str]]:
    """Collect the headers (names lower-cased) of each `operation` request `storage` sends."""
    sent: list[dict[str, str]] = []

    def collect(request: Any, **_: Any) -> None:
        sent.append(
            {
                name.lower(): value.decode() if isinstance(value, bytes) else value
                for name, value in request.headers.items()
            }
        )

    on_every_client(storage, f"before-send.s3.{operation}", collect)
    return sent


def upload(client: Any, workspace: Any, name: str, data: bytes) -> Session:
    response = client.post(
        reverse("transcripts:upload"),
        {"workspace": workspace.pk, "files": [SimpleUploadedFile(name, data)]},
    )
    assert response.status_code == 302, response.content[:500]
    return Session.objects.filter(workspace=workspace).latest("pk")


def test_the_default_storage_is_the_bucket(bucket):
    assert isinstance(storages["default"], S3BlobStorage)
    assert storages["default"].bucket_name == bucket


@pytest.mark.usefixtures("celery_worker")
def test_upload_repair_rollback_export_with_every_blob_in_the_bucket(
    alice, alice_client, workspace, s3_endpoint, bucket, media
):
    raw = sample(FAULTY)
    session = upload(alice_client, workspace, "claude_code.jsonl", raw)
    assert keys(s3_endpoint, bucket) == {blob_name(session.head.sha256): len(raw)}

    # The session page builds its timeline from the bucket's bytes.
    page = alice_client.get(session.get_absolute_url())
    assert page.status_code == 200
    assert session.fault_counts and "missing_result" in page.content.decode()

    repair = wait_for_job(
        actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    )
    assert (repair.done, repair.failed) == (1, 0)
    session.refresh_from_db()
    repaired = analyze(raw, session.name, "synthesize").repaired
    assert session.head.number == 1 and session.head.read() == repaired
    assert keys(s3_endpoint, bucket)[blob_name(session.head.sha256)] == len(repaired)
    download = alice_client.get(reverse("transcripts:download_revision", args=[session.pk, 1]))
    assert b"".join(download.streaming_content) == repaired
    download = alice_client.get(reverse("transcripts:download_revision", args=[session.pk, 0]))
    assert b"".join(download.streaming_content) == raw

    rollback = wait_for_job(actions.do_start_rollback_job(repair, acting_user=alice))
    assert (rollback.done, rollback.fence_lost) == (1, 0)
    session.refresh_from_db()
    assert session.head.number == 2 and session.head.read() == raw

    export = wait_for_job(
        actions.do_start_job(
            workspace, [session], kind="export", policy="synthesize", acting_user=alice
        )
    )
    assert export.archive.startswith("exports/") and export.archive in keys(s3_endpoint, bucket)
    response = alice_client.get(reverse("transcripts:download_archive", args=[export.pk]))
    assert response.status_code == 200
    assert int(response["Content-Length"]) == keys(s3_endpoint, bucket)[export.archive]
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    assert archive.read(f"sessions/{session.pk}/claude_code.jsonl") == repaired
    manifest = json.loads(archive.read("manifest.json"))
    assert manifest["sessions"][0]["sha256_after"] == session.revisions.get(number=1).sha256

    assert list(media.rglob("*")) == []


def test_a_large_upload_goes_up_in_parts_and_streams_back(alice_client, workspace, bucket, media):
    # About 12 MB of records: three parts of 5 MiB.
    data = b"".join(user(f"u{i}", f"u{i - 1}" if i else None, "x" * 6000) for i in range(2000))
    parts = -(-len(data) // MULTIPART_BYTES)
    assert parts == 3
    session = upload(alice_client, workspace, "big.jsonl", data)

    # A multipart object's ETag ends in the number of its parts.
    etag = default_storage.connection.meta.client.head_object(
        Bucket=bucket, Key=blob_name(session.head.sha256)
    )["ETag"]
    assert etag.strip('"').endswith(f"-{parts}")
    response = alice_client.get(reverse("transcripts:download_revision", args=[session.pk, 0]))
    assert b"".join(response.streaming_content) == data
    assert list(media.rglob("*")) == []


def test_the_same_bytes_are_stored_once_with_one_head_request(alice, workspace, media):
    raw = sample(FAULTY)
    actions.do_ingest_session(workspace, "first.jsonl", raw, acting_user=alice)
    made = requests_made(default_storage)

    actions.do_ingest_session(workspace, "second.jsonl", raw, acting_user=alice)

    assert made == Counter({"HeadObject": 1})
    assert list(media.rglob("*")) == []


def test_a_repair_job_reads_a_faulty_session_once_and_stores_its_repair_once(
    alice, workspace, media
):
    faulty = actions.do_ingest_session(workspace, "faulty.jsonl", BROKEN, acting_user=alice)
    healthy = actions.do_ingest_session(
        workspace, "healthy.jsonl", user("u1", None, "hi") + reply("a1", "u1"), acting_user=alice
    )
    job = actions.do_start_job(workspace, [faulty, healthy], policy="synthesize", acting_user=alice)
    made = requests_made(default_storage)

    # The job's chunks, run in this thread as a worker runs them, with this thread's client.
    for item_ids in runner.do_fan_out_job(job.pk):
        assert runner.do_run_job_items(job.pk, item_ids) == []

    # No HEAD: the repair's name is its hash, and the healthy session is left unread.
    assert made == Counter({"GetObject": 1, "PutObject": 1})
    faulty.refresh_from_db()
    assert faulty.head.number == 1
    assert faulty.head.read() == analyze(BROKEN, "faulty.jsonl", "synthesize").repaired
    assert list(media.rglob("*")) == []


@pytest.mark.parametrize("storage_client", ["boto3"], indirect=True)
def test_a_blob_goes_up_with_its_sha256_for_the_server_to_check(alice, workspace, bucket, media):
    session = actions.do_ingest_session(workspace, "s.jsonl", BROKEN, acting_user=alice)
    sha256 = session.head.sha256

    stored = default_storage.connection.meta.client.head_object(
        Bucket=bucket, Key=blob_name(sha256), ChecksumMode="ENABLED"
    )

    assert base64.b64decode(stored["ChecksumSHA256"]) == bytes.fromhex(sha256)
    assert sha256 == hashlib.sha256(BROKEN).hexdigest()


def test_a_blob_whose_bytes_do_not_match_its_checksum_is_refused_when_read(bucket, media):
    # moto keeps a PUT's checksum without checking it, as a damaged copy would hold it; a
    # GET of the whole blob must refuse such bytes rather than hand them to a repair.
    data = b'{"type":"user"}\n'
    claimed = hashlib.sha256(b"other bytes").hexdigest()
    plant(bucket, blob_name(claimed), data, claimed)
    with (
        pytest.raises(BlobUnreadable, match="does not hash to its name"),
        open_blob(claimed, len(data)) as f,
    ):
        f.read()


def test_a_job_hashes_the_base_it_reads_itself_and_refuses_a_damaged_one(
    alice, workspace, bucket, media, storage_client
):
    from transcripts.models import JobItem

    session = actions.do_ingest_session(workspace, "s.jsonl", BROKEN, acting_user=alice)
    sha256 = session.head.sha256
    damaged = BROKEN[:10] + bytes([BROKEN[10] ^ 1]) + BROKEN[11:]
    # The damaged bytes under the checksum of the good ones, as a body damaged on the way.
    plant(bucket, blob_name(sha256), damaged, sha256)
    job = actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    made = requests_made(default_storage)
    gets = headers_sent(default_storage, "GetObject")

    [ids] = runner.do_fan_out_job(job.pk)
    assert runner.do_run_job_items(job.pk, ids) == []

    # The job's GET asks for no checksum check (botocore would hash the body twice): through
    # obstore, which checks none, or through boto3 without asking for it ...
    assert made == Counter({"GetObject": 1})
    if storage_client == "boto3":
        assert len(gets) == 1 and "x-amz-checksum-mode" not in gets[0]
    else:
        assert gets == []
    # ... and the job's own hash refuses the bytes all the same.
    item = JobItem.objects.get(pk=ids[0])
    assert (item.status, item.sha256_after) == (JobItem.Status.FAILED, "")
    assert "does not hash to its name: its bytes are damaged" in item.error
    session.refresh_from_db()
    assert session.head.number == 0
    # A read that does not hash what it reads has botocore check it, and refuses them too.
    with (
        pytest.raises(BlobUnreadable, match="does not hash to its name"),
        open_blob(sha256, len(BROKEN)) as f,
    ):
        f.read()
    assert gets[-1]["x-amz-checksum-mode"] == "ENABLED"


@pytest.mark.parametrize("storage_client", ["boto3"], indirect=True)
def test_a_single_put_sends_its_body_without_waiting_for_100_continue(bucket, media):
    puts = headers_sent(default_storage, "PutObject")
    parts = headers_sent(default_storage, "UploadPart")
    small, large = b"x" * 1000, b"y" * (MULTIPART_BYTES + 1)

    default_storage.save("small", BlobContent.of(small, hashlib.sha256(small).hexdigest()))
    default_storage.save("large", BlobContent.of(large, hashlib.sha256(large).hexdigest()))

    assert len(puts) == 1 and "expect" not in puts[0]
    # A part is sent only once the server has said it will take it, as botocore does.
    assert len(parts) == 2 and all(part["expect"] == "100-continue" for part in parts)
    assert default_storage.open("small").read() == small
    assert default_storage.open("large").read() == large


def test_the_client_reads_the_time_an_object_was_stored_as_an_aware_datetime(bucket, media):
    client = default_storage.connection.meta.client
    default_storage.save("blob", BlobContent.of(b"x", hashlib.sha256(b"x").hexdigest()))

    stored = client.head_object(Bucket=bucket, Key="blob")["LastModified"]
    [listed] = client.list_objects_v2(Bucket=bucket)["Contents"]

    assert stored.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - stored) < timedelta(minutes=5)
    assert listed["LastModified"] == stored  # ISO 8601 in a listing, an HTTP-date in a header


def test_a_blob_is_read_by_range(alice, workspace, media):
    raw = sample(FAULTY)
    session = actions.do_ingest_session(workspace, "s.jsonl", raw, acting_user=alice)
    made = requests_made(default_storage)
    with default_storage.open(blob_name(session.head.sha256), "rb") as f:
        assert made == Counter()  # nothing asked before the first read
        f.seek(100)
        assert f.read(50) == raw[100:150]
        assert f.read(10) == raw[150:160]  # the same response, read on
        f.seek(170)
        assert f.read(10) == raw[170:180]  # a hop forward, still the same response
        assert f.size == len(raw) < f.file.SKIP_BYTES
        f.seek(0)
        assert f.read(10) == raw[:10]  # backwards: a new request
        f.seek(-20, 2)
        assert f.read() == raw[-20:]  # within SKIP_BYTES ahead: read on
        f.seek(len(raw) + 5)
        assert f.read() == b""
    assert made == Counter({"GetObject": 2})
    with pytest.raises(FileNotFoundError), default_storage.open(blob_name("0" * 64), "rb") as f:
        f.read(1)


def test_a_timeline_window_is_one_request_per_blob(alice, workspace, media):
    lines = [user(f"u{i}", f"u{i - 1}" if i else None, f"message {i}") for i in range(200)]
    session = actions.do_ingest_session(workspace, "s.jsonl", b"".join(lines), acting_user=alice)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    made = requests_made(default_storage)
    with RevisionBytes(session.head) as source:
        for i in range(50, 80):  # records one after another, as a window reads them
            assert source.read(offsets[i], offsets[i + 1] - 1) == lines[i][:-1]
    assert made == Counter({"GetObject": 1})


def test_an_appended_session_reads_its_chain_from_the_bucket(alice, workspace, media):
    session = actions.do_ingest_session(
        workspace, "s.jsonl", user("u1", None, "hi"), acting_user=alice
    )
    more = reply("a1", "u1")
    sync.do_append_records(session, more, acting_user=alice)
    session.refresh_from_db()
    assert session.head.delta and session.head.read() == user("u1", None, "hi") + more
    with session.head.source() as source:
        assert source[:] == user("u1", None, "hi") + more
    assert list(media.rglob("*")) == []


def test_a_synced_file_is_staged_then_stored_in_the_bucket(
    alice, workspace, settings, tmp_path, media, bucket, s3_endpoint, monkeypatch
):
    monkeypatch.setattr(sync, "GROW_INLINE", 100)  # the append is staged too
    staging = tmp_path / "staging"
    settings.FILE_UPLOAD_TEMP_DIR = str(staging)
    root = tmp_path / "sync"
    root.mkdir()
    settings.SYNC_ROOTS = [root.resolve()]
    sync.do_grant_folder(workspace, str(root), acting_user=None)
    source = sync.do_create_source(workspace, str(root), acting_user=alice, format="claude_code")
    path = root / "s.jsonl"
    path.write_bytes(BROKEN)
    age(path)
    assert sync.do_sync_source(source.pk).new == 1
    more = user("u3", "a2", "and then?") + reply("a3", "u3")
    with path.open("ab") as f:
        f.write(more + b'{"type":')
    assert sync.do_sync_source(source.pk).appended == 1
    again = user("u9", None, "start again") + reply("a9", "u9")
    path.write_bytes(again)
    assert sync.do_sync_source(source.pk).rewritten == 1

    revisions = SyncedFile.objects.get(path="s.jsonl").session.revisions.order_by("number")
    first, appended, rewritten = revisions
    assert appended.read() == BROKEN + more and rewritten.read() == again
    stored = keys(s3_endpoint, bucket)
    assert stored == {
        blob_name(first.sha256): len(BROKEN),
        blob_name(appended.delta): len(more),
        blob_name(rewritten.sha256): len(again),
    }
    assert list(media.rglob("*")) == []
    assert list(staging.iterdir()) == []


@pytest.mark.usefixtures("celery_worker")
def test_a_synced_file_is_written_back_from_the_bucket(alice, workspace, settings, tmp_path, media):
    root = tmp_path / "sync"
    root.mkdir()
    settings.SYNC_ROOTS = [root.resolve()]
    sync.do_grant_folder(workspace, str(root), acting_user=None)
    source = sync.do_create_source(
        workspace, str(root), acting_user=alice, format="claude_code", write_back=True
    )
    path = root / "s.jsonl"
    path.write_bytes(BROKEN)
    age(path)
    sync.do_sync_source(source.pk)
    session = SyncedFile.objects.get(source=source).session

    job = wait_for_job(
        actions.do_start_job(workspace, [session], policy="synthesize", acting_user=alice)
    )

    item = job.items.get()
    assert item.status == "repaired"
    assert path.read_bytes() == analyze(BROKEN, "s.jsonl", "synthesize").repaired
    assert path.read_bytes() == Revision.objects.get(pk=item.revision_id).read()
    assert list(media.rglob("*")) == []
