"""The S3 client's timestamp parser: the same datetimes as botocore's own, faster for HTTP-dates."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from botocore.utils import parse_timestamp

from transcripts.storage import parse_s3_timestamp


def test_an_http_date_is_read_as_utc():
    parsed = parse_s3_timestamp("Thu, 03 Dec 2026 14:05:09 GMT")

    assert parsed == datetime(2026, 12, 3, 14, 5, 9, tzinfo=UTC)
    assert parsed.utcoffset() == parse_timestamp("Thu, 03 Dec 2026 14:05:09 GMT").utcoffset()


@pytest.mark.parametrize(
    "value",
    [
        "Thu, 03 Dec 2026 14:05:09 GMT",
        "2026-12-03T14:05:09.000Z",  # a listing's LastModified
        "2026-12-03T14:05:09+01:00",
        "1796306709",  # epoch seconds
        "Thu, 03 Dec 2026 14:05:09 -0000",  # an HTTP-date of no known zone
    ],
)
def test_every_form_gives_what_botocore_gives(value):
    parsed = parse_s3_timestamp(value)

    assert parsed == parse_timestamp(value)
    assert parsed.tzinfo is not None


def test_what_is_no_timestamp_is_refused_as_botocore_refuses_it():
    with pytest.raises(ValueError, match="Invalid timestamp"):
        parse_s3_timestamp("yesterday")
