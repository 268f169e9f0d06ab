"""Fixtures for the storage tier: a real S3 API server (moto's) on 127.0.0.1, and a bucket.

The server is moto's standalone server, started once per test session as a
subprocess on a free port of 9100-9139 (or of S3_TEST_PORTS=LOW-HIGH); boto3
speaks HTTP to it like to any S3-compatible store. Each test gets a bucket of
its own, and settings whose default storage is that bucket, built from a
STORAGE_URL the way settings.py builds it; MEDIA_ROOT is an empty folder of
the test's, which must stay empty.
"""

from __future__ import annotations

import contextlib
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from transcripts.storage import s3_storage

_low, _, _high = os.getenv("S3_TEST_PORTS", "9100-9139").partition("-")
PORTS = range(int(_low), int(_high or _low) + 1)
KEY, SECRET, REGION = "pairfix-test", "pairfix-test-secret", "us-east-1"
# The smallest part S3 accepts: a blob above it goes up in several parts.
MULTIPART_BYTES = 5 * 1024 * 1024


def free_port(ports: range) -> int:
    """Return a port of `ports` nothing listens on at 127.0.0.1; raise if none is free.

    Each pytest-xdist worker starts its search at a port of its own (gw1 a
    quarter of the way in), so two starting at once do not pick the same one.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    shift = (int(worker[2:]) if worker[2:].isdigit() else 0) * max(1, len(ports) // 4)
    for k in range(len(ports)):
        port = ports[(k + shift) % len(ports)]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1}")


# A socket bound on 127.0.0.1 and never listening: connections to its port are refused.
_REFUSING: list[socket.socket] = []


def refusing_port() -> int:
    """Return a port of 127.0.0.1 that refuses every connection while this process lives.

    It is held by a socket bound there that never listens, so no server (another
    pytest-xdist worker's stand-in) can take it meanwhile, as one could take a
    port `free_port` only found free.
    """
    if not _REFUSING:
        held = socket.socket()
        held.bind(("127.0.0.1", 0))
        _REFUSING.append(held)
    port: int = _REFUSING[0].getsockname()[1]
    return port


@contextlib.contextmanager
def serving(server: socketserver.BaseServer) -> Iterator[int]:
    """Serve `server` (bound to 127.0.0.1) on a thread of its own; yield its port; stop it."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]  # type: ignore[misc]  # an (address, port) pair
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start moto's S3 server; yield its endpoint URL; stop it at the end of the session."""
    port = free_port(PORTS)
    log = tmp_path_factory.mktemp("moto") / "server.log"
    server = Path(sys.executable).with_name("moto_server")
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=out
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start: {log.read_text()}") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)


def s3_client(endpoint: str) -> Any:
    """Return a boto3 S3 client of the test server (to look at the bucket from outside)."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=KEY,
        aws_secret_access_key=SECRET,
        region_name=REGION,
    )


@pytest.fixture
def bucket(s3_endpoint: str) -> str:
    """Create a bucket of this test's on the server; return its name."""
    name = f"pairfix-{uuid.uuid4().hex[:12]}"
    s3_client(s3_endpoint).create_bucket(Bucket=name)
    return name


def storage_url(endpoint: str, bucket: str) -> str:
    """Return the STORAGE_URL of `bucket` on the test server."""
    return f"s3://{KEY}:{SECRET}@{bucket}?endpoint_url={endpoint}&region={REGION}"


def keys(endpoint: str, bucket: str) -> dict[str, int]:
    """Return {key: size} of every object in `bucket`."""
    pages = s3_client(endpoint).get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {obj["Key"]: obj["Size"] for page in pages for obj in page.get("Contents", [])}


@pytest.fixture
def media(tmp_path: Path) -> Path:
    """Return an empty folder for MEDIA_ROOT."""
    folder = tmp_path / "media"
    folder.mkdir()
    return folder


@pytest.fixture(params=["obstore", "boto3"])
def storage_client(request: pytest.FixtureRequest) -> str:
    """Return the client of the hashed GETs and single PUTs (STORAGE_CLIENT): each S3 test
    runs with both; a test of one client's requests picks it (`indirect` parametrize)."""
    client: str = request.param
    return client


@pytest.fixture
def s3_settings(
    settings: Any, s3_endpoint: str, bucket: str, media: Path, storage_client: str
) -> Any:
    """Make the bucket the default storage (and `media` MEDIA_ROOT); return the settings."""
    settings.MEDIA_ROOT = str(media)
    settings.STORAGES = {
        **settings.STORAGES,
        "default": s3_storage(
            {"STORAGE_URL": storage_url(s3_endpoint, bucket), "STORAGE_CLIENT": storage_client},
            multipart_bytes=MULTIPART_BYTES,
            connect_timeout=2,
            read_timeout=30,
        ),
    }
    return settings
