"""The obstore client of S3BlobStorage: what it sends, where, and how its errors read.

A recording server on 127.0.0.1 stands in for S3 where what goes over the wire
is the question (moto keeps a PUT's checksum only when an SDK header names its
algorithm, so it cannot show what a real S3 checks); moto's server elsewhere.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.storage.conftest import KEY, free_port, storage_url
from transcripts.models import BlobContent, blob_name
from transcripts.storage import UNREACHABLE, S3BlobStorage, is_server_failing, s3_storage

pytestmark = [pytest.mark.s3]


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Keeps what a PUT sends (its body too) and serves it back; refuses keys under denied/."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, dict[str, str]]]
    objects: dict[str, bytes]

    def _answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None):
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.requestline, {k.lower(): v for k, v in self.headers.items()}))
        if "/denied/" in self.path:
            xml = b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
            self._answer(403, xml, {"Content-Type": "application/xml"})
            return
        self.objects[self.path] = body
        self._answer(200, headers={"ETag": '"e"'})

    def do_GET(self) -> None:
        self.seen.append((self.requestline, {k.lower(): v for k, v in self.headers.items()}))
        body = self.objects.get(self.path)
        if body is None:
            xml = b"<Error><Code>NoSuchKey</Code><Message>no</Message></Error>"
            self._answer(404, xml, {"Content-Type": "application/xml"})
            return
        self._answer(200, body, {"ETag": '"e"', "Last-Modified": "Fri, 04 Dec 2026 10:00:00 GMT"})

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, type[_Recorder]]]:
    """Yield (endpoint, handler class) of a recording S3 stand-in on 127.0.0.1."""
    handler = type("Recorder", (_Recorder,), {"seen": [], "objects": {}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port(range(9700, 9750))), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def storage_of(endpoint: str, bucket: str = "b", **env: str) -> S3BlobStorage:
    entry = s3_storage(
        {"STORAGE_URL": storage_url(endpoint, bucket), **env},
        multipart_bytes=5 * 1024 * 1024,
        connect_timeout=1,
        read_timeout=1,
    )
    return S3BlobStorage(**entry["OPTIONS"])


def test_a_put_carries_the_blobs_sha256_for_the_server_to_check_and_waits_for_nothing(recorder):
    endpoint, handler = recorder
    storage = storage_of(endpoint)
    data = b'{"type":"user"}\n' * 100
    sha256 = hashlib.sha256(data).hexdigest()

    storage.save(blob_name(sha256), BlobContent.of(data, sha256))

    [(line, headers)] = handler.seen
    assert line == f"PUT /b/{blob_name(sha256)} HTTP/1.1"
    assert base64.b64decode(headers["x-amz-checksum-sha256"]) == bytes.fromhex(sha256)
    assert headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"  # the body is hashed once
    assert "expect" not in headers
    assert headers["content-type"] == "application/octet-stream"
    authorization = headers["authorization"]
    assert authorization.startswith(f"AWS4-HMAC-SHA256 Credential={KEY}/")
    assert "x-amz-checksum-sha256" in authorization.split("SignedHeaders=")[1].split(",")[0]
    with storage.open_hashed(blob_name(sha256)) as f:
        assert f.read() == data


def test_boto3_serves_every_request_when_asked(recorder):
    endpoint, handler = recorder
    storage = storage_of(endpoint, STORAGE_CLIENT="boto3")

    storage.save("blob", BlobContent.of(b"x", hashlib.sha256(b"x").hexdigest()))

    assert storage.fast_client() is None
    [(_, headers)] = handler.seen
    assert "Botocore/" in headers["user-agent"]


def test_an_unknown_client_is_refused_by_name():
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="STORAGE_CLIENT must be one of obstore, boto3"):
        storage_of("http://127.0.0.1:9", STORAGE_CLIENT="s5cmd")


def test_it_sends_each_request_where_boto3_would_in_its_addressing_style():
    path = storage_of("http://localhost:9000", "my-bucket", AWS_S3_ADDRESSING_STYLE="path")
    virtual = storage_of("http://localhost:9000", "my-bucket", AWS_S3_ADDRESSING_STYLE="virtual")

    fast_path, fast_virtual = path.fast_client(), virtual.fast_client()

    assert fast_path is not None and fast_virtual is not None
    assert fast_path.endpoint == "http://localhost:9000"
    assert fast_path.store.config["virtual_hosted_style_request"] == "false"
    assert fast_virtual.endpoint == "http://my-bucket.localhost:9000"
    assert fast_virtual.store.config["virtual_hosted_style_request"] == "true"
    assert fast_path.store.config["region"] == "us-east-1"


def test_a_refusal_and_a_missing_key_read_as_botocores(recorder):
    endpoint, _ = recorder
    storage = storage_of(endpoint)

    with pytest.raises(ClientError) as refused:
        storage.save("denied/blob", BlobContent.of(b"x", hashlib.sha256(b"x").hexdigest()))
    with pytest.raises(FileNotFoundError, match="no such blob: nothing"):
        storage.open_hashed("nothing").read()

    error = refused.value.response
    assert error["Error"] == {"Code": "AccessDenied", "Message": "Access Denied"}
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert not is_server_failing(refused.value) and not isinstance(refused.value, UNREACHABLE)


def test_a_server_that_never_answers_is_unreachable_within_its_timeouts():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", free_port(range(9700, 9750))))
        listener.listen(8)  # accepts connections, never answers
        endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}"
        storage = storage_of(endpoint)
        start = time.monotonic()
        with pytest.raises(UNREACHABLE):
            storage.open_hashed("blob").read()
        # One attempt's read timeout (1 s) and two retries, with their backoff.
        assert time.monotonic() - start < 10


# Run in a fresh interpreter, whose obstore runtime is unused until it says: put a blob with
# boto3, read it with obstore (or not), then fork a child, as Celery's prefork pool does, and
# have the child read it through the same storage, within a bound.
FORK_AND_READ = """
import multiprocessing, os, sys
import django
django.setup()
from tests.storage.test_object_store import storage_of
storage = storage_of(sys.argv[1], sys.argv[2])
storage.connection.meta.client.put_object(Bucket=sys.argv[2], Key="blob", Body=b"forked")
if sys.argv[3] == "use":
    assert storage.open_hashed("blob").read() == b"forked"
