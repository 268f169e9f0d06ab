"""The core is pure Python: importing it loads no Django and no module of the Django layer.

Two guards. The first imports every module of the core in a fresh interpreter
(nothing else loaded, no settings) and reads `sys.modules`: an import of
Django or of `transcripts.models`, direct or through any chain of modules,
shows there. The second reads the source, so that an import inside a function,
which runs only when the function is called, is caught too.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "transcripts"
# The pure packages and modules; `visible` is the escaping and `sizes` the size text the CLI
# shares with the templates, `difftext` the diffs it shares with dry-run jobs.
PACKAGES = ("transcripts.core", "transcripts.formats", "transcripts.replay")
MODULES = (
    "transcripts.engine",
    "transcripts.cli",
    "transcripts.replace",
    "transcripts.visible",
    "transcripts.sizes",
    "transcripts.difftext",
)
PURE_PATHS = sorted(
    [
        *(p for package in PACKAGES for p in (ROOT / package.replace(".", "/")).rglob("*.py")),
        *(ROOT / f"{module.replace('.', '/')}.py" for module in MODULES),
    ]
)

# Run in the child: import every module of the pure packages and modules, print what loaded.
CHILD = """
import importlib, json, pkgutil, sys
names = list(sys.argv[2:])
for package in sys.argv[1].split(","):
    module = importlib.import_module(package)
    names += [info.name for info in pkgutil.walk_packages(module.__path__, package + ".")]
for name in names:
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
"""


def loaded(packages: tuple[str, ...], modules: tuple[str, ...], path: Path = ROOT) -> list[str]:
    """Return every module a fresh interpreter holds after importing `packages` and `modules`."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join([str(path), str(ROOT)])
    out = subprocess.run(
        [sys.executable, "-c", CHILD, ",".join(packages), *modules],
        capture_output=True,
        check=True,
        cwd=path,
        env=env,
        text=True,
        timeout=120,
    )
    names: list[str] = json.loads(out.stdout)
    return names


def impure(names: list[str]) -> list[str]:
    """Return the names of Django, the project and the Django layer's modules among `names`."""
    pure = (*PACKAGES, *MODULES)
    return [
        name
        for name in names
        if name.split(".")[0] in ("django", "project", "rest_framework", "celery")
        or (
            name.startswith("transcripts.")
            and not any(name == p or name.startswith(f"{p}.") for p in pure)
        )
    ]


def test_importing_the_core_loads_no_django_and_no_model() -> None:
    names = loaded(PACKAGES, MODULES)
    assert "transcripts.core.detect" in names and "transcripts.formats.codex" in names
    assert impure(names) == []


def test_the_import_guard_sees_an_import_made_through_another_module(tmp_path: Path) -> None:
    package = tmp_path / "sneaky"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helper.py").write_text("import django.utils.text\n")
    (package / "core.py").write_text("from sneaky import helper\n")
    names = loaded(("sneaky",), (), tmp_path)
    assert "django.utils.text" in impure(names)


def imports(path: Path, module: str = "") -> list[str]:
    """Return the absolute names `path` imports anywhere, relative ones resolved.

    `module` is the file's module name (default: from its path under ROOT);
    `from a import b` gives both "a" and "a.b", since b may be a module.
    """
    tree = ast.parse(path.read_text(), str(path))
    module = module or ".".join(path.relative_to(ROOT).with_suffix("").parts)
    package = module.removesuffix(".__init__") if path.name == "__init__.py" else module
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            names += [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return names


@pytest.mark.parametrize("path", PURE_PATHS, ids=lambda p: str(p.relative_to(APP)))
def test_no_line_of_the_core_imports_django_or_the_django_layer(path: Path) -> None:
    assert impure(imports(path)) == []


def test_the_source_guard_sees_a_relative_import_of_the_models_inside_a_function(
    tmp_path: Path,
) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def later():\n    from ..models import Session\n")
    assert impure(imports(probe, "transcripts.core.probe")) == [
        "transcripts.models",
        "transcripts.models.Session",
    ]
