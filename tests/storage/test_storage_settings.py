"""STORAGE_URL and django-storages' AWS_* names become the S3 backend's options."""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from transcripts.storage import parse_storage_url, s3_storage

LIMITS = {"multipart_bytes": 8 << 20, "connect_timeout": 2, "read_timeout": 30}


def test_it_reads_key_secret_bucket_prefix_endpoint_and_region():
    url = "s3://AKIA1:se%2Fcr%3Aet@Pairfix-Blobs/prod/a?endpoint_url=http://127.0.0.1:9000&region=eu-west-1"

    assert parse_storage_url(url) == {
        "bucket_name": "Pairfix-Blobs",
        "access_key": "AKIA1",
        "secret_key": "se/cr:et",
        "location": "prod/a",
        "endpoint_url": "http://127.0.0.1:9000",
        "region_name": "eu-west-1",
    }


def test_a_bare_bucket_takes_credentials_from_elsewhere():
    assert parse_storage_url("s3://blobs") == {"bucket_name": "blobs"}


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://blobs", "must start with s3://"),
        ("s3://key:secret@", "names no bucket"),
        ("s3://blobs?endpoint=http://x", "unknown parameter 'endpoint'"),
    ],
)
def test_it_refuses_what_it_cannot_read(url, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        parse_storage_url(url)


def test_the_aws_names_work_and_storage_url_wins():
    env = {
        "AWS_STORAGE_BUCKET_NAME": "from-aws-names",
        "AWS_S3_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_S3_REGION_NAME": "us-east-1",
    }
    options = s3_storage(env, **LIMITS)["OPTIONS"]
    assert (options["bucket_name"], options["endpoint_url"], options["access_key"]) == (
        "from-aws-names",
        "http://127.0.0.1:9000",
        "k",
    )
    assert options["transfer_config"].multipart_threshold == 8 << 20

    options = s3_storage({**env, "STORAGE_URL": "s3://other"}, **LIMITS)["OPTIONS"]
    assert (options["bucket_name"], options["access_key"]) == ("other", "k")


def test_no_bucket_is_an_error():
    with pytest.raises(ImproperlyConfigured, match="needs a bucket"):
        s3_storage({"AWS_S3_ENDPOINT_URL": "http://127.0.0.1:9000"}, **LIMITS)


def test_an_unknown_storage_client_stops_start_up_naming_the_variable():
    env = {"STORAGE_URL": "s3://k:s@bucket", "STORAGE_CLIENT": "botocore"}
    with pytest.raises(ImproperlyConfigured, match="STORAGE_CLIENT must be one of obstore, boto3"):
        s3_storage(env, multipart_bytes=8 << 20, connect_timeout=2, read_timeout=30)


def manage_py_check(**env: str) -> subprocess.CompletedProcess[str]:
    """Run `manage.py check` on S3 storage with `env` added to this process's environment."""
    whole = {**os.environ, "STORAGE_URL": "s3://k:s@bucket", **env}
    whole.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=settings.BASE_DIR,
        env=whole,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_manage_py_check_names_a_bad_storage_client_in_one_line():
    done = manage_py_check(STORAGE_CLIENT="botox")

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "manage.py: STORAGE_CLIENT must be one of obstore, boto3, not 'botox'"
    ]


def test_the_read_deadline_is_four_read_timeouts_unless_given():
    assert s3_storage({"STORAGE_URL": "s3://b"}, **LIMITS)["OPTIONS"]["read_deadline"] == 120
    given = s3_storage({"STORAGE_URL": "s3://b"}, **LIMITS, read_deadline=7)
    assert given["OPTIONS"]["read_deadline"] == 7


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        # 0 is no "off": every read would miss its deadline, and storage read as down.
        ("STORAGE_READ_DEADLINE", "0"),
        ("JOB_CHUNK_SIZE", "0"),
        ("JOB_CHUNK_BYTES", "-1"),
        ("JOB_BLOB_WINDOW", "0"),
    ],
)
def test_manage_py_check_refuses_a_size_or_deadline_below_one_naming_it(variable, value):
    done = manage_py_check(**{variable: value})

    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"manage.py: {variable} must be 1 or more, not {value}"]
