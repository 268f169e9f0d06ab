from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from transcripts import actions
from transcripts.actions import sync
from transcripts.models import Membership, SyncSource, Workspace


class Command(BaseCommand):
    help = (
        "Sync the session folders of every enabled source (or of --source), then turn the "
        "pending results of sessions whose grace ran out into missing ones. With --add, "
        "first grant a folder to --workspace and add it as a source."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--source", action="append", help="Source id or name (repeatable).")
        parser.add_argument("--add", metavar="PATH", help="Add this folder as a source first.")
        parser.add_argument("--workspace", default="default", help="Workspace for --add.")
        parser.add_argument(
            "--format",
            default="",
            choices=[c for c, _ in SyncSource.Format.choices],
            help="What the folder --add holds (default: any supported file).",
        )
        parser.add_argument(
            "--write-back", action="store_true", help="--add: write repairs back to the files."
        )
        parser.add_argument("--user", help="--add: the acting user, made an admin if needed.")
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["add"]:
            source = self._add(options)
            self.stdout.write(f"added source {source.pk}: {source.path}")
            options["source"] = [str(source.pk)]
        sources = SyncSource.objects.filter(enabled=True)
        if options["source"]:
            wanted = options["source"]
            ids = [int(s) for s in wanted if s.isdigit()]
            sources = SyncSource.objects.filter(pk__in=ids) | SyncSource.objects.filter(
                name__in=wanted
            )
            if not sources.exists():
                raise CommandError(f"no source with id or name {', '.join(wanted)}")
        failed = False
        for source in sources.order_by("pk"):
            with tqdm(
                desc=f"{source.name}", unit="file", disable=options["no_progress"], leave=False
            ) as bar:

                def progress(done: int, total: int, path: str, bar: "tqdm[Any]" = bar) -> None:
                    bar.total = total
                    bar.update(done - bar.n)

                report = sync.do_sync_source(source.pk, progress=progress)
            source.refresh_from_db()
            self.stdout.write(report.summary())
            for error in report.errors:
                self.stderr.write(f"  {error}")
            if source.last_error and not report.errors:
                self.stderr.write(f"  {source.last_error}")
            failed = failed or bool(report.errors or source.last_error)
        expired = sync.do_expire_live_sessions()
        if expired:
            self.stdout.write(f"{expired} session(s) no longer live: pending results now missing")
        if failed:
            raise CommandError("a source, or a file of one, could not be synced")

    def _add(self, options: dict[str, Any]) -> SyncSource:
        user = None
        if options["user"]:
            try:
                user = get_user_model().objects.get_by_natural_key(options["user"])
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user named {options['user']!r}") from None
        workspace = Workspace.objects.filter(name=options["workspace"]).first()
        if workspace is None:
            workspace = actions.do_create_workspace(options["workspace"], acting_user=user)
        elif user is not None:
            actions.do_add_member(workspace, user, role=Membership.Role.ADMIN, acting_user=None)
        try:
            # Whoever runs this on the server is its operator: the folder is granted first.
            sync.do_grant_folder(workspace, options["add"], acting_user=user)
            return sync.do_create_source(
                workspace,
                options["add"],
                acting_user=user,
                format=options["format"],
                write_back=options["write_back"],
            )
        except sync.SyncError as exc:
            raise CommandError(str(exc)) from None
