"""The output-layer screen at equal minutes (issue 49 item 2): where the full softmax's runs stood,
on their own curves, after as many minutes as a whole adaptive run takes.

    python benchmarks/equal_minutes.py [--study benchmarks/results/trees-output-20261128.json]
        [--full-time benchmarks/results/train_time-softmax-20261128.json]
        [--adaptive-time benchmarks/results/train_time-20261128.json] [--layer 2] [--out PATH]

The screen compares the two output layers at equal tokens (2M). Its minutes are not timings (the
runs shared the machine), so the minutes come from two whole trainings timed alone on the same
machine class (``benchmarks/train_time.py``: the full-softmax tree config and the adaptive one):
the adaptive run's minutes T_a are the full softmax's after a share T_a / T_s of its tokens
(its rate taken as even over the run, validations included). Each full-softmax run's curve
(dev sentence F1 of layer ``--layer`` under both rules and validation perplexity, at every
validation) is read there, linearly between its two nearest validations, and set against the
adaptive runs' last validation. Reads records only; nothing is trained or timed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import repo_path, write_result  # noqa: E402

RESULTS = HERE / "results"


def at(curve: list[dict[str, Any]], tokens: float, key: str) -> float:
    """``key`` on ``curve`` at ``tokens``, linear between the validations either side."""
    pts = [(c["tokens"], c[key]) for c in curve if key in c]
    if tokens <= pts[0][0]:
        return pts[0][1]
    for (t0, v0), (t1, v1) in zip(pts, pts[1:]):
        if t0 <= tokens <= t1:
            return v0 + (v1 - v0) * (tokens - t0) / (t1 - t0)
    return pts[-1][1]


def summary(values: list[float], scale: float = 100.0) -> dict[str, Any]:
    xs = [v * scale for v in values]
    return {"mean": round(statistics.fmean(xs), 2),
            "std": round(statistics.stdev(xs), 2) if len(xs) > 1 else 0.0,
            "each": [round(x, 2) for x in xs]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", type=Path, default=RESULTS / "trees-output-20261128.json")
    ap.add_argument("--full", default="softmax", help="the full softmax's variant")
    ap.add_argument("--adaptive", default="adaptive", help="the adaptive softmax's variant")
    ap.add_argument("--full-time", type=Path, default=RESULTS / "train_time-softmax-20261128.json")
    ap.add_argument("--adaptive-time", type=Path, default=RESULTS / "train_time-20261128.json")
    ap.add_argument("--layer", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    for p in (args.study, args.full_time, args.adaptive_time):
        if not p.is_file():
            ap.error(f"{p}: no such record")
    study = json.loads(args.study.read_text())
    t_full = json.loads(args.full_time.read_text())
    t_ad = json.loads(args.adaptive_time.read_text())
    share = t_ad["seconds"] / t_full["seconds"]
    keys = {"official": f"official/L{args.layer}", "split": f"split/L{args.layer}"}
    runs = {v: [r for r in study["runs"].values() if r["variant"] == v]
            for v in (args.full, args.adaptive)}
    if not all(runs.values()):
        ap.error(f"{args.study}: no runs of {args.full!r} or {args.adaptive!r}")
    tokens = statistics.fmean(r["tokens"] for r in runs[args.full]) * share

    def read(variant: str, when: float | None) -> dict[str, Any]:
        """Each rule's F1 and the perplexity over ``variant``'s runs, at ``when`` tokens on
        their curves (None: their last validation)."""
        def value(r: dict[str, Any], key: str) -> float:
            return r["curve"][-1][key] if when is None else at(r["curve"], when, key)
        out = {rule: summary([value(r, k) for r in runs[variant]]) for rule, k in keys.items()}
        out["valid_ppl"] = summary([value(r, "ppl") for r in runs[variant]], 1)
        return out

    full_at, full_end, ad_end = (read(args.full, tokens), read(args.full, None),
                                 read(args.adaptive, None))
    record = {
        "study": repo_path(args.study), "layer": args.layer,
        "times": {"full": {"record": repo_path(args.full_time), "config": t_full["config"],
                           "minutes": t_full["minutes"], "precision": t_full.get("precision"),
                           "cpu": t_full["machine"].get("cpu_family_model_stepping")},
                  "adaptive": {"record": repo_path(args.adaptive_time),
                               "config": t_ad["config"], "minutes": t_ad["minutes"],
                               "precision": t_ad.get("precision"),
                               "cpu": t_ad["machine"].get("cpu_family_model_stepping")}},
        "minutes_share": round(share, 4),
        "full_tokens_at_adaptive_minutes": round(tokens),
        "full_at_adaptive_minutes": full_at,
        "full_at_end": full_end,
        "adaptive_at_end": ad_end,
        "note": "dev sentence F1 (%) from the runs' curves (train.eval_parse at each validation), "
                "not from the checkpoints the study scores at the end",
    }
    return write_result("equal_minutes", record, path=args.out)


if __name__ == "__main__":
    main()
