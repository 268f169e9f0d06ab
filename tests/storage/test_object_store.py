"""The obstore client of S3BlobStorage: what it sends, where, and how its errors read.

A recording server on 127.0.0.1 stands in for S3 where what goes over the wire
is the question (moto keeps a PUT's checksum only when an SDK header names its
algorithm, so it cannot show what a real S3 checks); moto's server elsewhere.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import http.server
import ipaddress
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from obstore.exceptions import PermissionDeniedError

from tests.storage.conftest import KEY, free_port, serving, storage_url
from transcripts.models import BlobContent, blob_name
from transcripts.outages import outage_of
from transcripts.storage import (
    UNREACHABLE,
    S3BlobStorage,
    as_botocore_error,
    is_server_failing,
    s3_storage,
)

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
    with serving(server) as port:
        yield f"http://127.0.0.1:{port}", handler


def storage_of(
    endpoint: str, bucket: str = "b", *, read_deadline: int | None = None, **env: str
) -> S3BlobStorage:
    entry = s3_storage(
        {"STORAGE_URL": storage_url(endpoint, bucket), **env},
        multipart_bytes=5 * 1024 * 1024,
        connect_timeout=1,
        read_timeout=1,
        read_deadline=read_deadline,
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


@pytest.mark.parametrize(
    ("bucket", "region", "endpoint"),
    [
        ("my-bucket", "us-east-1", "https://my-bucket.s3.amazonaws.com"),
        ("my-bucket", "eu-west-3", "https://my-bucket.s3.eu-west-3.amazonaws.com"),
        ("my-bucket", "ap-east-1", "https://my-bucket.s3.ap-east-1.amazonaws.com"),
        ("my.bucket", "eu-west-3", "https://s3.eu-west-3.amazonaws.com"),
    ],
)
def test_on_aws_it_sends_each_request_to_the_regions_host_as_boto3_does(bucket, region, endpoint):
    # botocore's presigned URL names the global host (s3.amazonaws.com) for any region, which
    # a bucket of a region opened since 2019 (ap-east-1) does not answer on.
    storage = S3BlobStorage(
        **s3_storage(
            {"STORAGE_URL": f"s3://{KEY}:secret@{bucket}?region={region}"},
            multipart_bytes=5 * 1024 * 1024,
            connect_timeout=1,
            read_timeout=1,
        )["OPTIONS"]
    )

    fast = storage.fast_client()

    assert fast is not None and fast.endpoint == endpoint
    assert fast.store.config["region"] == region
    virtual = fast.store.config["virtual_hosted_style_request"]
    assert virtual == ("true" if "." not in bucket else "false")


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


# Found by the attack helper: how each client reads a server that misbehaves.


class _Misbehaving(http.server.BaseHTTPRequestHandler):
    """An S3 stand-in whose answer to a GET is named by the key: see `do_GET`."""

    protocol_version = "HTTP/1.1"
    BODY = b'{"type":"user"}\n' * 625  # 10,000 bytes
    STEADY = bytes(range(256)) * (16 * 1024)  # 4 MiB

    def _start(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        stored = {"ETag": '"e"', "Last-Modified": "Fri, 04 Dec 2026 10:00:00 GMT"}
        for name, value in {**stored, **headers}.items():
            self.send_header(name, value)
        self.end_headers()

    def do_GET(self) -> None:
        key = self.path.rsplit("/", 1)[-1]
        if key == "cut-short":  # 4,000 of the 10,000 bytes announced, then the end of the stream
            self._start(200, {"Content-Length": str(len(self.BODY))})
            self.wfile.write(self.BODY[:4000])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
        elif key == "chunked":  # the whole body, but no Content-Length (chunked transfer coding)
            self._start(200, {"Transfer-Encoding": "chunked"})
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(self.BODY), self.BODY))
        elif key == "drip":  # a byte every 0.25 s, well within the read timeout (1 s), for ever
            self._start(200, {"Content-Length": str(len(self.BODY))})
            for byte in self.BODY[:240]:
                try:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                except OSError:  # the client gave up
                    break
                time.sleep(0.25)
            self.close_connection = True
        elif key == "steady":  # 4 MiB at about 1.3 MB/s: slow, but each MiB within a second
            self._start(200, {"Content-Length": str(len(self.STEADY))})
            for start in range(0, len(self.STEADY), 64 * 1024):
                try:
                    self.wfile.write(self.STEADY[start : start + 64 * 1024])
                    self.wfile.flush()
                except OSError:  # the client gave up
                    break
                time.sleep(0.05)
            self.close_connection = True
        elif key == "throttled":  # as R2, GCS's XML API or a rate-limiting proxy throttle
            xml = b"<Error><Code>TooManyRequests</Code><Message>slow down</Message></Error>"
            self._start(429, {"Content-Length": str(len(xml)), "Content-Type": "application/xml"})
            self.wfile.write(xml)
        elif key == "escaped":
            xml = b"<Error><Code>AccessDenied</Code><Message>a &lt;b&gt; &amp; c</Message></Error>"
            self._start(403, {"Content-Length": str(len(xml)), "Content-Type": "application/xml"})
            self.wfile.write(xml)
        else:  # a proxy's page of HTML, not S3's XML error
            html = b"<html><body><h1>Forbidden</h1>" + b"<p>go away</p>" * 5000 + b"</body></html>"
            self._start(403, {"Content-Length": str(len(html)), "Content-Type": "text/html"})
            self.wfile.write(html)

    def do_PUT(self) -> None:  # stored, but answered without the ETag S3 gives
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up on a bad answer is what is tested


@pytest.fixture
def misbehaving() -> Iterator[str]:
    """Yield the endpoint of a misbehaving S3 stand-in on 127.0.0.1."""
    server = _QuietServer(("127.0.0.1", free_port(range(9700, 9750))), _Misbehaving)
    with serving(server) as port:
        yield f"http://127.0.0.1:{port}"


def read_error(storage: S3BlobStorage, key: str) -> Exception:
    """Return the error of reading `key` whole through `open_hashed` (a job's read of a base)."""
    with pytest.raises(Exception) as raised, storage.open_hashed(key) as f:
        f.read()
    return raised.value


@pytest.mark.parametrize("client", ["obstore", "boto3"])
def test_a_body_cut_short_is_storage_down_with_either_client(misbehaving, client):
    # Left for a retry (the chunk, the page's 503), never failed for good as a refusal.
    error = read_error(storage_of(misbehaving, STORAGE_CLIENT=client), "cut-short")

    assert outage_of(error) is not None, repr(error)


@pytest.mark.parametrize("client", ["obstore", "boto3"])
@pytest.mark.parametrize("hashed", [True, False])
def test_a_body_that_drips_is_storage_down_once_the_read_deadline_passes(
    misbehaving, client, hashed
):
    storage = storage_of(misbehaving, read_deadline=2, STORAGE_CLIENT=client)
    start = time.monotonic()

    opened = storage.open_hashed("drip") if hashed else storage.open("drip")
    with pytest.raises(UNREACHABLE) as raised, opened as f:
        f.read()

    # The deadline (2 s) and the watchdog's look or the wait for the next byte at most;
    # the whole body would take 2,500 s.
    assert time.monotonic() - start < 6
    assert str(raised.value) == (
        f"No whole answer from {misbehaving} within 2 s for drip "
        "(STORAGE_READ_DEADLINE): the storage answers too slowly"
    )
    assert outage_of(raised.value) is not None


@pytest.mark.parametrize("client", ["obstore", "boto3"])
@pytest.mark.parametrize("hashed", [True, False])
def test_a_large_body_on_a_slow_link_is_read_whole_past_the_deadline(misbehaving, client, hashed):
    # Each MiB has the deadline (2 s) of its own: the 4 MiB take about 3.3 s in all.
    storage = storage_of(misbehaving, read_deadline=2, STORAGE_CLIENT=client)
    start = time.monotonic()

    opened = storage.open_hashed("steady") if hashed else storage.open("steady")
    with opened as f:
        data = f.read()

    assert data == _Misbehaving.STEADY
    assert time.monotonic() - start > 2.5


@pytest.mark.parametrize("client", ["obstore", "boto3"])
def test_a_get_answered_without_content_length_is_no_outage(misbehaving, client):
    # Asking again gets the same answer: a job retrying it would never end.
    error = read_error(storage_of(misbehaving, STORAGE_CLIENT=client), "chunked")

    assert outage_of(error) is None, repr(error)


def test_a_put_answered_without_etag_is_no_outage(misbehaving):
    # boto3 needs no ETag; obstore refuses the answer, every time it is asked again.
    storage = storage_of(misbehaving)

    with pytest.raises(Exception) as raised:
        storage.save("blob", BlobContent.of(b"x", hashlib.sha256(b"x").hexdigest()))

    assert outage_of(raised.value) is None, repr(raised.value)
    assert str(raised.value).startswith("Generic S3 error: Unable to extract metadata")


@pytest.mark.parametrize("client", ["obstore", "boto3"])
def test_a_429_is_throttling_storage_down_as_a_503_slowdown_is(misbehaving, client):
    error = read_error(storage_of(misbehaving, STORAGE_CLIENT=client), "throttled")

    assert isinstance(error, ClientError) and is_server_failing(error)
    assert outage_of(error) is not None


@pytest.mark.parametrize("client", ["obstore", "boto3"])
def test_s3s_message_reads_as_it_was_written(misbehaving, client):
    error = read_error(storage_of(misbehaving, STORAGE_CLIENT=client), "escaped")

    assert isinstance(error, ClientError)
    assert error.response["Error"] == {"Code": "AccessDenied", "Message": "a <b> & c"}


def test_a_refusal_without_s3s_xml_names_the_status_not_the_page():
    page = "<html><body>" + "<p>go away</p>" * 5000 + "</body></html>"
    text = (
        "The operation lacked the necessary privileges to complete for path blob: Error "
        "performing GET http://127.0.0.1:9/b/blob in 4ms - Server returned non-2xx status "
        "code: 403 Forbidden: " + page
    )
    error = as_botocore_error(PermissionDeniedError(text), "GetObject", "http://127.0.0.1:9")

    assert isinstance(error, ClientError)
    assert error.response["Error"] == {"Code": "403", "Message": "Forbidden"}


def test_a_refused_connection_reads_as_one_not_as_a_timeout():
    storage = storage_of(f"http://127.0.0.1:{free_port(range(9700, 9750))}")  # nothing listens

    error = read_error(storage, "blob")

    assert isinstance(error, EndpointConnectionError) and not isinstance(error, ReadTimeoutError)


@pytest.mark.parametrize(
    "variables",
    [
        {"AWS_SKIP_SIGNATURE": "true"},
        {"AWS_REQUEST_PAYER": "true"},
        {"AWS_S3_EXPRESS": "true"},
        {"AWS_SERVER_SIDE_ENCRYPTION": "aws:kms", "AWS_SSE_KMS_KEY_ID": "other-key"},
    ],
)
def test_aws_variables_obstore_reads_itself_change_no_request(recorder, monkeypatch, variables):
    # boto3 reads none of these: each client sends what the other does, or boto3 sends both.
    endpoint, handler = recorder
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    storage = storage_of(endpoint)
    data = b'{"type":"user"}\n'
    sha256 = hashlib.sha256(data).hexdigest()

    storage.save(blob_name(sha256), BlobContent.of(data, sha256))
    with storage.open_hashed(blob_name(sha256)) as f:
        assert f.read() == data

    [(put, put_headers), (get, get_headers)] = handler.seen
    assert (put, get) == (
        f"PUT /b/{blob_name(sha256)} HTTP/1.1",
        f"GET /b/{blob_name(sha256)} HTTP/1.1",
    )
    for headers in (put_headers, get_headers):
        assert headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={KEY}/")
        assert not [name for name in headers if "server-side-encryption" in name], headers
        assert "x-amz-request-payer" not in headers


class _Redirecting(http.server.BaseHTTPRequestHandler):
    """Answers every GET with 307 to `target`, another server (a hostile or misrouted store)."""

    protocol_version = "HTTP/1.1"
    target = ""

    def do_GET(self) -> None:
        self.send_response(307)
        self.send_header("Location", self.target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


FOLLOWS_REDIRECTS = pytest.mark.xfail(
    strict=True,
    reason="obstore 0.12.1 follows a GET's redirect (reqwest's default policy, which no client "
    "option turns off), dropping only Authorization: the session token goes to the other host",
)


@pytest.mark.parametrize("client", [pytest.param("obstore", marks=FOLLOWS_REDIRECTS), "boto3"])
def test_a_redirect_to_another_host_gets_no_credentials(recorder, monkeypatch, client):
    elsewhere, other = recorder
    monkeypatch.setenv("AWS_SESSION_TOKEN", "the-session-token")
    handler = type("Redirecting", (_Redirecting,), {"target": f"{elsewhere}/b/blob"})
    server = _QuietServer(("127.0.0.1", free_port(range(9700, 9750))), handler)
    with serving(server) as port:
        storage = storage_of(f"http://127.0.0.1:{port}", STORAGE_CLIENT=client)
        read_error(storage, "blob")

    assert other.seen == []


def private_ca_certificates(folder: Any) -> tuple[str, str, str]:
    """Write a CA's certificate and a server certificate for 127.0.0.1 it signed, with its key.

    Return the paths (CA PEM, server certificate PEM, server key PEM): a store behind a
    private CA, as a self-hosted MinIO often is.
    """
    now = datetime.datetime.now(datetime.UTC)

    def certificate(subject: str, key: Any, issuer: str, signer: Any, ca: bool) -> Any:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            address = x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
            builder = builder.add_extension(x509.SubjectAlternativeName([address]), critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key, server_key = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )
    ca = certificate("Pairfix test CA", ca_key, "Pairfix test CA", ca_key, True)
    server = certificate("127.0.0.1", server_key, "Pairfix test CA", ca_key, False)
    paths = [folder / "ca.pem", folder / "server.pem", folder / "server-key.pem"]
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(paths[0]), str(paths[1]), str(paths[2])


@pytest.mark.parametrize("trusted", ["AWS_CA_BUNDLE", "verify"])
def test_a_store_behind_a_private_ca_is_trusted_as_boto3_trusts_it(tmp_path, monkeypatch, trusted):
    ca, certificate, key = private_ca_certificates(tmp_path)
    handler = type("Recorder", (_Recorder,), {"seen": [], "objects": {}})
    server = _QuietServer(("127.0.0.1", free_port(range(9700, 9750))), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    if trusted == "AWS_CA_BUNDLE":
        monkeypatch.setenv("AWS_CA_BUNDLE", ca)
    with serving(server) as port:
        storage = storage_of(f"https://127.0.0.1:{port}")
        if trusted == "verify":
            storage.verify = ca  # AWS_S3_VERIFY, django-storages' option
        data = b'{"type":"user"}\n'
        sha256 = hashlib.sha256(data).hexdigest()

        storage.save(blob_name(sha256), BlobContent.of(data, sha256))
        with storage.open_hashed(blob_name(sha256)) as f:
            assert f.read() == data

    assert storage.fast_client() is not None  # obstore's requests, not boto3's
    assert [line.split()[0] for line, _ in handler.seen] == ["PUT", "GET"]


@pytest.mark.parametrize(
    "variables",
    [
        {"HTTP_PROXY": "http://127.0.0.1:{dead}"},
        {"HTTP_PROXY": "http://127.0.0.1:{dead}", "NO_PROXY": "127.0.0.1"},
        {"HTTP_PROXY": "http://127.0.0.1:{dead}", "NO_PROXY": "*"},
        {"HTTP_PROXY": "http://127.0.0.1:{dead}", "NO_PROXY": "127.0.0.0/8"},
        {"http_proxy": "http://127.0.0.1:{dead}", "no_proxy": "127.0.0.1:{port}"},
    ],
)
def test_both_clients_take_the_same_way_to_the_store_through_a_proxy_or_not(
    recorder, monkeypatch, variables
):
    # botocore and obstore (reqwest) each read HTTP_PROXY and NO_PROXY, each its own way.
    endpoint, handler = recorder
    port, dead = endpoint.rsplit(":", 1)[1], free_port(range(9700, 9750))  # no proxy there
    for name, value in variables.items():
        monkeypatch.setenv(name, value.format(port=port, dead=dead))
    ways = {}
    for client in ("boto3", "obstore"):
        storage = storage_of(endpoint, STORAGE_CLIENT=client)
        handler.seen.clear()
        with contextlib.suppress(UNREACHABLE):
            storage.save("blob", BlobContent.of(b"x", hashlib.sha256(b"x").hexdigest()))
        ways[client] = "direct" if handler.seen else "proxy"

    assert ways["obstore"] == ways["boto3"]
