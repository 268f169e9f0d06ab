"""The core and the formats are pure Python: no Django import anywhere in them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "transcripts"
PURE = sorted(
    [
        *ROOT.joinpath("core").rglob("*.py"),
        *ROOT.joinpath("formats").rglob("*.py"),
        *ROOT.joinpath("replay").rglob("*.py"),
        ROOT / "engine.py",
        ROOT / "cli.py",
        ROOT / "replace.py",
    ]
)


@pytest.mark.parametrize("path", PURE, ids=lambda p: str(p.relative_to(ROOT)))
def test_it_never_imports_django(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    imported = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ] + [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [name for name in imported if name.split(".")[0] == "django"]
