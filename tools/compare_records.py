"""Two records of one study, compared figure by figure: a refactoring changes none.

Lives in ``tools/`` with the other equivalence checks (``compare_commits.py``): it measures
nothing. A study rerun at two commits (or a record against its rerun) must give the same scores,
kept trees, ensembles and summary; every number is compared to ``--tol`` (default 1e-12), every
kept tree exactly (a record's ``<name>.trees.json.xz`` or inline readings, as
:func:`treelm.study.record.read_record` reads either layout), and what depends on the machine,
the clock or the paths (minutes, job ids, dates, run directories, commands) is left out.

    python tools/compare_records.py A.json B.json            # exit 0: the same figures
    python tools/compare_records.py A.json B.json --run light-dropouts/1   # one run's entry
    ... --out benchmarks/results/compare_records-<name>-<date>.json       # kept as a record
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

#: Keys whose values say when, where and how long, not what was computed.
VOLATILE = {"minutes", "job_seconds", "job_id", "machine", "elapsed", "date", "command",
            "commands", "overrides", "run_dir", "kept_trees", "file", "record", "runs_dir",
            "path", "script", "tok_s", "seconds"}


def differences(a: Any, b: Any, tol: float, where: str = "") -> list[str]:
    """Where ``a`` and ``b`` differ (numbers by more than ``tol``), as readable paths."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}/{k}: only in {'A' if k in a else 'B'}"
               for k in sorted(set(a) ^ set(b), key=str) if k not in VOLATILE]
        for k in a.keys() & b.keys():
            if k not in VOLATILE:
                out += differences(a[k], b[k], tol, f"{where}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} against {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in
                differences(x, y, tol, f"{where}[{i}]")]
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        same = (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol
        return [] if same else [f"{where}: {a!r} against {b!r}"]
    return [] if a == b else [f"{where}: {str(a)[:60]!r} against {str(b)[:60]!r}"]


def main(argv: list[str] | None = None) -> int:
    from treelm.study.record import read_record

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.add_argument("--tol", type=float, default=1e-12)
    p.add_argument("--run", help="compare this run's entry alone (records of two studies)")
    p.add_argument("--out", type=Path, help="also write the result as a record here")
    args = p.parse_args(argv)
    a, b = read_record(args.a), read_record(args.b)
    if args.run:
        a, b = ({"runs": {args.run: r["runs"][args.run]}} for r in (a, b))
    found = differences(a, b, args.tol)
    kept = sum(len(r.get("readings") or {}) for r in a.get("runs", {}).values())
    result = {"a": str(args.a), "b": str(args.b), "tol": args.tol, "run": args.run,
              "runs": len(a.get("runs", {})), "checkpoints_with_kept_trees": kept,
              "ensembles": "ensembles" in a, "differences": found[:20],
              "n_differences": len(found)}
    if args.out:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
        from common import write_result

        write_result("compare_records", result, path=args.out, echo=False, folder="tools")
    print(json.dumps(result, indent=1))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
