"""Slot filling on ATIS and SNIPS: every cell with its best context window, Elman's window effect,
Mesnil's bidirectional Jordan, test F1 over seeds, training time per run.

    .venv/bin/python benchmarks/slot_filling.py --data ../shared/data
        [--datasets atis snips] [--cells elman jordan lstm gru onlstm] [--windows 1 5 9]
        [--seeds 3] [--select-seeds K] [--runs runs/slot_filling] [--grid key=v1,v2 ...]
        [key=value ...]

For each dataset and cell the config ``configs/<dataset>-<cell>.yaml`` is trained with each window
of ``--windows`` (seed 1, or seeds 1..K with ``--select-seeds K``); the best window is the one with
the best *validation* F1, averaged over those seeds (the test set never chooses anything). ``--grid
model.intent=true,false`` adds settings to that choice: every window is crossed with every
combination of the grid's values, and the best combination on validation is the one reported (its
overrides are in the row). Elman and Jordan on ATIS are then trained with ``--seeds`` seeds at their
best window, and the test F1 is reported as mean ± sample standard deviation; every other row has
one seed. Mesnil et al.'s bidirectional Jordan (``model.bidirectional=true``) is trained at the
Jordan's best window and setting. Test F1 is conlleval's chunk F1 (:mod:`treelm.tasks.conlleval`) of
the checkpoint with the best validation F1. Each run's training minutes (budget 30 by the configs)
are recorded.

Writes ``benchmarks/results/slot_filling-<YYYYMMDD>.json`` (entries merged by name, so a study can
be run in parts) and prints a Markdown table for docs/slot-filling.md. Run alone: the minutes are
wall-clock.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import result_path, write_result  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "show me flights from boston to denver tomorrow"


def train(name: str, config: Path, data: Path, dataset: str, runs: Path,
          overrides: list[str]) -> dict[str, Any]:
    """Train one run (kept if it finished before) and score its best checkpoint on test."""
    from treelm.run import load_run
    from treelm.rundir.files import read_metrics

    run = runs / name
    paths = [f"data.{s}={data / dataset / s}" for s in ("train", "valid", "test")]
    done = run.exists() and read_metrics(run, "done")
    if not done:
        cmd = [sys.executable, "-m", "treelm.cli", "train", "--config", str(config), "--out",
               str(run), "--force", "--quiet", *paths, *overrides]
        print("+", " ".join(cmd[2:]), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, cwd=ROOT)
    end = read_metrics(run, "done")[-1]
    valid = read_metrics(run, "valid")
    r = load_run(run)
    test = r.task.evaluate(r.model, "test").scores
    return {"run": str(run), "overrides": overrides, "valid_f1": end["best_valid_f1"],
            "epochs": end["epochs"], "minutes": round(end["elapsed"] / 60, 2),
            "valid_curve": [round(m["f1"], 2) for m in valid],
            "test": {k: round(v, 2) for k, v in test.items()}}


def seeded(entries: dict[str, Any], stem: str, seed: int, config: Path,
           args: argparse.Namespace, dataset: str, overrides: list[str]) -> dict[str, Any]:
    """Train (or reuse) ``<stem>-s<seed>`` and record it in ``entries``."""
    extra = [f"seed={seed}"] if seed > 1 else []   # seed 1 is the configs' own seed
    entries[f"{stem}-s{seed}"] = train(f"{stem}-s{seed}", config, args.data, dataset, args.runs,
                                       [*overrides, *extra, *args.overrides])
    return entries[f"{stem}-s{seed}"]


def mean_valid(runs: list[dict[str, Any]]) -> float:
    return statistics.mean(r["valid_f1"] for r in runs)


def mean_std(xs: list[float]) -> dict[str, Any]:
    if not xs:                      # e.g. intent accuracy of runs without an intent output
        return {"mean": None, "std": None, "n": 0}
    return {"mean": round(statistics.mean(xs), 2),
            "std": round(statistics.stdev(xs), 2) if len(xs) > 1 else None, "n": len(xs)}


def settings(grid: list[str]) -> list[tuple[str, list[str]]]:
    """Every combination of ``--grid`` values: (name suffix, overrides); one empty one without."""
    axes = []
    for g in grid:
        key, _, values = g.partition("=")
        if not key or not values:
            sys.exit(f"slot_filling: --grid {g!r}: expected key=value1,value2")
        axes.append([(key, v) for v in values.split(",")])
    out = []
    for combo in itertools.product(*axes):
        suffix = "".join(f"-{k.rsplit('.', 1)[-1]}{v}" for k, v in combo)
        out.append((suffix, [f"{k}={v}" for k, v in combo]))
    return out


def study(args: argparse.Namespace) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    for ds in args.datasets:
        best_window: dict[str, tuple[int, str, list[str]]] = {}
        for cell in args.cells:
            config = ROOT / "configs" / f"{ds}-{cell}.yaml"
            tried: dict[tuple[int, str], list[dict[str, Any]]] = {}
            for w in args.windows:
                for suffix, extra in settings(args.grid):
                    tried[w, suffix] = [
                        seeded(entries, f"{ds}-{cell}-w{w}{suffix}", s, config, args, ds,
                               [f"model.window={w}", *extra])
                        for s in range(1, args.select_seeds + 1)]
            best = max(tried, key=lambda k: mean_valid(tried[k]))
            w, suffix = best
            extra = dict(settings(args.grid))[suffix]
            best_window[cell] = (w, suffix, extra)
            w1 = [k for k in tried if k[0] == 1]
            w1_best = max(w1, key=lambda k: mean_valid(tried[k])) if w1 else None
            seeds = args.seeds if ds == "atis" and cell in ("elman", "jordan") else 1
            runs = tried[best] + [
                seeded(entries, f"{ds}-{cell}-w{w}{suffix}", s, config, args, ds,
                       [f"model.window={w}", *extra])
                for s in range(len(tried[best]) + 1, seeds + 1)]
            rows.append({"dataset": ds, "model": cell, "window": w, "setting": extra,
                         "chosen_by": f"mean validation F1 over {args.select_seeds} seed(s)",
                         "test_f1": mean_std([r["test"]["f1"] for r in runs]),
                         "intent_accuracy": mean_std([r["test"]["intent_accuracy"] for r in runs
                                                      if "intent_accuracy" in r["test"]]),
                         "window_1_test_f1": round(statistics.mean(
                             r["test"]["f1"] for r in tried[w1_best]), 2) if w1_best
                         else None,
                         "minutes_per_run": round(statistics.mean(r["minutes"] for r in runs), 1)})
    if "jordan" in best_window and not args.no_bidirectional:
            w, suffix, extra = best_window["jordan"]
            name = f"{ds}-jordan-bi-w{w}{suffix}-s1"
            entries[name] = train(name, ROOT / "configs" / f"{ds}-jordan.yaml", args.data, ds,
                                  args.runs, [f"model.window={w}", *extra,
                                              "model.bidirectional=true", *args.overrides])
            rows.append({"dataset": ds, "model": "jordan (bidirectional)", "window": w,
                         "setting": extra,
                         "test_f1": mean_std([entries[name]["test"]["f1"]]),
                         "intent_accuracy": mean_std([entries[name]["test"]["intent_accuracy"]]
                                                     if "intent_accuracy" in entries[name]["test"]
                                                     else []),
                         "window_1_test_f1": None, "minutes_per_run": entries[name]["minutes"]})
    example = None
    if "atis" in args.datasets and "elman" in args.cells:
        from treelm.api.model import load
        from treelm.tag.slots import as_text

        best = max((e for n, e in entries.items() if n.startswith("atis-elman-")),
                   key=lambda e: e["valid_f1"])
        example = as_text(load(best["run"]).tag([EXAMPLE])[0])
    return {"entries": entries, "rows": rows, "example": example}


def table(rows: list[dict[str, Any]]) -> str:
    def pm(d: dict[str, Any]) -> str:
        if not d or d.get("n", 0) == 0:
            return "–"
        return f"{d['mean']:.2f}" + (f" ± {d['std']:.2f}" if d.get("std") is not None else "")

    out = ["| data | model | window (best on valid) | test F1 | window 1 test F1 | intent acc. "
           "| seeds | min/run |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        w1 = "–" if r["window_1_test_f1"] is None else f"{r['window_1_test_f1']:.2f}"
        model = r["model"] + "".join(f" ({o})" for o in r.get("setting", []))
        out.append(f"| {r['dataset']} | {model} | {r['window']} | {pm(r['test_f1'])} | {w1} "
                   f"| {pm(r['intent_accuracy'])} | {r['test_f1']['n']} | "
                   f"{r['minutes_per_run']} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True,
                    help="folder holding atis/ and snips/ (e.g. ../shared/data)")
    ap.add_argument("--datasets", nargs="+", default=["atis", "snips"])
    ap.add_argument("--cells", nargs="+", default=["elman", "jordan", "lstm", "gru", "onlstm"])
    ap.add_argument("--windows", nargs="+", type=int, default=[1, 5, 9])
    ap.add_argument("--seeds", type=int, default=3, help="seeds for Elman and Jordan on ATIS")
    ap.add_argument("--runs", type=Path, default=ROOT / "runs" / "slot_filling")
    ap.add_argument("--select-seeds", type=int, default=1,
                    help="seeds per candidate window and setting; the choice is made on their "
                    "mean validation F1 (1: seed 1 alone)")
    ap.add_argument("--no-bidirectional", action="store_true")
    ap.add_argument("--grid", nargs="+", default=[], metavar="KEY=V1,V2",
                    help="settings chosen on validation with the window, "
                    "e.g. model.intent=true,false")
    ap.add_argument("overrides", nargs="*", help="key=value for every run")
    args = ap.parse_args()
    args.data = args.data.resolve()
    for ds in args.datasets:
        if not (args.data / ds / "train" / "seq.in").is_file():
            sys.exit(f"slot_filling: {args.data / ds / 'train' / 'seq.in'}: no such file "
                     "(--data must hold atis/ and snips/)")
    res = study(args)
    old = result_path("slot_filling")
    if old.exists():       # rows of earlier parts of the study stay unless recomputed
        keep = [r for r in json.loads(old.read_text()).get("rows", [])
                if (r["dataset"], r["model"]) not in {(x["dataset"], x["model"])
                                                       for x in res["rows"]}]
        res["rows"] = keep + res["rows"]
        res["example"] = res["example"] or json.loads(old.read_text()).get("example")
    write_result("slot_filling", {"entries": res["entries"], "rows": res["rows"],
                                  "example": res["example"], "table": table(res["rows"])},
                 merge_key="entries", echo=False)
    print(table(res["rows"]))
    if res["example"]:
        print("\nexample:", res["example"])


if __name__ == "__main__":
    main()
