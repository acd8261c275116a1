"""Check a study record's ensembles against its kept trees (a check, so in ``tools/``): every
ensemble recomputed from the trees file beside the record (``<study>-<date>.trees.json.xz``,
:mod:`treelm.study.record`) equals the record's to 1e-12, every figure of every group and
reading set, and what dev chose.

Usage::

    NLTK_DATA=../shared/data/nltk_data python tools/verify_ensembles.py \\
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

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_records import differences  # noqa: E402  (numbers to 1e-12, the rest exactly)


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
        diff = differences({k: kept.get(k) for k in again}, again, 1e-12)
        failed |= bool(diff)
        print(json.dumps({"record": path.name, "kept_trees": kept_trees_path(path).name,
                          "equal": not diff, "differences": diff[:10],
                          "seconds": round(time.perf_counter() - t0, 1)}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
