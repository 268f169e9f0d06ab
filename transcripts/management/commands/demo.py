import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from transcripts import actions
from transcripts.actions import sync
from transcripts.engine import DEFAULT_POLICY
from transcripts.models import Membership, SyncSource, Timeline, Workspace

DEMO_USERNAME = "demo"
# A local demo login, printed on every run; not a secret.
DEMO_PASSWORD = "pairfix-demo"
DEMO_WORKSPACE = "Demo"
SAMPLES = settings.BASE_DIR / "demo" / "samples"


def demo_files() -> list[Path]:
    """Return the demo sessions: every sample transcript, without the expectation files."""
    return sorted(
        path
        for folder in ("formats", "cases")
        for path in (SAMPLES / folder).iterdir()
        if path.suffix in (".json", ".jsonl") and not path.name.endswith(".expect.json")
    )


class Command(BaseCommand):
    help = "Create the demo user and workspace and load the sample sessions (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        user, created = get_user_model().objects.get_or_create(username=DEMO_USERNAME)
        if created:
            # Only when made: setting it again would log out every browser logged in as demo.
            user.set_password(DEMO_PASSWORD)
            user.save()
        workspace = Workspace.objects.filter(name=DEMO_WORKSPACE).first()
        if workspace is None:
            workspace = actions.do_create_workspace(DEMO_WORKSPACE, acting_user=user)
        Membership.objects.get_or_create(
            user=user, workspace=workspace, defaults={"role": Membership.Role.ADMIN}
        )
        loaded = set(workspace.sessions.values_list("name", flat=True))
        added = 0
        for path in demo_files():
            if path.name not in loaded:
                actions.do_ingest_session(workspace, path.name, path.read_bytes(), acting_user=user)
                added += 1
        self.stdout.write(f"Demo workspace {workspace.name!r}: {added} session(s) added.")
        self._sync_demo(workspace, user)
        # Indexed now (each sample is small: built in this process), so that the search
        # finds the demo sessions before any of their pages is opened.
        waiting = actions.unindexed(workspace.sessions.all()).select_related("head")
        indexed = sum(
            actions.timeline_for(session, DEFAULT_POLICY).status == Timeline.Status.READY
            for session in waiting
        )
        if indexed:
            self.stdout.write(f"Demo sessions indexed for the search: {indexed}.")
        port = os.environ.get("PAIRFIX_PORT", "8000")
        self.stdout.write(
            f"Log in at http://127.0.0.1:{port}/ as {DEMO_USERNAME} / {DEMO_PASSWORD}"
        )

    def _sync_demo(self, workspace: Workspace, user: Any) -> None:
        """Make a Claude Code projects folder under the first sync root and follow it."""
        if not settings.SYNC_ROOTS:
            return
        folder = settings.SYNC_ROOTS[0] / "demo-claude-projects" / "-home-demo-shop"
        if not folder.exists():
            folder.mkdir(parents=True)
            session = (SAMPLES / "formats" / "claude_code.jsonl").read_bytes()
            (folder / "s-1.jsonl").write_bytes(session)
            subagents = folder / "s-1" / "subagents"
            subagents.mkdir(parents=True)
            (subagents / "agent-demo.jsonl").write_bytes(session)
        root = folder.parent
        source = SyncSource.objects.filter(workspace=workspace, path=str(root.resolve())).first()
        if source is None:
            sync.do_grant_folder(workspace, str(root), acting_user=None)
            source = sync.do_create_source(
                workspace,
                str(root),
                acting_user=user,
                name="Demo Claude Code projects",
                format="claude_code",
            )
        report = sync.do_sync_source(source.pk)
        self.stdout.write(f"Demo sync source {str(root)!r}: {report.summary()}")
