from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from transcripts import actions
from transcripts.models import Workspace


class Command(BaseCommand):
    help = "Store session files as new sessions (revision 0 = their exact bytes)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
        parser.add_argument(
            "--workspace", default="default", help="Workspace name; created if missing."
        )
        parser.add_argument(
            "--user", help="Username recorded as the acting user and made workspace owner."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = None
        if options["user"]:
            try:
                user = get_user_model().objects.get_by_natural_key(options["user"])
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user named {options['user']!r}") from None
        workspace = Workspace.objects.filter(name=options["workspace"]).first()
        if workspace is None:
            workspace = actions.do_create_workspace(options["workspace"], acting_user=user)
        missing = 0
        for path in options["files"]:
            try:
                data = path.read_bytes()
            except OSError as exc:
                self.stderr.write(f"{path}: cannot read: {exc.strerror}")
                missing += 1
                continue
            session = actions.do_ingest_session(workspace, path.name, data, acting_user=user)
            faults = ", ".join(f"{k}={n}" for k, n in session.fault_counts.items()) or "no faults"
            state = f"unreadable: {session.error}" if session.error else faults
            self.stdout.write(f"{path}: session {session.pk} ({session.format}) {state}")
        if missing:
            raise CommandError(f"{missing} file(s) could not be read")
