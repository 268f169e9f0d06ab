from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from transcripts import actions
from transcripts.models import Membership, Workspace
from transcripts.uploads import Limits, UploadRefused, clean_name, is_archive, unpack


class Command(BaseCommand):
    help = (
        "Store session files as new sessions (revision 0 = their exact bytes). A .gz holds "
        "one session and a .zip one per file, unpacked within the upload limits."
    )

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
        parser.add_argument(
            "--max-size",
            type=int,
            default=settings.UPLOAD_MAX_FILE_SIZE,
            metavar="BYTES",
            help=(
                "Most bytes one session of a .gz or .zip may decompress to "
                "(default: UPLOAD_MAX_FILE_SIZE); plain files have no limit."
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
        limits = Limits.from_settings()
        limits.file_size = options["max_size"]
        limits.total_size = max(limits.total_size, limits.file_size)
        missing = 0
        for path in options["files"]:
            name = clean_name(path.name)
            try:
                # The file's own time, so a repair job can tell a session still being written.
                last_write = datetime.fromtimestamp(path.stat().st_mtime, UTC)
                if is_archive(name):
                    with path.open("rb") as f:
                        files = unpack([(name, f)], limits)
                else:
                    files = [(name, path.read_bytes())]
            except OSError as exc:
                self.stderr.write(f"{path}: cannot read: {exc.strerror}")
                missing += 1
                continue
            except UploadRefused as exc:
                self.stderr.write(f"{path}: not stored: {exc}")
                missing += 1
                continue
            sessions = actions.do_ingest_sessions(
                workspace, files, acting_user=user, last_write=last_write
            )
            for session in sessions:
                faults = (
                    ", ".join(f"{k}={n}" for k, n in session.fault_counts.items()) or "no faults"
                )
                state = f"unreadable: {session.error}" if session.error else faults
                where = f"{path}: {session.name}" if is_archive(name) else str(path)
                self.stdout.write(f"{where}: session {session.pk} ({session.format}) {state}")
        if not workspace.memberships.exists():
            self.stderr.write(
                self.style.WARNING(
                    f"warning: workspace {workspace.name!r} has no members, so nobody can see "
                    "its sessions in the dashboard. Pass --user NAME with the next ingest to "
                    "make NAME its owner, or add a membership in the admin."
                )
            )
        if missing:
            raise CommandError(f"{missing} file(s) could not be read or stored")
