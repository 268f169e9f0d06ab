from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from transcripts import cli, formats
from transcripts.engine import DEFAULT_POLICY, PRESETS
from transcripts.visible import terminal_text


class Command(BaseCommand):
    help = (
        "Repair session files without touching the database: write each repaired file "
        "to DIR under its own name and print the faults found and the ops applied "
        "(the same code as `pairfix fix FILE... --out DIR`)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", metavar="FILE", help="a file or a folder")
        parser.add_argument("--policy", choices=sorted(PRESETS), default=DEFAULT_POLICY)
        parser.add_argument("--format", choices=sorted(formats.FORMATS))
        parser.add_argument("--out", type=Path, required=True, metavar="DIR")
        parser.add_argument(
            "--report",
            type=Path,
            metavar="REPORT.json",
            help="also write the machine-readable report (as `pairfix fix --json` prints it)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        out: Path = options["out"]
        shown = terminal_text(str(out))  # a file name is untrusted: nothing acts on the terminal
        try:
            out.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise CommandError(f"--out {shown}: exists and is not a directory") from None
        except OSError as exc:
            raise CommandError(f"--out {shown}: cannot create: {exc.strerror or exc}") from None
        run = cli.Run(
            policy=options["policy"],
            format=options["format"],
            say=self.stdout.write,
            say_error=self.stderr.write,
            bars=False,
        )
        items, _ = cli.inputs([str(f) for f in options["files"]], self.stderr.write, out=out)
        _, reports = cli.repair_files(run, items, out=out)
        reports.extend(cli.missing_reports(options["files"]))
        if options["report"] is not None:
            document = {"policy": options["policy"], "files": reports}
            try:
                # pairfix --json's writer: a lone surrogate in a tool call id is written escaped.
                options["report"].write_bytes(cli._json(document))
            except OSError as exc:
                shown = terminal_text(str(options["report"]))
                raise CommandError(f"--report {shown}: {exc.strerror or exc}") from None
        bad = sum(1 for entry in reports if entry.get("error"))
        if bad:
            raise CommandError(f"{bad} file(s) could not be repaired")
