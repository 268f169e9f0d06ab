import pytest
from django.core.management import CommandError, call_command

from tests.helpers import SAMPLES, sample
from transcripts.models import AuditRecord, Session, Workspace

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
