"""Logical inference at equal wall time: ON-LSTM against LSTM (same parameter count), trained on
pairs with at most 6 operators, tested on 1 to 12 (Bowman et al. 2015; ON-LSTM paper §6.3).

    python benchmarks/logic.py --minutes 30 [--configs configs/logic-onlstm.yaml
        configs/logic-lstm.yaml] [--runs runs/logic] [--threads 2] [--no-train] [--out FILE]
        [key=value ...]

Each config is trained alone (one after the other: two jobs on two cores halve each other) by
``treelm train ... train.max_minutes=M`` into ``--runs/<config name>``; then its best checkpoint
(chosen by validation accuracy) is scored on the held-out valid pairs (≤ 6 operators, never
trained on) and on the test pairs, per operator count 1..12. The record
(``benchmarks/results/logic-<YYYYMMDD>.json``, entries of the same day merged by config; ``--out``
writes elsewhere, e.g. for a smoke run) holds per config: parameters, epochs, pairs seen and per
second, the validation curve, the valid scores and the test scores; and a Markdown table, which
is also printed (docs/logic.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import result_path, write_result  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ["configs/logic-onlstm.yaml", "configs/logic-lstm.yaml"]


def train(config: str, run: Path, minutes: float, threads: int, overrides: list[str],
          skip: bool) -> str:
    cmd = [sys.executable, "-m", "treelm.cli", "train", "--config", str(Path(config).resolve()),
           "--out", str(run.resolve()), "--force", "--quiet", f"train.max_minutes={minutes}",
           f"train.threads={threads}", "train.epochs=100000", *overrides]
    if not skip:
        print("+", " ".join(cmd[2:]), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, cwd=ROOT)
    return " ".join(["python -m treelm.cli", *cmd[3:]])


def score(run: Path, threads: int) -> dict[str, Any]:
    """Curves from the metrics log; valid and test scores of the best checkpoint."""
    import torch

    from treelm.run import load_run
    from treelm.rundir.files import read_metrics

    torch.set_num_threads(threads)
    valid = read_metrics(run, "valid")
    done = read_metrics(run, "done")
    end = done[-1] if done else {}
    r = load_run(run)
    rnd = lambda d: {k: round(v, 2 if k != "loss" else 4) for k, v in d.items()}    # noqa: E731
    pairs = end.get("tokens", 0)
    elapsed = end.get("elapsed", valid[-1]["elapsed"] if valid else 0.0)
    return {
        "parameters": sum(p.numel() for p in r.model.parameters()),
        "minutes": round(elapsed / 60, 2),
        "epochs_completed": sum(1 for m in valid if m.get("epoch_end")),
        "pairs_seen": pairs,
        "pairs_per_s": round(pairs / elapsed, 1) if elapsed else None,
        "valid_curve": [[round(m["elapsed"] / 60, 2), round(m["accuracy"], 2)] for m in valid],
        "valid": rnd(r.task.evaluate(r.model, "valid").scores),
        "test": rnd(r.task.evaluate(r.model, "test").scores),
    }


def table(entries: dict[str, dict[str, Any]]) -> str:
    """Rows: held-out valid (≤ train ops), then test accuracy per operator count; a column per
    config."""
    names = list(entries)
    ops = sorted({int(k[len("acc_ops"):]) for e in entries.values() for k in e["test"]
                  if k.startswith("acc_ops")})
    out = ["| test pairs | " + " | ".join(f"{n} ({entries[n]['parameters']:,} params, "
                                          f"{entries[n]['epochs_completed']} epochs)"
                                          for n in names) + " |",
           "| --- |" + " ---: |" * len(names)]

    def row(label: str, get: Any) -> None:
        vals = [get(entries[n]) for n in names]
        out.append(f"| {label} | " + " | ".join("–" if v is None else f"{v:.2f}" for v in vals)
                   + " |")

    row("valid (held out, ≤ train operators)", lambda e: e["valid"]["accuracy"])
    for k in ops:
        row(f"{k} operator{'s' * (k != 1)}", lambda e, k=k: e["test"].get(f"acc_ops{k}"))
    row("longer than training (acc_long)", lambda e: e["test"].get("acc_long"))
    row("all test pairs", lambda e: e["test"]["accuracy"])
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, required=True, help="wall-time budget per config")
    ap.add_argument("--configs", nargs="+", default=CONFIGS)
    ap.add_argument("--runs", type=Path, default=ROOT / "runs" / "logic")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-train", action="store_true",
                    help="only score the runs already in --runs")
    ap.add_argument("--out", type=Path, help="write the record here instead of "
                    "benchmarks/results/logic-<date>.json")
    ap.add_argument("overrides", nargs="*", help="key=value overrides for every config")
    args = ap.parse_args()
    measure("logic", args, score, table)


def measure(script: str, args: argparse.Namespace, score: Callable[[Path, int], dict[str, Any]],
            table: Callable[[dict[str, dict[str, Any]]], str]) -> None:
    """Train each of ``args.configs`` in turn, score it, and merge the entries into the day's
    ``<script>`` record with its table (this script's and ``listops.py``'s whole loop)."""
    entries = {}
    for cfg in args.configs:
        name = Path(cfg).stem
        run = args.runs / name
        command = train(cfg, run, args.minutes, args.threads, args.overrides, args.no_train)
        entries[name] = {"config": cfg, "run_dir": str(run), "train_command": command,
                         "overrides": args.overrides, **score(run, args.threads)}
    path = args.out or result_path(script)
    old = json.loads(path.read_text()).get("configs", {}) if path.exists() else {}
    text = table({**old, **entries})       # with the configs measured earlier the same day
    write_result(script, {"configs": entries, "table": text}, merge_key="configs", path=path,
                 echo=False)
    print(text)


if __name__ == "__main__":
    main()
