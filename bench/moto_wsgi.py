"""moto's S3 API as a WSGI application, for bench/jobs.py to serve with keep-alive connections.

moto's own server (werkzeug's development server) closes the connection
after every answer; a real S3 endpoint keeps it open. gunicorn's threaded
worker keeps it open as S3 does, in one process, so the buckets moto
holds in memory are the same for every connection.

BENCH_S3_LATENCY_MS, when set, holds each request that many milliseconds
before moto serves it: a real S3's round trip, which costs the caller's
CPUs nothing (the thread sleeps).
"""

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

moto = DomainDispatcherApplication(create_backend_app)
LATENCY = float(os.getenv("BENCH_S3_LATENCY_MS", "0")) / 1000


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """Serve one request through moto, after the latency asked for."""
    if LATENCY:
        time.sleep(LATENCY)
    return moto(environ, start_response)
