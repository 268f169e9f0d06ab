"""Blob storage on any S3-compatible server, read as a stream.

django-storages' S3 backend writes through boto3's managed transfer
(multipart above `TransferConfig.multipart_threshold`), but its reader
downloads a whole object into a SpooledTemporaryFile before the first byte is
returned. `S3BlobStorage` keeps the writer and reads instead straight from
the GET's response body: `read(n)` takes n bytes off the socket, and a seek
starts a ranged GET (RFC 9110 §14.2, `Range: bytes=<start>-`) from the new
offset when the next read comes. So a download, an export zip or a timeline
window costs memory in proportion to the chunk read, not to the blob.

A GET asks botocore to check the body against the checksum stored with the
object unless the caller hashes every byte itself (`S3BlobStorage.open_hashed`:
a job's read of a base, a download), so no body is hashed twice.

Those hashed GETs and every single PUT go through obstore (`ObjectStoreClient`,
the Rust crate object_store), not botocore, unless `STORAGE_CLIENT=boto3`:
botocore spends about 1.5 to 1.8 ms of CPU on each request here, obstore
about 0.4. It is made from the same storage's boto3 client, so it sends each
request where boto3 would, signed with the same credentials, and its errors
are raised as botocore's. Everything else (parts, HEADs, deletes, listings,
the checked GETs) stays with boto3.

`s3_storage` builds the STORAGES entry from the environment (settings.py
calls it), `parse_storage_url` reads `STORAGE_URL`. `UNREACHABLE` are the
errors that mean the server could not be reached or stopped answering (a
read that does not end within its deadline too: `ReadDeadlineError`);
`is_server_failing` tells its 5xx answers (throttling included),
`is_missing_bucket` its answer that the bucket does not exist.
"""

from __future__ import annotations

import base64
import contextlib
import html
import io
import itertools
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

import boto3
import botocore.session
import obstore
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    FlexibleChecksumError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    ReadTimeoutError,
)
from botocore.exceptions import ConnectionError as BotocoreConnectionError
from botocore.utils import parse_timestamp
from django.core.exceptions import ImproperlyConfigured
from django.core.files import File
from obstore.auth.boto3 import Boto3CredentialProvider
from obstore.exceptions import BaseError as ObjectStoreError
from obstore.exceptions import (
    InvalidPathError,
    NotSupportedError,
    PermissionDeniedError,
    UnauthenticatedError,
    UnknownConfigurationKeyError,
)
from obstore.store import S3Store
from storages.backends.s3 import S3Storage
from storages.utils import clean_name

from transcripts.blob_errors import BlobUnreadable, damaged

if TYPE_CHECKING:
    from obstore.store import ClientConfig

# botocore's errors of a server that cannot be reached or stops answering, its retries spent:
# EndpointConnectionError and ConnectTimeoutError are ConnectionErrors; ReadTimeoutError,
# ConnectionClosedError and ResponseStreamingError (a body cut mid-read by a reset)
# HTTPClientErrors; IncompleteReadError a body whose stream ended before its Content-Length.
UNREACHABLE: tuple[type[Exception], ...] = (
    BotocoreConnectionError,
    HTTPClientError,
    IncompleteReadError,
)


class ReadDeadlineError(ReadTimeoutError):
    """A read of a GET's body that did not end within the storage's read deadline.

    The read timeout bounds each wait for the next bytes only, so a body
    that drips (a byte a second) would never end. One of `UNREACHABLE`: the
    storage answers too slowly to be of use, as when it does not answer.
    """

    fmt = (
        "No whole answer from {endpoint_url} within {seconds} s for {key} "
        "(STORAGE_READ_DEADLINE): the storage answers too slowly"
    )


def is_missing_bucket(exc: BaseException) -> bool:
    """Return True for S3's answer that the bucket does not exist (a ClientError NoSuchBucket).

    No session's bytes cause it, and asking again meets it again until the
    bucket is made or another one configured: the storage is misconfigured.
    """
    return (
        isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") == "NoSuchBucket"
    )


def is_server_failing(exc: BaseException) -> bool:
    """Return True for S3's answer that it is failing, not that the request is wrong.

    That is a ClientError with a 5xx status (500 InternalError, 503 SlowDown
    or ServiceUnavailable) or 429 Too Many Requests (the throttling of
    S3-compatible stores and proxies that do not answer 503 SlowDown), which
    botocore raises once its retries are spent: the storage is down or
    throttling, as when it cannot be reached.
    """
    if not isinstance(exc, ClientError):
        return False
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return isinstance(status, int) and (status >= 500 or status == 429)


def parse_s3_timestamp(value: str) -> datetime:
    """Return the timezone-aware datetime of a timestamp in an S3 answer.

    An HTTP-date (`Last-Modified: Thu, 03 Dec 2026 14:00:00 GMT`, RFC 9110
    §5.6.7), the form of every header of a GET, is read by the standard
    library; any other form (ISO 8601 in XML bodies, epoch seconds) by
    botocore's own parser, which reads every form but costs about 75 µs here
    (dateutil), 4 % of a GET's CPU. Raises ValueError as botocore's
    parser does.
    """
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        parsed = None
    if parsed is None or parsed.tzinfo is None:  # not an HTTP-date, or one of no known zone (-0000)
        parsed = parse_timestamp(value)
    return parsed


