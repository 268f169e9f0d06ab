"""One file with an odd name costs only itself: the others sync, and so do later syncs.

Linux file names are bytes: one that is not UTF-8 cannot be a session's name
or a column's text; a path can be longer than any index holds a key of.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.sync.conftest import age, call, reply, result, user
from transcripts.actions import sync
from transcripts.models import SyncedFile, SyncSource

pytestmark = pytest.mark.django_db

GOOD = user("u1", None, "hi") + call("a1", "u1", "toolu_1") + result("u2", "a1", "toolu_1")
GOOD += reply("a2", "u2")


def _odd_files(root: Path) -> tuple[bytes, Path]:
    """Write a file whose name is not UTF-8 and one whose path is 3,000+ bytes long."""
    not_utf8 = os.fsencode(root) + b"/caf\xe9-\xff.jsonl"
    with open(not_utf8, "wb") as f:
        f.write(GOOD)
    os.utime(not_utf8, (1, 1))
    deep = root
    for n in range(13):
        deep = deep / (f"{n:02d}" + "d" * 240)
    deep.mkdir(parents=True)
    long_path = deep / "s.jsonl"
    long_path.write_bytes(GOOD)
    age(long_path)
    return not_utf8, long_path


def test_an_odd_name_costs_only_its_file_and_is_shown(source, root, alice_client):
    (root / "good.jsonl").write_bytes(GOOD)
    age(root / "good.jsonl")
    _odd_files(root)

    report = sync.do_sync_source(source.pk)

    assert report.new >= 1
    assert SyncedFile.objects.filter(source=source, path="good.jsonl").exists()
    assert [e for e in report.errors if "caf\\xe9-\\xff.jsonl" in e] == [
        "caf\\xe9-\\xff.jsonl: the file name is not UTF-8; rename the file to sync it"
    ]
    source.refresh_from_db()
    assert (source.claim, source.claimed_at) == (None, None)
    assert "caf\\xe9-\\xff.jsonl: the file name is not UTF-8" in source.last_error
    assert source.error_count == len(report.errors)
    page = alice_client.get(reverse("transcripts:source_detail", args=[source.pk]))
    assert page.status_code == 200
    assert "the file name is not UTF-8" in page.content.decode()

    # Later syncs run (no "another sync is running"), and take new files.
    (root / "later.jsonl").write_bytes(GOOD)
    age(root / "later.jsonl")
    again = sync.do_sync_source(source.pk)
    assert not again.skipped
    assert SyncedFile.objects.filter(source=source, path="later.jsonl").exists()


def test_a_path_longer_than_a_column_syncs_or_costs_only_itself(source, root):
    _, long_path = _odd_files(root)
    (root / "good.jsonl").write_bytes(GOOD)
    age(root / "good.jsonl")

    report = sync.do_sync_source(source.pk)

    rel = str(long_path.relative_to(root))
    stored = SyncedFile.objects.filter(source=source, path=rel).exists()
    refused = [e for e in report.errors if e.startswith(rel[:40])]
    assert stored or len(refused) == 1
    assert SyncedFile.objects.filter(source=source, path="good.jsonl").exists()
    assert SyncSource.objects.get(pk=source.pk).claim is None
    assert not sync.do_sync_source(source.pk).skipped


def test_the_sync_command_exits_non_zero_when_a_file_could_not_be_synced(source, root, capsys):
    (root / "good.jsonl").write_bytes(GOOD)
    _odd_files(root)

    with pytest.raises(CommandError, match="could not be synced"):
        call_command("sync", "--no-progress")

    err = capsys.readouterr().err
    assert "caf\\xe9-\\xff.jsonl: the file name is not UTF-8" in err
    assert SyncedFile.objects.filter(source=source, path="good.jsonl").exists()
