"""The app's import graph: no cycle, the tasks a leaf, the pure modules free of Django.

The graph is read from the source with `ast`, function-local imports
included: a local import cannot hide a cycle, so none exists to dodge one.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "transcripts"
# Modules that import no Django, directly or through another module of the app.
PURE = (
    "core",
    "formats",
    "replay",
    "engine",
    "cli",
    "replace",
    "visible",
    "filechange",
    "sizes",
    "difftext",
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    _module_name(path): path
    for path in sorted(APP.rglob("*.py"))
    if "migrations" not in path.relative_to(APP).parts
}


@functools.cache
def imports(name: str) -> frozenset[str]:
    """Return every module that module `name` imports, anywhere in it (app modules by name).

    `from a.b import c` is an import of the module `a.b.c` when that is one,
    else of `a.b`: a package's submodule does not depend on its package's
    __init__ only by being inside it.
    """
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in MODULES else base)
    return frozenset(found - {name})


GRAPH = {name: {dep for dep in imports(name) if dep in MODULES} for name in MODULES}


def _cycle_through(start: str) -> list[str] | None:
    """Return a path of imports from `start` back to itself, or None (depth-first)."""
    stack = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for dep in sorted(GRAPH[node]):
            if dep == start:
                return [*path, start]
            if dep not in seen:
                seen.add(dep)
                stack.append((dep, [*path, dep]))
    return None


def _reachable(start: str) -> set[str]:
    found, todo = set(), [start]
    while todo:
        for dep in GRAPH[todo.pop()] - found:
            found.add(dep)
            todo.append(dep)
    return found


def _is_pure(name: str) -> bool:
    return any(name == f"transcripts.{p}" or name.startswith(f"transcripts.{p}.") for p in PURE)


def test_the_graph_is_read_from_every_module():
    assert {"transcripts.actions", "transcripts.actions.runner", "transcripts.tasks"} <= set(GRAPH)
    assert "transcripts.actions.common" in GRAPH["transcripts.actions.runner"]
    assert "transcripts.queue" in GRAPH["transcripts.actions.jobs"]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_imports_itself_through_others(name):
    assert _cycle_through(name) is None, " -> ".join(_cycle_through(name) or [])


def test_the_tasks_are_a_leaf_that_no_module_of_the_app_imports():
    importers = sorted(name for name, deps in GRAPH.items() if "transcripts.tasks" in deps)
    assert importers == []


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _is_pure(n)))
def test_a_pure_module_reaches_no_django_and_no_django_module_of_the_app(name):
    reached = {name} | _reachable(name)
    impure = sorted(dep for dep in reached if dep.startswith("transcripts") and not _is_pure(dep))
    assert impure == []
    django = sorted(
        f"{module} imports {dep}"
        for module in reached
        for dep in imports(module)
        if dep.split(".")[0] in ("django", "rest_framework", "celery")
    )
    assert django == []