def send_body_at_once(request: Any, **kwargs: Any) -> None:
    """Drop `Expect: 100-continue` from a PutObject request about to go (botocore before-send).

    botocore asks it of every PUT whose body is a file, and a PutObject's
    always is (it wraps bytes in one), so the client sends the headers, waits
    for the server's `100 Continue` and only then the body (RFC 9110 §10.1.1):
    a round trip per PUT, and about 0.1 ms of CPU here, to spare sending a
    body the server would refuse. A single PUT here holds at most one part
    (`S3BlobStorage._save`), sent whole at once; parts still wait. The header
    is not signed (botocore leaves it out of SigV4), so dropping it after
    signing is safe.
    """
    request.headers.pop("Expect", None)


class _Watchdog:
    """One thread that runs the callback of each armed deadline once it has passed.

    It looks once every CHECK_SECONDS, so a callback runs up to that much
    late; arming costs a dict insertion, and nothing wakes the thread. It
    is started on first use in each process (a forked child has none). A
    forked child forgets its parent's deadlines: their callbacks shut down
    sockets it shares with the parent, whose reads may have ended since and
    whose connections may carry another request by then.
    """

    CHECK_SECONDS = 0.5

    def __init__(self) -> None:
        self._forked()
        self._ids = itertools.count()
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        # Anew, not cleared: the fork may have copied the lock held by a thread of the parent's.
        self._lock = threading.Lock()
        self._armed: dict[int, tuple[float, Callable[[], None]]] = {}
        self._pid: int | None = None

    @contextlib.contextmanager
    def armed(self, seconds: float, callback: Callable[[], None]) -> Iterator[list[bool]]:
        """Run `callback` if the block has not ended `seconds` from now; yield [fired]."""
        fired = [False]

        def fire() -> None:
            fired[0] = True
            callback()

        key = next(self._ids)
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                threading.Thread(target=self._watch, name="storage-deadlines", daemon=True).start()
            self._armed[key] = (time.monotonic() + seconds, fire)
        try:
            yield fired
        finally:
            with self._lock:
                self._armed.pop(key, None)

    def _watch(self) -> None:
        while True:
            time.sleep(self.CHECK_SECONDS)
            now = time.monotonic()
            with self._lock:
                due = [key for key, (when, _) in self._armed.items() if when <= now]
                callbacks = [self._armed.pop(key)[1] for key in due]
            for callback in callbacks:
                with contextlib.suppress(Exception):  # a connection already gone
                    callback()


_WATCHDOG = _Watchdog()


# A read of a GET's body must receive each this many bytes within its deadline: a large
# read (a whole revision) on a slow but working link is not taken for an outage.
DEADLINE_BYTES = 1024 * 1024


class _DeadlineBody:
    """botocore's StreamingBody of a GET, each MiB of which must come within `seconds`.

    A read is made in pieces of at most DEADLINE_BYTES; one still going at
    its deadline has its connection shut down (urllib3's
    `HTTPResponse.shutdown`, which interrupts a blocked read) and raises
    ReadDeadlineError. botocore's checks (Content-Length, the checksum) are
    the body's own, as before: the end is read as it would be.
    """

    def __init__(self, body: Any, seconds: float, endpoint: str, key: str) -> None:
        self._body, self._seconds = body, seconds
        self._endpoint, self._key = endpoint, key

    def read(self, size: int | None = None) -> bytes:
        if size is not None and size <= DEADLINE_BYTES:
            return self._piece(size)
        parts, want = [], size
        while want is None or want > 0:
            piece = self._piece(DEADLINE_BYTES if want is None else min(want, DEADLINE_BYTES))
            if not piece:  # the end: botocore has checked the length and checksum
                break
            parts.append(piece)
            if want is not None:
                want -= len(piece)
        return b"".join(parts)

    def _piece(self, size: int) -> bytes:
        raw = self._body._raw_stream  # urllib3's HTTPResponse
        with _WATCHDOG.armed(self._seconds, raw.shutdown) as fired:
            try:
                data: bytes = self._body.read(size)
            except Exception as exc:
                if fired[0]:
                    raise self._late() from exc
                raise
        if fired[0]:  # ended as the deadline passed, maybe short
            raise self._late()
        return data

    def _late(self) -> ReadDeadlineError:
        return ReadDeadlineError(endpoint_url=self._endpoint, seconds=self._seconds, key=self._key)

    def close(self) -> None:
        self._body.close()


