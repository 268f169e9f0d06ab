from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from transcripts import actions
from transcripts.models import Membership, Workspace


class Command(BaseCommand):
    help = "Store session files as new sessions (revision 0 = their exact bytes)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
        parser.add_argument(
            "--workspace", default="default", help="Workspace name; created if missing."
        )
        parser.add_argument(
            "--user",
            help=(
                "Username recorded as the acting user; made an owner of the workspace "
                "unless already a member."
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = None
        if options["user"]:
            try:
                user = get_user_model().objects.get_by_natural_key(options["user"])
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user named {options['user']!r}") from None
        name = options["workspace"]
        try:
            Workspace._meta.get_field("name").clean(name, None)
        except ValidationError as exc:
            raise CommandError(f"--workspace: {' '.join(exc.messages)}") from None
        workspace = Workspace.objects.filter(name=name).first()
        if workspace is None:
            workspace = actions.do_create_workspace(name, acting_user=user)
        elif user is not None:
            actions.do_add_member(workspace, user, role=Membership.Role.ADMIN)
        missing = 0
        for path in options["files"]:
            try:
                data = path.read_bytes()
                # The file's own time, so a repair job can tell a session still being written.
                last_write = datetime.fromtimestamp(path.stat().st_mtime, UTC)
            except OSError as exc:
                self.stderr.write(f"{path}: cannot read: {exc.strerror}")
                missing += 1
                continue
            session = actions.do_ingest_session(
                workspace, path.name, data, acting_user=user, last_write=last_write
            )
            faults = ", ".join(f"{k}={n}" for k, n in session.fault_counts.items()) or "no faults"
            state = f"unreadable: {session.error}" if session.error else faults
            self.stdout.write(f"{path}: session {session.pk} ({session.format}) {state}")
        if not workspace.memberships.exists():
            self.stderr.write(
                self.style.WARNING(
                    f"warning: workspace {workspace.name!r} has no members, so nobody can see "
                    "its sessions in the dashboard. Pass --user NAME with the next ingest to "
                    "make NAME its owner, or add a membership in the admin."
                )
            )
        if missing:
            raise CommandError(f"{missing} file(s) could not be read")
