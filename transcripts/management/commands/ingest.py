from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.checks import Tags
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from transcripts import actions
from transcripts.models import Membership, Workspace
from transcripts.uploads import (
    LimitPassed,
    Limits,
    Staged,
    Unpacker,
    UploadRefused,
    clean_name,
    is_archive,
)


class Command(BaseCommand):
    help = (
        "Store session files as new sessions (revision 0 = their exact bytes). A .gz holds "
        "one session and a .zip one per file. One run is one upload: every file is read, "
        "a chunk at a time, within the upload limits before any is stored."
    )
    # The models' checks only: the URL checks import every view, form and the API schema,
    # some 15 MB this process would hold while it reads a session of a gigabyte.
    requires_system_checks = [Tags.models]

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
            help="Most bytes one session may hold (default: UPLOAD_MAX_FILE_SIZE).",
        )
        parser.add_argument(
            "--max-total",
            type=int,
            default=settings.UPLOAD_MAX_TOTAL_SIZE,
            metavar="BYTES",
            help="Most bytes all sessions may hold together (default: UPLOAD_MAX_TOTAL_SIZE).",
        )
        parser.add_argument(
            "--max-files",
            type=int,
            default=settings.UPLOAD_MAX_FILES,
            metavar="N",
            help="Most sessions one run may store (default: UPLOAD_MAX_FILES).",
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
        limits = Limits(
            file_size=options["max_size"],
            total_size=max(options["max_total"], options["max_size"]),
            files=options["max_files"],
        )
        with Unpacker(limits) as unpacker:
            staged, missing = self._stage(options["files"], unpacker)
            workspace = Workspace.objects.filter(name=name).first()
            if workspace is None:
                workspace = actions.do_create_workspace(name, acting_user=user)
            elif user is not None:
                actions.do_add_member(workspace, user, role=Membership.Role.ADMIN, acting_user=None)
            for path, file_name, last_write, files in staged:
                sessions = actions.do_ingest_sessions(
                    workspace, files, acting_user=user, last_write=last_write
                )
                for session in sessions:
                    faults = (
                        ", ".join(f"{k}={n}" for k, n in session.fault_counts.items())
                        or "no faults"
                    )
                    state = f"unreadable: {session.error}" if session.error else faults
                    where = f"{path}: {session.name}" if is_archive(file_name) else str(path)
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

    def _stage(
        self, paths: list[Path], unpacker: Unpacker
    ) -> tuple[list[tuple[Path, str, datetime, list[tuple[str, Staged]]]], int]:
        """Stage the sessions of every path within the unpacker's limits, before storing any.

        Return (path, name, last write, its sessions) for each path read and
        the number of paths that could not be read. A limit passed or an
        unreadable archive stops the run: nothing is stored.
        """
        staged = []
        missing = 0
        for path in paths:
            name = clean_name(path.name)
            before = len(unpacker.sessions)
            try:
                # The file's own time, so a repair job can tell a session still being written.
                last_write = datetime.fromtimestamp(path.stat().st_mtime, UTC)
                with path.open("rb") as f:
                    unpacker.add(name, f)
            except OSError as exc:
                self.stderr.write(f"{path}: cannot read: {exc.strerror}")
                missing += 1
                continue
            except UploadRefused as exc:
                self.stderr.write(f"{path}: not stored: {exc}")
                if isinstance(exc, LimitPassed):
                    raise CommandError(
                        f"{path} breaks the upload limits (see --max-size, --max-total, "
                        "--max-files): nothing was stored"
                    ) from None
                # A tar, an unreadable or encrypted archive: no limit is involved.
                raise CommandError(
                    f"{path} cannot be ingested (the line above says why): nothing was stored"
                ) from None
            files = [(s.name, s) for s in unpacker.sessions[before:]]
            staged.append((path, name, last_write, files))
        return staged, missing
