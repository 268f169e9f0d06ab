from pathlib import Path
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from transcripts import cli, formats
from transcripts.engine import DEFAULT_POLICY, PRESETS


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
        try:
            out.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise CommandError(f"--out {out}: exists and is not a directory") from None
        except OSError as exc:
            raise CommandError(f"--out {out}: cannot create: {exc.strerror}") from None
        run = cli.Run(
            policy=options["policy"],
            format=options["format"],
            say=self.stdout.write,
            say_error=self.stderr.write,
            bars=False,
        )
        items, _ = cli.inputs([str(f) for f in options["files"]], self.stderr.write)
        _, reports = cli.repair_files(run, items, out=out)
        reports.extend(cli.missing_reports(options["files"]))
        if options["report"] is not None:
            document = {"policy": options["policy"], "files": reports}
            try:
                options["report"].write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
            except OSError as exc:
                raise CommandError(f"--report {options['report']}: {exc.strerror}") from None
        bad = sum(1 for entry in reports if entry.get("error"))
        if bad:
            raise CommandError(f"{bad} file(s) could not be repaired")
