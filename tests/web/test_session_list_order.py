"""The session list's orders and its repaired-state and source filters."""

import re

import pytest
from django.urls import reverse

from tests.helpers import run_inline, sample
from transcripts import actions
from transcripts.actions import sync
from transcripts.models import Session

URL = reverse("transcripts:session_list")
pytestmark = pytest.mark.django_db


def listed(html):
    """Return the session names in the list, in order."""
    return re.findall(r'<td><a href="/sessions/\d+/">([^<]+)</a>', html)


@pytest.fixture
def three(workspace, ingest):
    """Return sessions of 11, 5 and 12 records, stored in that order."""
    return [
        ingest(workspace, "b-claude.jsonl", sample("formats/claude_code.jsonl")),
        ingest(workspace, "c-gemini.json", sample("formats/gemini.json")),
        ingest(workspace, "a-codex.jsonl", sample("formats/codex_rollout.jsonl")),
    ]


def test_newest_first_by_default(alice_client, three):
    assert listed(alice_client.get(URL).content.decode()) == [
        "a-codex.jsonl",
        "c-gemini.json",
        "b-claude.jsonl",
    ]


@pytest.mark.parametrize(
    "sort, names",
    [
        ("oldest", ["b-claude.jsonl", "c-gemini.json", "a-codex.jsonl"]),
        ("name", ["a-codex.jsonl", "b-claude.jsonl", "c-gemini.json"]),
        ("records", ["a-codex.jsonl", "b-claude.jsonl", "c-gemini.json"]),
    ],
)
def test_it_sorts(alice_client, three, sort, names):
    counts = {s.name: s.record_count for s in Session.objects.all()}
    assert counts == {"b-claude.jsonl": 11, "c-gemini.json": 5, "a-codex.jsonl": 16}
    assert listed(alice_client.get(URL, {"sort": sort}).content.decode()) == names


def test_the_last_written_come_first_and_the_never_written_last(
    alice_client, workspace, alice, three
):
    from django.utils import timezone

    actions.do_ingest_session(
        workspace,
        "synced.jsonl",
        sample("formats/claude_code.jsonl"),
        acting_user=alice,
        last_write=timezone.now(),
    )
    assert listed(alice_client.get(URL, {"sort": "written"}).content.decode())[0] == "synced.jsonl"


def test_it_filters_by_repaired_state(alice_client, alice, workspace, three):
    run_inline(actions.do_start_job(workspace, [three[0]], policy="discard", acting_user=alice))
    html = alice_client.get(URL, {"repaired": "yes"}).content.decode()
    assert listed(html) == ["b-claude.jsonl"]
    assert (
        '<span class="badge repaired" title="the head revision was written by a repair">'
        "repaired (discard)</span>" in html
    )
    html = alice_client.get(URL, {"repaired": "no"}).content.decode()
    assert listed(html) == ["a-codex.jsonl", "c-gemini.json"]


def test_it_filters_by_source_and_names_it(
    alice_client, alice, workspace, three, settings, tmp_path
):
    settings.SYNC_ROOTS = [tmp_path]
    (tmp_path / "s.jsonl").write_bytes(sample("formats/claude_code.jsonl"))
    sync.do_grant_folder(workspace, str(tmp_path), acting_user=None)
    source = sync.do_create_source(workspace, str(tmp_path), acting_user=alice, name="laptop")
    sync.do_sync_source(source.pk)
    html = alice_client.get(URL, {"source": source.pk}).content.decode()
    assert listed(html) == ["s.jsonl"]
    assert f'<a href="{source.get_absolute_url()}">laptop</a>' in html


def test_the_order_is_not_part_of_a_jobs_selection(alice_client, alice, workspace, three):
    response = alice_client.post(
        reverse("transcripts:start_repair"),
        {
            "scope": "filter",
            "sort": "name",
            "format": "gemini",
            "policy": "synthesize",
            "kind": "dry_run",
        },
    )
    assert response.status_code == 302
    job = workspace.jobs.get()
    assert job.selection == {"format": "gemini"}
    assert job.total == 1
