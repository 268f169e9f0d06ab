import gzip
import zipfile

import pytest
from django.core.management import CommandError, call_command

from tests.helpers import SAMPLES, sample
from transcripts.models import AuditRecord, Membership, Session, Workspace

pytestmark = pytest.mark.django_db


def test_it_stores_each_file_as_a_session(capsys):
    call_command(
        "ingest",
        str(SAMPLES / "formats/claude_code.jsonl"),
        str(SAMPLES / "formats/openai_chat.json"),
        "--workspace",
        "Imports",
    )
    workspace = Workspace.objects.get(name="Imports")
    sessions = {s.name: s for s in Session.objects.filter(workspace=workspace)}
    assert sessions.keys() == {"claude_code.jsonl", "openai_chat.json"}
    assert sessions["claude_code.jsonl"].head.read() == sample("formats/claude_code.jsonl")
    assert sessions["openai_chat.json"].fault_counts == {"missing_result": 1}
    assert AuditRecord.objects.filter(op="ingest", acting_user=None).count() == 2
    out = capsys.readouterr().out
    assert "claude_code.jsonl: session" in out
    assert "(claude_code) missing_result=1" in out


def test_it_records_the_acting_user_and_makes_them_owner(alice):
    call_command("ingest", str(SAMPLES / "formats/openclaw.jsonl"), "--user", "alice")
    session = Session.objects.get()
    assert session.created_by == alice
    assert session.workspace.name == "default"
    assert session.workspace.memberships.get().user == alice


def test_it_keeps_unreadable_files_and_fails_on_missing_ones(tmp_path, capsys):
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"{oops\n")
    with pytest.raises(CommandError, match="1 file"):
        call_command("ingest", str(tmp_path / "absent.jsonl"), str(broken))
    session = Session.objects.get()
    assert session.head.read() == b"{oops\n"
    assert session.error
    captured = capsys.readouterr()
    assert "absent.jsonl: cannot read" in captured.err
    assert "broken.jsonl: session" in captured.out
    assert "unreadable" in captured.out


def test_it_rejects_an_unknown_user():
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("ingest", str(SAMPLES / "formats/openclaw.jsonl"), "--user", "nobody")


def test_it_warns_when_nobody_can_see_the_sessions(capsys):
    call_command("ingest", str(SAMPLES / "formats/openclaw.jsonl"))
    assert not Session.objects.get().workspace.memberships.exists()
    err = capsys.readouterr().err
    assert "workspace 'default' has no members, so nobody can see its sessions" in err
    assert "--user NAME" in err


def test_it_makes_the_user_owner_of_an_existing_workspace(alice, capsys):
    call_command("ingest", str(SAMPLES / "formats/openclaw.jsonl"))
    capsys.readouterr()
    call_command(
        "ingest",
        str(SAMPLES / "formats/claude_code.jsonl"),
        "--workspace",
        "default",
        "--user",
        "alice",
    )
    workspace = Workspace.objects.get()
    assert list(workspace.memberships.values_list("user__username", "role")) == [("alice", "admin")]
    assert Session.objects.for_user(alice).count() == 2
    assert "no members" not in capsys.readouterr().err


def test_it_keeps_the_role_of_an_existing_member(alice, bob, other_workspace, capsys):
    Membership.objects.create(user=alice, workspace=other_workspace)
    call_command(
        "ingest", str(SAMPLES / "formats/openclaw.jsonl"), "--workspace", "Beta", "--user", "alice"
    )
    assert other_workspace.memberships.get(user=alice).role == "viewer"
    assert Session.objects.get().workspace == other_workspace
    assert "no members" not in capsys.readouterr().err


def test_it_rejects_a_workspace_name_over_the_length_limit():
    with pytest.raises(CommandError, match="at most 100 characters"):
        call_command("ingest", str(SAMPLES / "formats/openclaw.jsonl"), "--workspace", "w" * 101)
    assert not Workspace.objects.exists()
    assert not Session.objects.exists()


