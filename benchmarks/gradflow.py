"""The record behind the gradient-flow figures of docs/characters.md.

    python benchmarks/gradflow.py --name fresh --cells elman lstm gru onlstm mrnn tensor \\
        --hidden 128 --length 100
    R=runs/charlm
    python benchmarks/gradflow.py --name trained --data ptb-char --runs \\
        $R/ptb-char-elman-1m-lr5e-4 $R/ptb-char-lstm-1m $R/ptb-char-gru-1m \\
        $R/ptb-char-onlstm-1m $R/ptb-char-mrnn-1m $R/ptb-char-tensor-1m

Runs :func:`treelm.analysis.gradflow.flow_study` (what ``treelm gradflow`` runs), writes the CSV
(``docs/gradflow[-NAME].csv``) and the PNG (``docs/img/gradflow[-NAME].png``) the docs show, and
records per model the mean ‖∂L_T/∂h_t‖ at lags 0, 1, 10, 50 and T and the Elman bounds, in
``benchmarks/results/gradflow-DATE.json`` (studies of the same day merged by name). Not a timing:
it may run beside other work.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", required=True, help="the study's name: fresh, trained, ...")
    ap.add_argument("--cells", nargs="+")
    ap.add_argument("--runs", nargs="+")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--length", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", choices=["random", "ptb-char"], default="random")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if bool(args.cells) == bool(args.runs):
        raise SystemExit("give --cells or --runs")
    import torch

    from treelm.analysis.gradflow import flow_study, plot, study_title, write_csv

    torch.set_num_threads(args.threads)
    results = flow_study(cells=args.cells, runs=args.runs, hidden=args.hidden,
                         length=args.length, batch=args.batch_size, seed=args.seed, data=args.data)
    suffix = "" if args.name == "fresh" else f"-{args.name}"
    csv, png = DOCS / f"gradflow{suffix}.csv", DOCS / "img" / f"gradflow{suffix}.png"
    write_csv(results, csv)
    plot(results, png, study_title(bool(args.cells), args.length, args.batch_size, args.hidden,
                                   args.data))
    lags = sorted({k for k in (0, 1, 10, 50, args.length) if k <= args.length})
    study = {
        "cells": args.cells, "runs": args.runs, "hidden": args.hidden if args.cells else None,
        "length": args.length, "batch": args.batch_size, "seed": args.seed, "data": args.data,
        "csv": str(csv.relative_to(DOCS.parent)), "png": str(png.relative_to(DOCS.parent)),
        "lags": lags,
        "models": {r.label: {"cell": r.cell,
                             "mean_grad_norm": {str(k): float(r.norms[k]) for k in lags},
                             "elman_sigma_max": [b.sigma_max for b in r.elman]}
                   for r in results},
    }
    write_result("gradflow", {"studies": {args.name: study}}, merge_key="studies")


if __name__ == "__main__":
    main()
