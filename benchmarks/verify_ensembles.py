"""Check a study record's ensembles against its kept trees: every ensemble recomputed from the
trees file beside the record (``<study>-<date>.trees.json.xz``, :mod:`treelm.study.record`)
equals the record's to 1e-12, every figure of every group and reading set, and what dev chose.

Usage::

    NLTK_DATA=/work/shared/data/nltk_data python benchmarks/verify_ensembles.py \\
        [benchmarks/results/trees-seeds-20261128.json ...]

Without paths, every committed record that keeps its trees in a file and has ensembles. Prints
one JSON line per record and exits 1 if any figure differs (the gold trees of the study's dev and
test treebanks are read, so NLTK_DATA must hold them). ~100 s a record of ten runs on one core.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    """Where ``a`` and ``b`` differ: floats by more than 1e-12, anything else at all."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a for d in differences(a[k], b[k], f"{where}/{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, float):
        return [] if abs(a - b) <= 1e-12 else [f"{where}: {a!r} != {b!r}"]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def main(argv: list[str]) -> int:
    from treelm.study.ensemble import study_ensembles
    from treelm.study.record import kept_trees_path, read_record
    from treelm.syntax.report import load_golds

    paths = [Path(p) for p in argv] or sorted(
        p for p in RESULTS.glob("*.json")
        if '"kept_trees"' in p.read_text(encoding="utf-8")
        and '"ensembles"' in p.read_text(encoding="utf-8"))
    failed = False
    for path in paths:
        t0 = time.perf_counter()
        record = read_record(path)
        trees = record["study"]["score"]["trees"]
        golds = {"dev": load_golds(trees["dev"])}
        if trees["test"]:
            golds["test"] = load_golds(trees["test"])
        again = study_ensembles(record, golds)
        kept = record.get("ensembles") or {}
        diff = differences({k: kept.get(k) for k in again}, again)
        failed |= bool(diff)
        print(json.dumps({"record": path.name, "kept_trees": kept_trees_path(path).name,
                          "equal": not diff, "differences": diff[:10],
                          "seconds": round(time.perf_counter() - t0, 1)}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