class S3ObjectReader(io.RawIOBase):
    """The object `key` of `bucket`, read from the network a `read` at a time.

    `size` is the object's length in bytes. Nothing is asked at opening: the
    first read (or `size`) makes a GET from the position, ranged unless it is
    0; reads go on along that response, across a hop forward of up to
    SKIP_BYTES too (a timeline window's records, a line end apart), and any
    other seek makes the next read start a new ranged GET. Raises
    FileNotFoundError for a missing key, BlobUnreadable when a whole
    object's bytes do not match the checksum stored with it, botocore's
    errors on anything else the server refuses, ReadDeadlineError when a read
    (of up to the bytes asked) does not end within `deadline` seconds.
    `client` is a boto3 S3 client whose `response_checksum_validation` is
    `when_required` (`s3_storage`): a GET asks for the check
    (`ChecksumMode=ENABLED`) unless `checked` is False, for a caller that
    hashes what it reads itself.
    """

    SKIP_BYTES = 64 * 1024

    def __init__(
        self, client: Any, bucket: str, key: str, *, checked: bool = True, deadline: float = 120
    ) -> None:
        self._client, self._bucket, self.key = client, bucket, key
        self._checked = checked
        self._deadline = deadline
        self._position = 0
        self._size: int | None = None
        self._body: Any = None
        self._body_position = 0

    @property
    def size(self) -> int:
        if self._size is None:
            self._get(self._position)
        assert self._size is not None
        return self._size

    def _get(self, start: int) -> None:
        """Start a GET of the object from byte `start`, learning its size."""
        self._close_body()
        kwargs = {"Range": f"bytes={start}-"} if start else {}
        if self._checked:
            kwargs["ChecksumMode"] = "ENABLED"
        try:
            response = self._client.get_object(Bucket=self._bucket, Key=self.key, **kwargs)
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 404 and exc.response.get("Error", {}).get("Code") != "NoSuchBucket":
                raise FileNotFoundError(f"no such blob: {self.key}") from None
            if status == 416:  # a first read at or past the end: only the size is left to learn
                self._size = int(
                    self._client.head_object(Bucket=self._bucket, Key=self.key)["ContentLength"]
                )
                return
            raise
        endpoint = self._client.meta.endpoint_url
        self._body = _DeadlineBody(response["Body"], self._deadline, endpoint, self.key)
        self._body_position = start
        content_range = response.get("ContentRange")  # "bytes 10-99/100"
        self._size = (
            int(content_range.rsplit("/", 1)[1]) if content_range else response["ContentLength"]
        )

    def _close_body(self) -> None:
        if self._body is not None:
            self._body.close()
            self._body = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_END:
            offset += self.size
        elif whence == os.SEEK_CUR:
            offset += self._position
        if offset < 0:
            raise ValueError(f"negative seek position {offset}")
        self._position = offset
        return self._position

    def readinto(self, buffer: Any) -> int:
        want = min(len(buffer), self.size - self._position)
        if want <= 0:
            return 0
        gap = self._position - self._body_position
        if self._body is None or not 0 <= gap <= self.SKIP_BYTES:
            self._get(self._position)
            gap = 0
        try:
            if gap:
                self._body.read(gap)
            data = self._body.read(want)
            buffer[: len(data)] = data
            self._position += len(data)
            self._body_position = self._position
            if self._position == self._size:
                # Read to its end, the response hands its connection back to the pool for
                # the next request (closed part-read, it would be dropped), and botocore
                # checks a whole object's bytes against the checksum stored with it.
                self._body.read()
        except FlexibleChecksumError:
            self._close_body()
            raise BlobUnreadable(damaged(self.key)) from None
        return len(data)

    def read(self, size: int = -1) -> bytes:
        """Return up to `size` bytes (all that is left when negative) from the position."""
        if size is None or size < 0:
            size = self.size - self._position
        buffer = bytearray(max(0, min(size, self.size - self._position)))
        view, got = memoryview(buffer), 0
        while got < len(buffer):
            n = self.readinto(view[got:])
            if not n:
                break
            got += n
        return bytes(buffer[:got])

    def close(self) -> None:
        self._close_body()
        super().close()


# obstore's message of an answer that is not 2xx: "... non-2xx status code: 503 Service
# Unavailable: <?xml ...><Error><Code>SlowDown</Code><Message>...</Message></Error>".
_STATUS = re.compile(r"status code: (\d{3}) ?([^:\n]*)")
_CODE = re.compile(r"<Code>([^<]*)</Code>")
_MESSAGE = re.compile(r"<Message>([^<]*)</Message>")
# Its debug source of a timeout (reqwest's), and of an answer whose headers it cannot use
# (a GET's without Content-Length, a PUT's without ETag): asking again gets the same answer.
_TIMED_OUT = re.compile(r"kind: Timeout|TimedOut")
_UNUSABLE_ANSWER = re.compile(r"source: (?:Header|Metadata) \{")
# Its errors of a request it cannot make as asked: none is an outage.
_UNMADE = (InvalidPathError, NotSupportedError, UnknownConfigurationKeyError)


