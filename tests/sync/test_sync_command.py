import os

import pytest
from django.core.management import CommandError, call_command

from tests.sync.conftest import call, user
from transcripts.models import Session, SyncSource

pytestmark = pytest.mark.django_db

START = user("u1", None, "hi") + call("a1", "u1", "toolu_1")


def test_it_adds_a_folder_and_syncs_it(root, capsys):
    (root / "s.jsonl").write_bytes(START)

    call_command("sync", "--add", str(root), "--workspace", "Ops", "--format", "claude_code")

    source = SyncSource.objects.get()
    assert (source.workspace.name, source.format, source.path) == ("Ops", "claude_code", str(root))
    assert Session.objects.get().source == source
    out = capsys.readouterr().out
    assert f"added source {source.pk}: {root}" in out
    assert f"source {source.pk}: 1 files: 1 new" in out


def test_it_syncs_every_enabled_source(source, root, capsys):
    (root / "s.jsonl").write_bytes(START)

    call_command("sync", "--no-progress")

    assert Session.objects.count() == 1
    assert "1 new" in capsys.readouterr().out


def test_it_refuses_a_folder_outside_the_roots(root, tmp_path, settings):
    settings.SYNC_ROOTS = [root]
    with pytest.raises(CommandError, match="not under an allowed sync root"):
        call_command("sync", "--add", str(tmp_path))


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("relative/path", "give an absolute path"),
        ("{root}/../projects", "a path with '..' is not accepted"),
        ("{root}/missing", "no such folder"),
    ],
)
def test_it_refuses_bad_paths(root, path, reason):
    with pytest.raises(CommandError, match=reason):
        call_command("sync", "--add", path.format(root=root))
    assert not SyncSource.objects.exists()


def test_with_no_roots_configured_nothing_can_be_added(root, settings):
    settings.SYNC_ROOTS = []
    with pytest.raises(CommandError, match="set SYNC_ROOTS"):
        call_command("sync", "--add", str(root))


def test_a_symlinked_folder_leading_out_of_the_roots_is_refused(root, tmp_path, settings):
    outside = tmp_path / "outside"
    outside.mkdir()
    settings.SYNC_ROOTS = [root]
    (root / "escape").symlink_to(outside)
    with pytest.raises(CommandError, match="not under an allowed sync root"):
        call_command("sync", "--add", str(root / "escape"))


def test_the_refusal_says_a_manage_py_command_needs_the_roots_in_its_own_environment(
    root, tmp_path, settings
):
    # Only honcho (`make run`) reads .env: manage.py reads its own environment.
    settings.SYNC_ROOTS = [root]
    outside = tmp_path / "other"
    outside.mkdir()
    with pytest.raises(CommandError) as refused:
        call_command("sync", "--add", str(outside))
    line = f"SYNC_ROOTS={root}{os.pathsep}{outside}"
    assert str(refused.value).endswith(
        f"To allow this one, add the line {line} to the .env file beside manage.py, which "
        "`make run` reads for the server, the worker and beat (or set it in their "
        "environment), then restart Pairfix. A manage.py command does not read .env: give it "
        f"the variable in its own environment ({line} manage.py ...)."
    )
