"""Targeted syntactic evaluation (Marvin & Linzen 2018) of trained language-model runs.

    .venv/bin/python benchmarks/agreement.py --runs runs/onlstm runs/lstm [--names ON-LSTM LSTM]
        [--seed 0] [--max-per-construction N] [--batch-size 128] [--checkpoint best]

Scores the minimal pairs of ``treelm suite agreement`` (:mod:`treelm.suite.agreement`: M&L's
15 constructions re-made in Penn Treebank words, as many pairs per construction as M&L's suite
by default) with each run, and writes the report (pairs and accuracy per construction per run,
``<unk>`` counts, the scoring definition) with the machine and the command
to ``benchmarks/results/agreement-<YYYYMMDD>.json`` (or ``--out``), with a Markdown table for
docs/syntactic-generalisation.md; prints both. Accuracy does not depend on the machine; the
record says which it was all the same.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402


def markdown(report: dict[str, Any], names: list[str]) -> str:
    """Accuracy per construction, one column per run, as a Markdown table."""
    out = ["| phenomenon | construction | pairs | " + " | ".join(names) + " |",
           "| --- | --- | ---: | " + " | ".join("---:" for _ in names) + " |"]
    for c in report["constructions"]:
        accs = [_acc(r['constructions'][c['name']]['accuracy']) for r in report["runs"]]
        out.append(f"| {c['phenomenon']} | {c['label']} | {c['pairs']} | " + " | ".join(accs)
                   + " |")
    out.append("| | mean over constructions | | " + " | ".join(
        _acc(r['mean_accuracy']) for r in report["runs"]) + " |")
    return "\n".join(out)


def _acc(a: float | None) -> str:
    return "-" if a is None else f"{a:.3f}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs="+", required=True, help="language-model run directories")
    ap.add_argument("--names", nargs="+", help="a column name per run (default: the folders' "
                    "names)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-per-construction", type=int)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--checkpoint", choices=["best", "last"], default="best")
    ap.add_argument("--out", type=Path, help="record path (default: the dated results file)")
    args = ap.parse_args(argv)
    names = args.names or [Path(r).name for r in args.runs]
    if len(names) != len(args.runs):
        ap.error(f"--names gives {len(names)} names for {len(args.runs)} runs")

    from treelm.suite.report import agreement_report

    report = agreement_report(args.runs, None, args.seed, args.max_per_construction,
                              args.batch_size, args.checkpoint)
    for name, run in zip(names, report["runs"]):
        run["name"] = name
    table = markdown(report, names)
    record = write_result("agreement", {**report, "table": table}, path=args.out)
    print(table)
    return record


if __name__ == "__main__":
    main()
