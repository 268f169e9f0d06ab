from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from transcripts.core.model import INFORMATIONAL
from transcripts.engine import DEFAULT_POLICY, PRESETS, analyze


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{kind}={n}" for kind, n in counts.items()) or "none"


class Command(BaseCommand):
    help = (
        "Repair session files without touching the database: write each repaired file "
        "to DIR under its own name and print the faults found and the ops applied."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
        parser.add_argument("--policy", choices=sorted(PRESETS), default=DEFAULT_POLICY)
        parser.add_argument("--out", type=Path, required=True, metavar="DIR")

    def handle(self, *args: Any, **options: Any) -> None:
        out: Path = options["out"]
        try:
            out.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise CommandError(f"--out {out}: exists and is not a directory") from None
        except OSError as exc:
            raise CommandError(f"--out {out}: cannot create: {exc.strerror}") from None
        # Each output name is written once: the first input with a name takes it.
        written: dict[str, Path] = {}
        bad = 0
        for path in options["files"]:
            target = out / path.name
            try:
                data = path.read_bytes()
            except OSError as exc:
                self.stderr.write(f"{path}: cannot read: {exc.strerror}")
                bad += 1
                continue
            if path.name in written:
                self.stderr.write(
                    f"{path}: same file name as {written[path.name]}, "
                    f"whose repair is already {target}; skipped"
                )
                bad += 1
                continue
            if target.exists() and target.samefile(path):
                # Raw is sacred: never overwrite an input with its repair.
                self.stderr.write(f"{path}: --out would overwrite the input; skipped")
                bad += 1
                continue
            analysis = analyze(data, path.name, options["policy"])
            if analysis.error:
                self.stderr.write(f"{path}: unreadable: {analysis.error}")
                bad += 1
                continue
            try:
                target.write_bytes(analysis.repaired)
            except OSError as exc:
                self.stderr.write(f"{path}: cannot write {target}: {exc.strerror}")
                bad += 1
                continue
            written[path.name] = path
            ops: dict[str, int] = {}
            for op in analysis.plan.ops:
                ops[str(op.kind)] = ops.get(str(op.kind), 0) + 1
            counts = analysis.fault_counts
            facts = {kind: n for kind, n in counts.items() if kind in INFORMATIONAL}
            faults = {kind: n for kind, n in counts.items() if kind not in INFORMATIONAL}
            noted = f" (informational: {_counts(facts)})" if facts else ""
            self.stdout.write(
                f"{path}: {analysis.format}, faults: {_counts(faults)}{noted}; "
                f"ops: {_counts(ops)} -> {target}"
            )
        if bad:
            raise CommandError(f"{bad} file(s) could not be repaired")