def as_botocore_error(exc: Exception, operation: str, endpoint: str) -> Exception:
    """Return the botocore error that stands for obstore's `exc`, raised by `operation` (GetObject).

    So a caller handles both clients' errors alike (`UNREACHABLE`,
    `is_server_failing`, `outages.outage_of`). An answer with a status (its
    retries spent on a 5xx) is a ClientError of that status, with S3's code
    and message (XML entities read) when the answer carried its XML error,
    else the status's reason ("Forbidden"), as botocore reads them; refused
    credentials or permission a ClientError 401 or 403. A request obstore
    cannot make as asked (a key it cannot parse), or an answer whose headers
    it cannot use (a GET's without Content-Length, a PUT's without ETag: the
    object stored, or not), is an error of `exc`'s class, its debug source
    left out: no outage, as asking again would meet it again. Anything else
    (no connection, a timeout, a body cut short) is EndpointConnectionError,
    or ReadTimeoutError for a timeout: errors of a server that cannot be
    reached. `endpoint` is the server's URL, for the message.
    """
    text = str(exc)
    status: int | None = None
    found = _STATUS.search(text)
    if isinstance(exc, PermissionDeniedError):
        status = 403
    elif isinstance(exc, UnauthenticatedError):
        status = 401
    elif found:
        status = int(found[1])
    elif isinstance(exc, FileNotFoundError):
        status = 404
    if status is not None:
        code, message = _CODE.search(text), _MESSAGE.search(text)
        reason = found[2].strip() if found else ""
        error = {
            "Code": code[1] if code else str(status),
            "Message": html.unescape(message[1]) if message else reason or str(status),
        }
        refused: Exception = ClientError(
            {"Error": error, "ResponseMetadata": {"HTTPStatusCode": status}}, operation
        )
        return refused
    if isinstance(exc, _UNMADE) or _UNUSABLE_ANSWER.search(text):
        unused: Exception = type(exc)(text.split("\n\n", 1)[0])
        return unused
    unreachable: Exception = (
        ReadTimeoutError(endpoint_url=endpoint)
        if _TIMED_OUT.search(text)
        else EndpointConnectionError(endpoint_url=endpoint)
    )
    return unreachable


class _ObjectStoreBody:
    """An obstore GET's body, read as botocore's StreamingBody is: `read(n)`, `close()`.

    Raises the botocore errors of `as_botocore_error` when the body stops,
    ReadDeadlineError when a read has not received its next DEADLINE_BYTES
    (or its last bytes) `deadline` seconds after it began or received the
    MiB before. The chunks are taken as they arrive, so the clock is looked
    at between them: obstore's wait for a chunk cannot be cut short, and one
    of a set size would wait for all its bytes (a body that drips, for ever).
    """

    def __init__(self, result: Any, endpoint: str, key: str, deadline: float) -> None:
        self._chunks = iter(result.stream(min_chunk_size=1))
        self._held = memoryview(b"")
        self._endpoint, self._key, self._deadline = endpoint, key, deadline

    def read(self, size: int = -1) -> bytes:
        parts, want, got = [], size, 0
        stop = time.monotonic() + self._deadline
        while size < 0 or want > 0:
            if got >= DEADLINE_BYTES:  # a MiB in time: the next has a deadline of its own
                stop, got = time.monotonic() + self._deadline, got - DEADLINE_BYTES
            if not self._held:
                if time.monotonic() > stop:
                    self.close()
                    raise ReadDeadlineError(
                        endpoint_url=self._endpoint, seconds=self._deadline, key=self._key
                    )
                try:
                    self._held = memoryview(next(self._chunks))
                except StopIteration:
                    break
                except ObjectStoreError as exc:
                    raise as_botocore_error(exc, "GetObject", self._endpoint) from exc
            taken = self._held if size < 0 else self._held[:want]
            parts.append(bytes(taken))
            self._held = self._held[len(taken) :]
            want -= len(taken)
            got += len(taken)
        return b"".join(parts)

    def close(self) -> None:
        self._chunks = iter(())
        self._held = memoryview(b"")


# The process whose requests started obstore's runtime (its Rust threads), once one has.
# A process forked from it has no such threads, yet the runtime stays marked as started:
# a request there would wait for ever (seen with obstore 0.12.1), so it uses boto3 instead.
_RUNTIME_PID: int | None = None


def _runtime_usable() -> bool:
    """Return True when obstore's runtime may be used in this process (and mark it started)."""
    global _RUNTIME_PID
    if _RUNTIME_PID is None:
        _RUNTIME_PID = os.getpid()
    return os.getpid() == _RUNTIME_PID


# obstore reads its S3 settings from AWS_* environment variables too, where boto3 reads none
# of these. Those a request would show are set in ObjectStoreClient as boto3 has them; these
# (server-side encryption) cannot be unset there, so where one is set boto3 serves every request.
_ENCRYPTION_VARIABLES = (
    "AWS_SERVER_SIDE_ENCRYPTION",
    "AWS_SSE_KMS_KEY_ID",
    "AWS_SSE_BUCKET_KEY_ENABLED",
    "AWS_SSE_CUSTOMER_KEY_BASE64",
)


