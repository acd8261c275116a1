"""Packages import only downward: the table of docs/architecture.md, checked on the code.

Each package of ``treelm`` may import only the packages listed for it here (and itself); the
same table is the picture in docs/architecture.md. A new import that breaks it fails this test:
either the code belongs in a lower package, or the architecture changes on purpose (then change
the doc and this table together).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "verb": set(),
    "progress": set(),
    "threads": set(),
    "omp": set(),
    "heap": set(),
    "config": {"errors"},
    "text": {"errors"},
    "kernels": set(),
    "cells": {"kernels"},
    "nn": {"cells", "kernels"},
    "models": {"cells", "nn", "kernels", "config", "errors"},
    "data": {"text", "config", "errors"},
    "rundir": {"text", "errors"},
    "decode": {"text", "progress", "threads"},
    "tasks": {"cells", "nn", "models", "data", "decode", "syntax", "text", "rundir", "config",
              "errors", "progress", "threads"},
    "run": {"verb", "tasks", "models", "rundir", "text", "kernels", "config", "errors"},
    "train": {"verb", "run", "tasks", "models", "nn", "rundir", "data", "text", "kernels", "syntax",
              "config", "errors", "progress", "omp", "heap"},
    "syntax": {"cells", "data", "text", "errors", "progress", "threads"},
    "api": {"run", "rundir", "syntax", "decode", "tasks", "text", "kernels", "errors",
            "progress"},
    "analysis": {"verb", "run", "models", "cells", "data", "text", "errors"},
    "generate": {"verb", "api", "run", "text", "errors"},
    "tag": {"verb", "api", "run", "text", "errors"},
    "translate": {"verb", "api", "run", "text", "errors", "progress"},
    "parsing": {"verb", "api", "run", "rundir", "syntax", "text", "errors"},
    "suite": {"verb", "api", "run", "text", "errors"},
    "serve": {"verb", "api", "syntax", "errors"},
    "study": {"train", "api", "run", "rundir", "syntax", "config", "errors", "verb"},
    "cli": {"train", "generate", "tag", "translate", "parsing", "analysis", "suite", "serve",
            "study", "verb", "errors", "omp"},
}


def imports() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    pkg_root = ROOT / "treelm"
    for f in pkg_root.rglob("*.py"):
        rel = f.relative_to(pkg_root).parts
        if rel == ("__init__.py",) or rel == ("__main__.py",):
            continue
        pkg = rel[0].removesuffix(".py")
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "treelm" and len(parts) > 1 and parts[1] != pkg:
                    edges.setdefault(pkg, set()).add(parts[1])
    return edges


def test_every_package_is_in_the_table():
    pkgs = {p.name.removesuffix(".py") for p in (ROOT / "treelm").iterdir()
            if (p.is_dir() and (p / "__init__.py").exists()) or
            (p.suffix == ".py" and p.name not in ("__init__.py", "__main__.py"))}
    assert pkgs == set(ALLOWED)


def test_packages_import_only_downward():
    bad = {f"{a} -> {b}" for a, bs in imports().items() for b in bs
           if b not in ALLOWED.get(a, set())}
    assert not bad, f"imports against docs/architecture.md: {sorted(bad)}"


def test_the_doc_lists_every_package():
    doc = (ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    missing = [p for p in ALLOWED if f"`{p}`" not in doc]
    assert not missing, missing


def doc_table() -> dict[str, set[str]]:
    """The "may import" column of docs/architecture.md's package table (a package named first
    in each comma-separated item; what follows it in parentheses is why)."""
    doc = (ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    rows = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) == 3 and re.fullmatch(r"`\w+`", cells[0]):
            rows[cells[0].strip("`")] = set(re.findall(r"(?:^|, )(\w+)", cells[2]))
    return rows


def test_the_doc_table_is_this_table():
    assert doc_table() == ALLOWED


def module_imports() -> dict[str, set[str]]:
    """Every ``treelm`` module's imports of other ``treelm`` modules, those inside functions too
    (a lazy import still ties the two modules together)."""
    pkg_root = ROOT / "treelm"
    names = {".".join(("treelm", *f.relative_to(pkg_root).with_suffix("").parts))
             .removesuffix(".__init__") for f in pkg_root.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for f in pkg_root.rglob("*.py"):
        me = ".".join(("treelm", *f.relative_to(pkg_root).with_suffix("").parts))
        me = me.removesuffix(".__init__")
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                # a package's __init__ is not an edge to each of its modules: only named modules
                if t in names and t != me and not me.startswith(t + "."):
                    edges.setdefault(me, set()).add(t)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        path.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return path[path.index(m):] + [m]
            if m not in state and (found := visit(m)) is not None:
                return found
        path.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state and (found := visit(n)) is not None:
            return found
    return None


def test_no_module_imports_itself_in_a_circle():
    cycle = find_cycle(module_imports())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_the_circle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}}) is None
