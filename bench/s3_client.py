"""Benchmark: the S3 client's CPU per GET and per PUT of a blob, as a repair job makes them.

    .venv/bin/python bench/s3_client.py [--blobs 60] [--kib 300] [--rounds 15]

Starts moto's S3 API with keep-alive connections (bench/jobs.py's S3Server),
stores `--blobs` blobs of `--kib` KiB (half random bytes, half zeros), then
each round, in one process and on the same blobs, PUTs every blob as a job
stores a repair (`default_storage.save` of a BlobContent that carries its
sha256) and GETs every blob as a job reads a base (`open_hashed`, read
whole, hashed against its name), through two S3BlobStorages:

- `obstore`: as `transcripts.storage.s3_storage` builds it (those requests
  go through obstore);
- `boto3`: the same with `STORAGE_CLIENT=boto3` (through botocore, as
  Pairfix configures it);
- `defaults`: boto3 with botocore's defaults where Pairfix sets its own
  (every GET's body checked by botocore too, parameters validated,
  timestamps read by botocore's parser, `Expect: 100-continue` on a PUT).

Their order turns from round to round. It prints the median over
the rounds of the CPU time (this process: user and system) per request, and
of the clock per request, which counts moto too (on the same CPUs).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blobs", type=int, default=60)
    parser.add_argument("--kib", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--s3-ports", default="9160-9199", metavar="LOW-HIGH")
    args = parser.parse_args()

    import django

    django.setup()
    from botocore.config import Config
    from jobs import S3Server
    from storages.backends.s3 import S3Storage

    from transcripts.models import BlobContent, blob_name
    from transcripts.storage import S3BlobStorage, s3_storage

    class Defaults(S3BlobStorage):
        """S3BlobStorage with django-storages' own session and connection, every GET checked."""

        _create_session = S3Storage._create_session
        connection = S3Storage.connection

        def open_hashed(self, name: str) -> Any:
            return self._reader(name, checked=True)

    low, _, high = args.s3_ports.partition("-")
    server = S3Server(range(int(low), int(high or low) + 1))
    try:
        entry = s3_storage(
            {"STORAGE_URL": server.url},
            multipart_bytes=8 * 1024 * 1024,
            connect_timeout=2,
            read_timeout=30,
        )
        options = dict(entry["OPTIONS"])
        configured = S3BlobStorage(**options)
        botocore_defaults = options["client_config"].merge(
            Config(response_checksum_validation="when_supported", parameter_validation=True)
        )
        boto3_options = {**options, "client": "boto3"}
        defaults = {**boto3_options, "client_config": botocore_defaults}
        storages = {
            "obstore": configured,
            "boto3": S3BlobStorage(**boto3_options),
            "defaults": Defaults(**defaults),
        }
        half = args.kib * 1024 // 2
        blobs = [os.urandom(half) + bytes(half) for _ in range(args.blobs)]
        named = [(blob_name(hashlib.sha256(b).hexdigest()), b) for b in blobs]
        spent: dict[str, dict[str, list[float]]] = {
            label: {"PUT cpu": [], "GET cpu": [], "PUT clock": [], "GET clock": []}
            for label in storages
        }
        for storage in storages.values():  # the client made, its connection open
            for name, data in named:
                storage.save(name, BlobContent.of(data, name.rsplit("/", 1)[1]))
        for n in range(args.rounds):
            order = list(storages.items())
            for label, storage in order[n % len(order) :] + order[: n % len(order)]:
                cpu, clock = time.process_time(), time.perf_counter()
                for name, data in named:
                    storage.save(name, BlobContent.of(data, name.rsplit("/", 1)[1]))
                spent[label]["PUT cpu"].append(time.process_time() - cpu)
                spent[label]["PUT clock"].append(time.perf_counter() - clock)
                cpu, clock = time.process_time(), time.perf_counter()
                for name, data in named:
                    with storage.open_hashed(name) as f:
                        read = f.read()
                    assert hashlib.sha256(read).hexdigest() == name.rsplit("/", 1)[1]
                    assert len(read) == len(data)
                spent[label]["GET cpu"].append(time.process_time() - cpu)
                spent[label]["GET clock"].append(time.perf_counter() - clock)
        print(
            f"{args.blobs} blobs of {args.kib} KiB, {args.rounds} rounds; "
            "ms per request, median of the rounds (GET: read whole and hashed)"
        )
        print(f"{'':12}{'PUT CPU':>10}{'GET CPU':>10}{'PUT clock':>11}{'GET clock':>11}")
        for label, times in spent.items():
            row = {key: statistics.median(each) / args.blobs * 1000 for key, each in times.items()}
            print(
                f"{label:12}{row['PUT cpu']:10.3f}{row['GET cpu']:10.3f}"
                f"{row['PUT clock']:11.3f}{row['GET clock']:11.3f}"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
