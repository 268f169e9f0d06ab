"""What README.md says of the fixtures and of SYNC_ROOTS matches the code."""

import re
from pathlib import Path

from tests.formats.test_real_layouts import EXPECTED, FAULTY, HEALTHY

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_the_fixture_counts_are_those_of_the_layout_tests():
    layouts = len({fmt for fmt, _ in EXPECTED.values()})
    said = " ".join(README.split())
    assert (
        f"{len(EXPECTED)} session fixtures in {layouts} layouts, the {len(HEALTHY)} healthy "
        f"ones byte-identical after repair under all 5 presets, the {len(FAULTY)} faulty ones"
    ) in said


def test_every_sync_roots_line_shown_keeps_the_default_var_sync():
    # The default is var/sync (project/settings.py), where the demo's sync source is:
    # a line without it breaks the demo.
    shown = re.findall(r"SYNC_ROOTS=(\S+)", README)
    assert shown
    for value in shown:
        assert value.split(":")[0] == "var/sync", value
