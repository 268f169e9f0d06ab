"""The fuzz tests' sessions, stored: each ingests, builds its timeline, repairs and renders.

The same generators as tests/formats/test_fuzz.py (a JSON value replaced
anywhere in a sample, which draws NUL and lone surrogates among its text, or
one to three byte-level edits), this time through the database: on
PostgreSQL (CI) they prove that no column refuses what a transcript holds.
Fewer inputs than the engine's fuzz run, each costing a few queries;
PAIRFIX_FUZZ_STORAGE_EXAMPLES asks for more.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.formats.test_fuzz import FILES, with_a_value_replaced, with_broken_bytes
from tests.helpers import run_inline
from transcripts import actions
from transcripts.engine import PRESETS

pytestmark = pytest.mark.django_db

stored_fuzz = settings(
    max_examples=int(os.environ.get("PAIRFIX_FUZZ_STORAGE_EXAMPLES", "40")),
    deadline=None,
    derandomize=True,
    database=None,
    # The database and client fixtures are shared by the examples: each adds a session.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@stored_fuzz
@given(
    path=st.sampled_from(FILES),
    data=st.data(),
    broken=st.booleans(),
    policy=st.sampled_from(sorted(PRESETS)),
)
def test_a_fuzzed_session_stores_builds_repairs_and_renders(
    alice_client, alice, workspace, path: Path, data: st.DataObject, broken: bool, policy: str
) -> None:
    raw = with_broken_bytes(path, data) if broken else with_a_value_replaced(path, data)
    session = actions.do_ingest_session(workspace, path.name, raw, acting_user=alice)
    assert session.head.read() == raw

    page = alice_client.get(session.get_absolute_url(), {"policy": policy})
    assert page.status_code == 200
    job = run_inline(actions.do_start_job(workspace, [session], policy=policy, acting_user=alice))
    item = job.items.get()
    assert job.status == "done"
    # Only a file that cannot be read fails, and for that reason.
    assert item.status != "failed" or (session.error and item.error == session.error)
    session.refresh_from_db()
    for url in [
        session.get_absolute_url(),
        reverse("transcripts:record_detail", args=[session.pk, 0]),
        job.get_absolute_url(),
    ]:
        response = alice_client.get(url)
        assert response.status_code in (200, 404), url  # 404: an unreadable file has no record 0
    assert alice_client.get(session.get_absolute_url()).status_code == 200
