"""ListOps at equal wall time: ON-LSTM against LSTM (same parameter count), trained on expressions
nested at most 6 deep, tested on depths 1 to 8 (Nangia & Bowman 2018).

    python benchmarks/listops.py [--minutes 30] [--configs configs/listops-onlstm.yaml
        configs/listops-lstm.yaml] [--runs runs/listops] [--threads 2] [--no-train]
        [--out FILE] [key=value ...]

Each config is trained alone (one after the other: two jobs on two cores halve each other) by
``treelm train ... train.max_minutes=M`` (30 by default) into ``--runs/<config name>``; then its
best checkpoint (chosen by validation accuracy) is scored on the held-out valid expressions and on
the test expressions, per depth. The record (``benchmarks/results/listops-<YYYYMMDD>.json``,
entries of the same day merged by config; ``--out`` writes elsewhere, e.g. for a smoke run) holds
per config: parameters, epochs, expressions seen and per second, the validation curve, the valid
and test scores; and a Markdown table, which is also printed (docs/listops.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from logic import measure  # noqa: E402   (the same training, scoring and record loop)

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ["configs/listops-onlstm.yaml", "configs/listops-lstm.yaml"]


def score(run: Path, threads: int) -> dict[str, Any]:
    """Curves from the metrics log; valid and test scores of the best checkpoint."""
    import torch

    from treelm.run import load_run
    from treelm.rundir.files import read_metrics

    torch.set_num_threads(threads)
    valid, done = read_metrics(run, "valid"), read_metrics(run, "done")
    end = done[-1] if done else {}
    r = load_run(run)
    rnd = lambda d: {k: round(v, 2 if k != "loss" else 4) for k, v in d.items()}    # noqa: E731
    seen = end.get("tokens", 0)
    elapsed = end.get("elapsed", valid[-1]["elapsed"] if valid else 0.0)
    test = r.task.split("test")
    return {
        "parameters": sum(p.numel() for p in r.model.parameters()),
        "minutes": round(elapsed / 60, 2),
        "epochs_completed": sum(1 for m in valid if m.get("epoch_end")),
        "expressions_seen": seen,
        "expressions_per_s": round(seen / elapsed, 1) if elapsed else None,
        "valid_curve": [[round(m["elapsed"] / 60, 2), round(m["accuracy"], 2)] for m in valid],
        "test_per_depth": {str(d): sum(x.depth == d for x in test)
                           for d in sorted({x.depth for x in test})},
        "valid": rnd(r.task.evaluate(r.model, "valid").scores),
        "test": rnd(r.task.evaluate(r.model, "test").scores),
    }


def table(entries: dict[str, dict[str, Any]]) -> str:
    """Rows: held-out valid, then test accuracy per depth; a column per config."""
    names = list(entries)
    depths = sorted({int(k[len("acc_depth"):]) for e in entries.values() for k in e["test"]
                     if k.startswith("acc_depth")})
    counts = next(iter(entries.values())).get("test_per_depth", {})
    out = ["| test expressions | " + " | ".join(
               f"{n} ({entries[n]['parameters']:,} params, {entries[n]['epochs_completed']} "
               "epochs)" for n in names) + " |",
           "| --- |" + " ---: |" * len(names)]

    def row(label: str, get: Any) -> None:
        vals = [get(entries[n]) for n in names]
        out.append(f"| {label} | " + " | ".join("–" if v is None else f"{v:.2f}" for v in vals)
                   + " |")

    row("valid (held out, ≤ train depth)", lambda e: e["valid"]["accuracy"])
    for d in depths:
        n = counts.get(str(d))
        row(f"depth {d}" + (f" ({n:,})" if n else ""),
            lambda e, d=d: e["test"].get(f"acc_depth{d}"))
    row("deeper than training (acc_deeper)", lambda e: e["test"].get("acc_deeper"))
    row("all test expressions", lambda e: e["test"]["accuracy"])
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0,
                    help="wall-time budget per config (30)")
    ap.add_argument("--configs", nargs="+", default=CONFIGS)
    ap.add_argument("--runs", type=Path, default=ROOT / "runs" / "listops")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-train", action="store_true",
                    help="only score the runs already in --runs")
    ap.add_argument("--out", type=Path, help="write the record here instead of "
                    "benchmarks/results/listops-<date>.json")
    ap.add_argument("overrides", nargs="*", help="key=value overrides for every config")
    args = ap.parse_args()
    if args.minutes <= 0:
        ap.error("--minutes must be > 0")
    measure("listops", args, score, table)


if __name__ == "__main__":
    main()
