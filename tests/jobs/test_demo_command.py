import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from tests.helpers import SAMPLES
from transcripts import actions
from transcripts.models import Session, Workspace

pytestmark = pytest.mark.django_db


def test_it_creates_the_demo_login_and_sessions_once(capsys, tmp_path, settings, rf):
    settings.SYNC_ROOTS = [tmp_path]
    call_command("demo")
    call_command("demo")

    # The login throttling backend (django-axes) needs the request a login comes with.
    user = authenticate(rf.post("/accounts/login/"), username="demo", password="pairfix-demo")
    assert user is not None
    workspace = Workspace.objects.for_user(user).get()
    names = sorted(
        Session.objects.filter(workspace=workspace, source=None).values_list("name", flat=True)
    )
    expected = sorted(
        p.name
        for folder in ("formats", "cases")
        for p in (SAMPLES / folder).iterdir()
        if not p.name.endswith(".expect.json") and p.suffix in (".json", ".jsonl")
    )
    assert names == expected
    out = capsys.readouterr().out
    assert out.count("as demo / pairfix-demo") == 2
    assert "0 session(s) added" in out
    # A Claude Code projects folder followed as a sync source, with a subagent's file.
    synced = Session.objects.filter(workspace=workspace).exclude(source=None)
    parent = synced.get(name="-home-demo-shop/s-1.jsonl")
    assert synced.get(name="-home-demo-shop/s-1/subagents/agent-demo.jsonl").parent == parent
    assert "2 files: 2 new" in out and "2 files: 2 unchanged" in out


def test_the_demo_sessions_are_in_the_search_before_any_page_is_opened(capsys, tmp_path, settings):
    # A first user's search finds the demo sessions at once: `make run` indexes them.
    settings.SYNC_ROOTS = [tmp_path]
    call_command("demo")
    workspace = Workspace.objects.get(name="Demo")
    assert workspace.sessions.count() > 20
    assert not actions.unindexed(workspace.sessions.all()).exists()
    assert "Demo sessions indexed for the search: " in capsys.readouterr().out
    call_command("demo")  # every `make run`: nothing left to index
    assert "indexed for the search" not in capsys.readouterr().out