class _Unsent(Exception):
    """Stops a request of `request_url` before it is sent, carrying its URL."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


def request_url(client: Any, bucket: str, key: str) -> str:
    """Return the URL boto3's S3 `client` sends a GetObject of `key` in `bucket` to; send nothing.

    botocore resolves it (the region's host, path or virtual-hosted
    addressing: its endpoint rules) only as it builds a request; the request
    is built and signed, then stopped by a before-send hook. A presigned URL
    would not do: botocore names in it the global host s3.amazonaws.com
    whatever the region, which the buckets of a region opened since 2019
    (ap-east-1) do not answer on, and others answer with redirects. Raises
    NoCredentialsError when the client has no credentials to sign with.
    """

    def stop(request: Any, **kwargs: Any) -> None:
        raise _Unsent(request.url)

    events = client.meta.events
    events.register_first("before-send.s3.GetObject", stop, unique_id="pairfix-request-url")
    try:
        client.get_object(Bucket=bucket, Key=key)
    except _Unsent as unsent:
        return unsent.url
    finally:
        events.unregister("before-send.s3.GetObject", unique_id="pairfix-request-url")
    raise AssertionError("the before-send hook did not run")


def tls_verification(client: Any) -> bool | str:
    """Return how boto3's `client` checks a server's TLS certificate.

    True: against the default roots; False: not at all (django-storages'
    AWS_S3_VERIFY=False); a path: against that CA bundle (AWS_S3_VERIFY,
    AWS_CA_BUNDLE, a profile's ca_bundle), for a store behind a private CA.
    Read from the client's HTTP session: botocore resolved it there when it
    made the client, from all of those.
    """
    verify: bool | str = client._endpoint.http_session._verify
    return verify


# The proxies of the environment, which reqwest (obstore's HTTP client) reads by itself, as
# botocore does, but with NO_PROXY read its own way (`*`, a CIDR, a host:port).
_PROXY_VARIABLES = (
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
)


def proxy_of(client: Any, url: str) -> str | None:
    """Return the URL of the proxy boto3's `client` sends its requests to `url` through, or None.

    botocore chose it when it made the client (`Config(proxies=...)`, else
    HTTP_PROXY and HTTPS_PROXY less NO_PROXY's hosts, as urllib reads them).
    """
    proxy: str | None = client._endpoint.http_session._proxy_config.proxy_url_for(url)
    return proxy


class ObjectStoreClient:
    """A bucket's GETs and single PUTs through obstore (Rust's object_store), for less CPU.

    botocore spends about 1.5 to 1.8 ms of CPU on a request of a 300 KB
    blob here, in its Python (hooks, headers, parsing); obstore about 0.4,
    the request made and signed in Rust with the GIL released
    (`bench/s3_client.py` measures both). It is made from the storage's
    boto3 `client` and `session`: it asks botocore for the URL of an object
    (`request_url`, nothing sent) and sends its requests to that host, in
    the same addressing style (path or virtual-hosted), signed with the
    session's credentials (refreshed through botocore's own chain every
    five minutes at most). A PUT carries the body's SHA-256 as its checksum
    (x-amz-checksum-sha256; obstore computes it, and the payload is not
    hashed again to sign it), which the server checks and keeps. Timeouts
    and attempts are those of the boto3 client (`connect_timeout`,
    `read_timeout` between reads, `max_attempts`), and so is its TLS
    verification (`tls_verification`: a CA bundle's certificates are
    trusted besides the default roots), and its proxy (`proxy_of`: the
    environment's proxy settings are not read again). The settings obstore
    would read from the environment by itself (AWS_SKIP_SIGNATURE,
    AWS_REQUEST_PAYER, AWS_S3_EXPRESS...) are those boto3 has. Raises
    ValueError when one it cannot be told (`_ENCRYPTION_VARIABLES`) is set,
    OSError when the CA bundle cannot be read, so that boto3 serves every
    request. Errors of its requests are raised as
    botocore's (`as_botocore_error`), a missing key as FileNotFoundError.
    Safe to share between threads; not across a fork (S3BlobStorage makes
    one per process, and none in a process forked from one that used
    obstore: `_runtime_usable`).
    """

    def __init__(
        self, client: Any, session: boto3.Session, bucket: str, *, read_deadline: float = 120
    ) -> None:
        if found := [name for name in _ENCRYPTION_VARIABLES if os.environ.get(name)]:
            raise ValueError(f"obstore would encrypt as {', '.join(found)} say; boto3 would not")
        url = urlsplit(request_url(client, bucket, "k"))
        self.endpoint = f"{url.scheme}://{url.netloc}"
        self.read_deadline = read_deadline
        config = client.meta.config
        attempts = int((config.retries or {}).get("max_attempts", 3))
        verify = tls_verification(client)
        options: ClientConfig = {
            "allow_http": url.scheme == "http",
            "allow_invalid_certificates": verify is False,
            "connect_timeout": timedelta(seconds=config.connect_timeout),
            "read_timeout": timedelta(seconds=config.read_timeout),
            # A whole request (a blob of gigabytes streamed) is bounded by its reads only.
            "timeout": timedelta(days=1),
        }
        if isinstance(verify, str):
            options["root_certificate"] = Path(verify).read_bytes()
        if proxy := proxy_of(client, self.endpoint):
            options["proxy_url"] = proxy  # which turns off reqwest's own reading of them
        elif proxies := [value for name in _PROXY_VARIABLES if (value := os.environ.get(name))]:
            # boto3 goes straight to the store: the one way to tell reqwest is to name its host.
            options["proxy_url"], options["proxy_excludes"] = proxies[0], url.hostname or ""
        self.store = S3Store(
            bucket,
            endpoint=self.endpoint,
            region=client.meta.region_name,
            virtual_hosted_style_request=not url.path.startswith(f"/{bucket}/"),
            unsigned_payload=True,
            checksum_algorithm="sha256",
            skip_signature=False,
            request_payer=False,
            s3_express=False,
            credential_provider=Boto3CredentialProvider(session, ttl=timedelta(minutes=5)),
            client_options=options,
            retry_config={
                "max_retries": max(0, attempts - 1),
                "retry_timeout": timedelta(seconds=config.connect_timeout + config.read_timeout),
            },
        )

    def get(self, key: str, start: int = 0) -> tuple[_ObjectStoreBody, int]:
        """GET `key` from byte `start`; return (its body, the object's size in bytes).

        Raises FileNotFoundError when the bucket has no such key, ClientError
        404 when there is no such bucket (S3's NoSuchBucket).
        """
        options: Any = {"range": {"offset": start}} if start else None
        try:
            result = obstore.get(self.store, key, options=options)
        except FileNotFoundError as exc:
            code = _CODE.search(str(exc))
            if code is None or code[1] == "NoSuchKey":
                raise FileNotFoundError(f"no such blob: {key}") from None
            raise as_botocore_error(exc, "GetObject", self.endpoint) from exc
        except ObjectStoreError as exc:
            raise as_botocore_error(exc, "GetObject", self.endpoint) from exc
        body = _ObjectStoreBody(result, self.endpoint, key, self.read_deadline)
        return body, int(result.meta["size"])

    def size(self, key: str) -> int:
        """Return the size in bytes of the object `key` (a HEAD); FileNotFoundError if none."""
        try:
            return int(obstore.head(self.store, key)["size"])
        except FileNotFoundError:
            raise FileNotFoundError(f"no such blob: {key}") from None
        except ObjectStoreError as exc:
            raise as_botocore_error(exc, "HeadObject", self.endpoint) from exc

    def put(self, key: str, data: bytes, content_type: str) -> None:
        """PUT `data` as `key` in one request, its SHA-256 as the object's checksum.

        obstore's "not found" (404: NoSuchBucket, there being no object to
        miss) is raised as botocore's ClientError of S3's code, as any refusal.
        """
        try:
            obstore.put(
                self.store,
                key,
                data,
                attributes={"Content-Type": content_type},
                use_multipart=False,
            )
        except (ObjectStoreError, FileNotFoundError) as exc:
            raise as_botocore_error(exc, "PutObject", self.endpoint) from exc


class ObjectStoreReader(S3ObjectReader):
    """S3ObjectReader whose GETs go through an ObjectStoreClient, unchecked (the caller hashes)."""

    def __init__(self, client: ObjectStoreClient, key: str) -> None:
        super().__init__(None, "", key, checked=False, deadline=client.read_deadline)
        self._fast = client

    def _get(self, start: int) -> None:
        self._close_body()
        try:
            self._body, self._size = self._fast.get(self.key, start)
        except ClientError as exc:
            if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") != 416:
                raise
            self._size = self._fast.size(self.key)  # a first read at or past the end
            return
        self._body_position = start


class S3BlobStorage(S3Storage):
    """django-storages' S3Storage, reading as a stream (`S3ObjectReader`), small blobs in one PUT.

    The GETs of callers that hash what they read (`open_hashed`) and the
    single PUTs go through obstore (`ObjectStoreClient`, one per process)
    when the option `client` is "obstore" (the default; `STORAGE_CLIENT`),
    and a PUT's only parameter is its content type; the rest through the
    boto3 client rather than django-storages' resource objects
    (`bucket.Object`), whose creation costs more CPU than the request. The
    boto3 client reads timestamps with `parse_s3_timestamp`, and a single
    PUT sends its body without first waiting for `100 Continue`
    (`send_body_at_once`).
    """

    remote_io = True  # each request waits on the network: a job overlaps it (runner.ChunkBlobs)

    CLIENTS = ("obstore", "boto3")

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.check_client(self.client)
        self._fast: tuple[int, ObjectStoreClient | None] | None = None
        self._fast_lock = threading.Lock()
        self._probe_client: tuple[tuple[int, float], Any] | None = None

    @classmethod
    def check_client(cls, client: str) -> None:
        """Raise ImproperlyConfigured unless `client` (STORAGE_CLIENT) is one of CLIENTS."""
        if client not in cls.CLIENTS:
            raise ImproperlyConfigured(
                f"STORAGE_CLIENT must be one of {', '.join(cls.CLIENTS)}, not {client!r}"
            )

    def get_default_settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = super().get_default_settings()
        return {**settings, "client": "obstore", "read_deadline": 120}

    def fast_client(self) -> ObjectStoreClient | None:
        """Return this process's ObjectStoreClient, or None when the client is boto3.

        None too when the session has no credentials (anonymous access), when
        obstore cannot be set up as boto3 is (`ObjectStoreClient`), or
        in a process forked from one that had used obstore (its runtime's
        threads are not in the child): boto3 then serves every request.
        Celery's prefork children and gunicorn's workers are forked before
        any request, so each has its own.
        """
        if self.client != "obstore" or not _runtime_usable():
            return None
        fast = self._fast
        if fast is None or fast[0] != os.getpid():  # none yet, or made before a fork
            with self._fast_lock:
                fast = self._fast
                if fast is None or fast[0] != os.getpid():
                    try:
                        made: ObjectStoreClient | None = ObjectStoreClient(
                            self.connection.meta.client,
                            self._create_session(),
                            self.bucket_name,
                            read_deadline=self.read_deadline,
                        )
                    except (NoCredentialsError, ValueError, OSError, ObjectStoreError):
                        made = None
                    fast = self._fast = (os.getpid(), made)
        return fast[1]

    @property
    def connection(self) -> Any:
        """Return this thread's boto3 S3 resource, made as django-storages makes it."""
        connection = getattr(self._connections, "connection", None)
        if connection is None:
            connection = super().connection
            connection.meta.client.meta.events.register(
                "before-send.s3.PutObject", send_body_at_once, unique_id="pairfix-put-at-once"
            )
        return connection

    def _create_session(self) -> boto3.Session:
        """Return a boto3 session as django-storages makes it, its timestamps read faster."""
        core = botocore.session.get_session()
        # botocore's documented hook for the parser of every timestamp in an answer.
        core.get_component("response_parser_factory").set_parser_defaults(
            timestamp_parser=parse_s3_timestamp
        )
        if self.session_profile:
            return boto3.Session(profile_name=self.session_profile, botocore_session=core)
        return boto3.Session(
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            aws_session_token=self.security_token,
            botocore_session=core,
        )

    def _open(self, name: str, mode: str = "rb") -> File[bytes]:
        if mode != "rb":
            opened: File[bytes] = super()._open(name, mode)
            return opened
        return self._reader(name, checked=True)

    def open_hashed(self, name: str) -> File[bytes]:
        """Open `name` for reading as `open` does, for a caller that hashes every byte it reads.

        Such a caller (`models.open_blob(hashed=True)`) compares the sha256
        of all it reads with the blob's name and refuses a mismatch, so the
        GET asks for no checksum check: botocore would hash the body a
        second time (a sixth of a GET's CPU on a 300 KB blob, measured).
        """
        return self._reader(name, checked=False)

    def _reader(self, name: str, *, checked: bool) -> File[bytes]:
        key = self._normalize_name(clean_name(name))
        fast = None if checked else self.fast_client()
        reader = (
            ObjectStoreReader(fast, key)
            if fast is not None
            else S3ObjectReader(
                self.connection.meta.client,
                self.bucket_name,
                key,
                checked=checked,
                deadline=self.read_deadline,
            )
        )
        return File(reader, name)  # type: ignore[arg-type]  # an io.RawIOBase, not typing.IO

    def _save(self, name: str, content: File[bytes]) -> str:
        """Store `content` as `name`: one PUT up to the multipart threshold, else in parts.

        A blob the size of a part is held in memory for its PUT, as a part
        is; the managed transfer behind the parts also starts threads, which
        a small blob is not worth. Content that carries its `sha256` (hex;
        `models.BlobContent`) is PUT with it as the object's checksum
        (x-amz-checksum-sha256, a signed header): the server refuses bytes
        that do not hash to it, and botocore computes no checksum of its own.
        Through obstore (`fast_client`), the client computes the checksum
        itself, in Rust.
        """
        if content.size is None or content.size > self.transfer_config.multipart_threshold:
            cleaned: str = super()._save(name, content)
            return cleaned
        cleaned = clean_name(name)
        key = self._normalize_name(cleaned)
        params = self._get_write_parameters(key, content)
        fast = self.fast_client() if set(params) == {"ContentType"} else None
        if fast is not None:
            content.seek(0)
            fast.put(key, content.read(), params["ContentType"])
            return cleaned
        if sha256 := getattr(content, "sha256", ""):
            params["ChecksumAlgorithm"] = "SHA256"
            params["ChecksumSHA256"] = base64.b64encode(bytes.fromhex(sha256)).decode()
        content.seek(0)
        self.connection.meta.client.put_object(
            Bucket=self.bucket_name, Key=key, Body=content.read(), **params
        )
        return cleaned

    def check(self, timeout: float) -> None:
        """Ask the server for the bucket's headers (one HEAD); raise if it cannot or refuses.

        One attempt, `timeout` seconds to connect and as many to answer, not
        the client's own (STORAGE_READ_TIMEOUT, 30 s, and its retries): a
        probe must answer quickly. Raises botocore's errors: ConnectTimeoutError,
        ReadTimeoutError, EndpointConnectionError, ClientError; a bucket that
        does not exist as the ClientError NoSuchBucket of a GET (a HEAD's
        answer has no body to name it, only 404).
        """
        try:
            self._probe(timeout).head_bucket(Bucket=self.bucket_name)
        except ClientError as exc:
            if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") != 404:
                raise
            error = {"Code": "NoSuchBucket", "Message": "The specified bucket does not exist"}
            raise ClientError({**exc.response, "Error": error}, "HeadBucket") from None

    def _probe(self, timeout: float) -> Any:
        """Return this process's boto3 client for `check`, made as `connection`'s is."""
        with self._fast_lock:
            probe = self._probe_client
            if probe is None or probe[0] != (os.getpid(), timeout):
                config = self.client_config.merge(
                    Config(
                        connect_timeout=timeout,
                        read_timeout=timeout,
                        retries={"total_max_attempts": 1, "mode": "standard"},
                    )
                )
                client = self._create_session().client(
                    "s3",
                    region_name=self.region_name,
                    use_ssl=self.use_ssl,
                    endpoint_url=self.endpoint_url,
                    config=config,
                    verify=self.verify,
                )
                probe = self._probe_client = ((os.getpid(), timeout), client)
        return probe[1]


def parse_storage_url(url: str) -> dict[str, Any]:
    """Return S3BlobStorage options from `s3://KEY:SECRET@BUCKET/PREFIX?endpoint_url=..&region=..`.

    Key and secret are percent-decoded (a `/` in a secret is `%2F`); PREFIX
    (optional) puts every blob under that folder of the bucket;
    `endpoint_url` names a server other than AWS (http://127.0.0.1:9000),
    `region` its region. Raises ImproperlyConfigured on another scheme, no
    bucket, or an unknown query parameter.
    """
    parts = urlsplit(url)
    if parts.scheme != "s3":
        raise ImproperlyConfigured(f"STORAGE_URL must start with s3://, not {parts.scheme}://")
    if not parts.hostname:
        raise ImproperlyConfigured("STORAGE_URL names no bucket (s3://KEY:SECRET@BUCKET)")
    # The bucket as written: urlsplit lower-cases hostname, and bucket names are case-sensitive.
    options: dict[str, Any] = {"bucket_name": parts.netloc.rsplit("@", 1)[-1]}
    if parts.username:
        options["access_key"] = unquote(parts.username)
    if parts.password:
        options["secret_key"] = unquote(parts.password)
    if prefix := parts.path.strip("/"):
        options["location"] = prefix
    names = {"endpoint_url": "endpoint_url", "region": "region_name"}
    for name, values in parse_qs(parts.query, keep_blank_values=True).items():
        if name not in names:
            raise ImproperlyConfigured(
                f"STORAGE_URL: unknown parameter {name!r} (known: {', '.join(names)})"
            )
        options[names[name]] = values[-1]
    return options


def s3_storage(
    env: Mapping[str, str],
    *,
    multipart_bytes: int,
    connect_timeout: int,
    read_timeout: int,
    read_deadline: int | None = None,
) -> dict[str, Any]:
    """Return the STORAGES entry of an S3BlobStorage configured by the environment `env`.

    `STORAGE_CLIENT` picks the client of the hashed GETs and single PUTs:
    obstore (the default) or boto3 (see `S3BlobStorage`).
    `STORAGE_URL` (see `parse_storage_url`) wins over django-storages' own
    names: AWS_STORAGE_BUCKET_NAME, AWS_S3_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY, AWS_S3_REGION_NAME (AWS_S3_ADDRESSING_STYLE:
    auto, path or virtual). Blobs larger than `multipart_bytes` go up in
    parts of that size, four at once; the client gives up connecting after
    `connect_timeout` seconds and waiting for an answer after `read_timeout`,
    with up to 3 attempts; a read of a GET's body (of up to the bytes asked)
    must end within `read_deadline` seconds (four read timeouts unless
    given), else ReadDeadlineError. A GET's body is checked against the
    checksum the object was stored with when the reader asks for it (`ChecksumMode`,
    `response_checksum_validation` set to `when_required`): every read does
    but one whose caller hashes the bytes itself (`open_hashed`), so a body
    damaged on the way is refused, not repaired and stored under a hash of
    its own. No PUT's body is hashed into its signature
    (`payload_signing_enabled` off): a PUT carries a checksum instead, a
    blob's sha256 in a signed header (`S3BlobStorage._save`) or else
    botocore's own CRC32. The client does not validate a request's
    parameters before sending it (`parameter_validation` off: this code
    passes them, and the server refuses what is wrong). See
    botocore.config.Config,
    https://docs.aws.amazon.com/botocore/latest/reference/config.html.
    Raises ImproperlyConfigured as parse_storage_url does, and for an
    unknown STORAGE_CLIENT.
    """
    options: dict[str, Any] = {
        "bucket_name": env.get("AWS_STORAGE_BUCKET_NAME"),
        "endpoint_url": env.get("AWS_S3_ENDPOINT_URL"),
        "access_key": env.get("AWS_ACCESS_KEY_ID"),
        "secret_key": env.get("AWS_SECRET_ACCESS_KEY"),
        "region_name": env.get("AWS_S3_REGION_NAME"),
    }
    if url := env.get("STORAGE_URL"):
        options.update(parse_storage_url(url))
    if not options["bucket_name"]:
        raise ImproperlyConfigured("S3 storage needs a bucket: AWS_STORAGE_BUCKET_NAME")
    client = env.get("STORAGE_CLIENT", "obstore")
    S3BlobStorage.check_client(client)  # at start-up, not at the first request
    return {
        "BACKEND": "transcripts.storage.S3BlobStorage",
        "OPTIONS": {
            **{name: value for name, value in options.items() if value},
            # The name is the content's hash: the same name is the same bytes, and
            # saving never asks whether the name is taken.
            "file_overwrite": True,
            "client": client,
            "read_deadline": read_deadline if read_deadline is not None else 4 * read_timeout,
            "querystring_auth": False,
            "transfer_config": TransferConfig(
                multipart_threshold=multipart_bytes,
                multipart_chunksize=multipart_bytes,
                max_concurrency=4,
            ),
            "client_config": Config(
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
                retries={"max_attempts": 3, "mode": "standard"},
                response_checksum_validation="when_required",
                parameter_validation=False,
                s3={
                    "addressing_style": env.get("AWS_S3_ADDRESSING_STYLE", "auto"),
                    # The body's integrity rides on its checksum (a blob's sha256 in a
                    # signed header, else botocore's CRC32), not on a SHA-256 of the body
                    # in the signature, which botocore would compute for every PUT over
                    # plain HTTP, and over HTTPS for one whose checksum the caller gave.
                    "payload_signing_enabled": False,
                },
            ),
        },
    }
