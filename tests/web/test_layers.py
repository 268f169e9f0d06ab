"""Who may import whom in the Django layer: the API is no HTML form, a form is no sync."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "transcripts"


def imported(path: Path) -> set[str]:
    """Return the modules `path` imports anywhere (`from a import b` gives a and a.b)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return names


@pytest.mark.parametrize("path", sorted(APP.joinpath("api").glob("*.py")), ids=lambda p: p.name)
def test_the_api_never_imports_the_html_forms(path: Path) -> None:
    assert "transcripts.forms" not in imported(path)


@pytest.mark.parametrize("module", ["forms.py", "filters.py"])
def test_forms_and_filters_never_import_the_sync_or_the_actions(module: str) -> None:
    names = imported(APP / module)
    assert not {n for n in names if n.startswith(("transcripts.sync", "transcripts.actions"))}