def test_it_unpacks_gz_and_zip_files(tmp_path, capsys):
    (tmp_path / "cc.jsonl.gz").write_bytes(gzip.compress(sample("formats/claude_code.jsonl")))
    with zipfile.ZipFile(tmp_path / "more.zip", "w") as archive:
        archive.writestr("a/openclaw.jsonl", sample("formats/openclaw.jsonl"))
        archive.writestr("b/openai_chat.json", sample("formats/openai_chat.json"))
    call_command("ingest", str(tmp_path / "cc.jsonl.gz"), str(tmp_path / "more.zip"))
    sessions = {s.name: s for s in Session.objects.all()}
    assert sessions.keys() == {"cc.jsonl", "openclaw.jsonl", "openai_chat.json"}
    assert sessions["openclaw.jsonl"].head.read() == sample("formats/openclaw.jsonl")
    assert sessions["cc.jsonl"].format == "claude_code"
    assert "more.zip: openai_chat.json: session" in capsys.readouterr().out


def test_it_stores_nothing_of_an_archive_past_the_limit(tmp_path, capsys):
    with zipfile.ZipFile(tmp_path / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("ok.jsonl", sample("formats/openclaw.jsonl"))
        archive.writestr("big.jsonl", b"\0" * 2**21)
    with pytest.raises(CommandError, match="breaks the upload limits .*: nothing was stored"):
        call_command("ingest", str(tmp_path / "bomb.zip"), "--max-size", str(2**20))
    assert Session.objects.count() == 0
    err = capsys.readouterr().err
    assert (
        "bomb.zip: not stored: “big.jsonl” in “bomb.zip” decompresses to more than 1.0 MiB" in err
    )


def test_a_plain_file_obeys_the_size_limit(tmp_path, capsys, settings):
    settings.UPLOAD_MAX_FILE_SIZE = 1000
    (tmp_path / "big.jsonl").write_bytes(b"x" * 5000)
    (tmp_path / "small.jsonl").write_bytes(b"{}\n")
    with pytest.raises(CommandError, match="nothing was stored"):
        call_command("ingest", str(tmp_path / "small.jsonl"), str(tmp_path / "big.jsonl"))
    assert Session.objects.count() == 0
    assert not Workspace.objects.exists()
    err = capsys.readouterr().err
    assert "big.jsonl: not stored: “big.jsonl” is more than 1000 bytes; each session" in err
    # --max-size raises the limit for one run.
    call_command("ingest", str(tmp_path / "big.jsonl"), "--max-size", "5000")
    assert Session.objects.get().head.size == 5000


def test_one_run_obeys_the_file_count(tmp_path, capsys, settings):
    settings.UPLOAD_MAX_FILES = 2
    paths = []
    for n in range(3):
        paths.append(tmp_path / f"{n}.jsonl")
        paths[-1].write_bytes(b"{}\n")
    with pytest.raises(CommandError, match="nothing was stored"):
        call_command("ingest", *map(str, paths))
    assert Session.objects.count() == 0
    assert "This upload holds more than 2 files; one upload may hold at most 2." in (
        capsys.readouterr().err
    )
    call_command("ingest", *map(str, paths), "--max-files", "3")
    assert Session.objects.count() == 3


def test_the_total_counts_every_file_of_a_run(tmp_path, capsys):
    for n in range(3):
        (tmp_path / f"{n}.jsonl").write_bytes(b"x" * 600)
    with pytest.raises(CommandError, match="nothing was stored"):
        call_command(
            "ingest",
            *(str(tmp_path / f"{n}.jsonl") for n in range(3)),
            "--max-total",
            "1500",
            "--max-size",
            "1000",
        )
    assert Session.objects.count() == 0
    assert "This upload holds more than 1.5 KiB of sessions" in capsys.readouterr().err


def test_a_tar_archive_is_refused_as_one_not_as_a_limit(tmp_path, capsys):
    (tmp_path / "x.tar.gz").write_bytes(b"not read")
    with pytest.raises(CommandError) as refused:
        call_command("ingest", str(tmp_path / "x.tar.gz"))
    assert str(refused.value) == (
        f"{tmp_path / 'x.tar.gz'} cannot be ingested (the line above says why): nothing was stored"
    )
    assert capsys.readouterr().err.startswith(
        f"{tmp_path / 'x.tar.gz'}: not stored: “x.tar.gz” is a tar archive: upload a .zip"
    )
    assert Session.objects.count() == 0
