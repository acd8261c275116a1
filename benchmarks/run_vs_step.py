"""A training's own step rate against ``step_profile``'s, in alternating processes: whether the
run's loop keeps the step's speed (issue 56: within 5%).

    python benchmarks/run_vs_step.py [--pairs 3] [--units 500000]
        [--config configs/ptb-onlstm-trees.yaml] [--warmup 300] [--steps 40] [--out PATH]
        [key=value ...]

A pair is a short ``treelm train`` of ``--units`` tokens (one validation, at its end) and a
``benchmarks/step_profile.py`` run of the same config, one after the other, the order
alternating from pair to pair so that a machine whose speed drifts slows both alike. The run's
rate is its own account's: tokens over the seconds of its optimisation steps
(``seconds_by_phase.steps`` in its ``done`` event: batching, logging and progress are the
``loop`` phase; start-up, validation and checkpoints their own), its first steps included (new
batch lengths, the products' backends measured); ``step_profile``'s is the step alone,
``--steps`` timed after ``--warmup`` untimed ones (its defaults, 40 after 300), with the same
OpenMP wait. ``run_over_step`` per pair and its median. Both take the overrides. Run it alone on
the machine (the timing lock, ``DEVELOPERS.md``); the record is
``benchmarks/results/run_vs_step-DATE.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import result_path, write_result  # noqa: E402
from train_time import summary  # noqa: E402


def run_rate(config: str, units: int, overrides: list[str], folder: Path) -> dict[str, Any]:
    """A short training's steps rate, from its ``done`` event (``train_time.summary``)."""
    out = folder / "run"
    cmd = [sys.executable, "-m", "treelm.cli", "train", "--config", config, "--out", str(out),
           "--force", "--quiet", f"train.max_units={units}",
           f"train.eval_every_units={2 * units}", *overrides]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    done = summary(out)
    return {"tokens_per_s": done["step_tokens_per_s"], "tokens": done["tokens"],
            "seconds_by_phase": done["seconds_by_phase"]}


def step_rate(config: str, overrides: list[str], folder: Path, warmup: int,
              steps: int) -> dict[str, Any]:
    """``step_profile``'s rate of the same config, in a process of its own."""
    out = folder / "step_profile.json"
    cmd = [sys.executable, str(HERE / "step_profile.py"), "--configs", config,
           "--peak-seconds", "0.01", "--warmup", str(warmup), "--steps", str(steps),
           "--out", str(out), *overrides]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    (r,) = json.loads(out.read_text(encoding="utf-8"))["results"]
    return {"tokens_per_s": r["tokens_per_s"], "steps": r["steps"], "warmup": r["warmup"]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="configs/ptb-onlstm-trees.yaml")
    ap.add_argument("--pairs", type=int, default=3, help="alternating pairs (default 3)")
    ap.add_argument("--units", type=int, default=500000,
                    help="tokens each training runs (default 500,000)")
    ap.add_argument("--warmup", type=int, default=300,
                    help="step_profile's untimed steps first (default 300)")
    ap.add_argument("--steps", type=int, default=40, help="step_profile's timed steps (default 40)")
    ap.add_argument("--out", type=Path, help="the record (default run_vs_step-DATE.json)")
    ap.add_argument("overrides", nargs="*", metavar="key=value")
    args = ap.parse_args(argv)
    if args.pairs < 1 or args.units < 1 or args.steps < 1 or args.warmup < 0:
        ap.error("--pairs, --units and --steps must be >= 1, --warmup >= 0")
    if not Path(args.config).is_file():
        ap.error(f"config {args.config} not found")
    pairs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            order = ["run", "step"] if i % 2 == 0 else ["step", "run"]
            pair: dict[str, Any] = {"order": order}
            for what in order:
                folder = Path(tmp) / f"{i}-{what}"
                folder.mkdir()
                pair[what] = (run_rate(args.config, args.units, args.overrides, folder)
                              if what == "run" else step_rate(args.config, args.overrides, folder,
                                                  args.warmup, args.steps))
            pair["run_over_step"] = round(pair["run"]["tokens_per_s"]
                                          / pair["step"]["tokens_per_s"], 4)
            print(f"pair {i + 1}: run {pair['run']['tokens_per_s']:,.0f}  step "
                  f"{pair['step']['tokens_per_s']:,.0f} tokens/s  ({pair['run_over_step']})",
                  file=sys.stderr)
            pairs.append(pair)
    record = {"config": args.config, "overrides": args.overrides, "units": args.units,
              "pairs": pairs,
              "median_run_over_step": round(statistics.median(p["run_over_step"] for p in pairs),
                                            4)}
    return write_result("run_vs_step", record, path=args.out or result_path("run_vs_step"))


if __name__ == "__main__":
    main()
