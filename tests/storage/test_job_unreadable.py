"""A dry run on S3 whose session's blob is damaged: failed for good, and no retry offered."""

from __future__ import annotations

import pytest

from tests.helpers import run_inline, sample
from tests.storage.test_storage_failures import client_for, put_one_bit_flipped
from transcripts import actions

pytestmark = [pytest.mark.s3, pytest.mark.django_db, pytest.mark.usefixtures("s3_settings")]


def test_a_dry_run_offers_no_retry_for_a_damaged_blob(alice, workspace, s3_endpoint, bucket):
    raw = sample("formats/claude_code.jsonl")
    session = actions.do_ingest_session(workspace, "s.jsonl", raw, acting_user=alice)
    put_one_bit_flipped(s3_endpoint, bucket, session.head.sha256, raw)

    job = run_inline(
        actions.do_start_job(
            workspace, [session], kind="dry_run", policy="synthesize", acting_user=alice
        )
    )

    item = job.items.get()
    assert (job.failed, item.status, item.unreadable) == (1, "failed", True)
    assert "its bytes are damaged" in item.error
    html = client_for(alice).get(job.get_absolute_url()).content.decode()
    assert "1 session cannot be read: its stored file is missing or damaged" in html
    assert "Retry 1 failed" not in html
