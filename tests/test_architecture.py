"""Packages import only downward: the table of docs/architecture.md, checked on the code.

Each package of ``treelm`` may import only the packages listed for it here (and itself); the
same table is the picture in docs/architecture.md. A new import that breaks it fails this test:
either the code belongs in a lower package, or the architecture changes on purpose (then change
the doc and this table together).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "config": {"errors"},
    "text": {"errors"},
    "kernels": set(),
    "cells": {"kernels"},
    "nn": {"cells"},
    "models": {"cells", "nn", "kernels", "config", "errors"},
    "data": {"text", "config", "errors"},
    "rundir": {"text", "errors"},
    "decode": {"text"},
    "tasks": {"cells", "nn", "models", "data", "decode", "text", "rundir", "config", "errors"},
    "run": {"tasks", "models", "rundir", "text", "kernels", "config", "errors"},
    "train": {"run", "tasks", "models", "rundir", "data", "text", "kernels", "syntax", "config",
              "errors"},
    "generate": {"run", "decode", "text", "errors"},
    "tag": {"run", "tasks", "text", "errors"},
    "translate": {"run", "tasks", "text", "errors"},
    "syntax": {"run", "cells", "data", "text", "errors"},
    "analysis": {"run", "models", "cells", "data", "text", "errors"},
    "suite": {"decode", "run", "text", "errors"},
    "api": {"run", "syntax", "decode", "tasks", "text", "kernels", "errors"},
    "serve": {"api", "syntax", "errors"},
    "cli": {"train", "generate", "tag", "translate", "syntax", "analysis", "suite", "serve",
            "errors"},
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