def read(out):
    out.send((storage.fast_client() is None, storage.open_hashed("blob").read()))
context = multiprocessing.get_context("fork")
receive, send = context.Pipe(duplex=False)
child = context.Process(target=read, args=(send,))
child.start()
child.join(timeout=20)
if child.exitcode is None:
    child.kill()
    sys.exit("the child hung")
print(receive.recv())
"""


@pytest.mark.parametrize("used_before_fork", [True, False])
def test_a_forked_worker_reads_with_boto3_only_when_its_parent_used_obstore(
    s3_endpoint, bucket, used_before_fork
):
    # A forked child has none of its parent's runtime threads: obstore would wait for ever.
    done = subprocess.run(
        [sys.executable, "-c", FORK_AND_READ, s3_endpoint, bucket]
        + ["use" if used_before_fork else "unused"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings"},
    )

    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == f"({used_before_fork}, b'forked')"


@pytest.mark.parametrize("client", ["obstore", "boto3"])
def test_a_bucket_that_does_not_exist_is_named_not_taken_for_a_missing_blob(s3_endpoint, client):
    storage = storage_of(s3_endpoint, "pairfix-no-such-bucket", STORAGE_CLIENT=client)
    data = b"x"

    with pytest.raises(ClientError) as put:
        storage.save("blob", BlobContent.of(data, hashlib.sha256(data).hexdigest()))
    with pytest.raises(ClientError) as get:
        storage.open_hashed("blob").read()

    for refused in (put.value, get.value):
        assert refused.response["Error"]["Code"] == "NoSuchBucket"
        assert refused.response["ResponseMetadata"]["HTTPStatusCode"] == 404
        assert not is_server_failing(refused)


def test_it_trusts_the_certificates_boto3_is_told_to_trust(tmp_path):
    # An S3 stand-in over HTTPS with a certificate of its own (AWS_S3_VERIFY names its PEM).
    import ssl

    ca, ca_key = tmp_path / "ca.pem", tmp_path / "ca-key.pem"
    cert, key, request = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "cert.csr"
    names = tmp_path / "names.cnf"
    names.write_text("subjectAltName=IP:127.0.0.1\n")
    for command in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test CA",
         "-keyout", str(ca_key), "-out", str(ca)],
        ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
         "-keyout", str(key), "-out", str(request)],
        ["x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key),
         "-CAcreateserial", "-days", "1", "-extfile", str(names), "-out", str(cert)],
    ):  # fmt: skip
        subprocess.run(["openssl", *command], check=True, capture_output=True, timeout=60)
    handler = type("Recorder", (_Recorder,), {"seen": [], "objects": {}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port(range(9700, 9750))), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint = f"https://127.0.0.1:{server.server_address[1]}"
        entry = s3_storage(
            {"STORAGE_URL": storage_url(endpoint, "b")},
            multipart_bytes=5 * 1024 * 1024,
            connect_timeout=1,
            read_timeout=2,
        )
        storage = S3BlobStorage(**{**entry["OPTIONS"], "verify": str(ca)})
        data = b"over TLS\n"

        storage.save("blob", BlobContent.of(data, hashlib.sha256(data).hexdigest()))

        [(line, headers)] = handler.seen
        assert line == "PUT /b/blob HTTP/1.1" and headers["user-agent"].startswith("object_store")
        with storage.open_hashed("blob") as f:
            assert f.read() == data
        with storage.open("blob") as f:  # boto3's checked GET, trusting the same CA
            assert f.read() == data
        assert "Botocore/" in handler.seen[-1][1]["user-agent"]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
