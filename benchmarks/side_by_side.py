"""Two trainings side by side on one machine (issue 38): each one's training speed alone and with a
second one started at the same moment, under each OpenMP setting.

    python benchmarks/side_by_side.py [--config configs/ptb-onlstm-cpu.yaml] [--tokens 150000]
        [--settings today treelm passive active] [--out FILE.json] [key=value ...]

A setting is the environment the trainings run in (:data:`SETTINGS`): ``today`` is what treelm
did before it chose its own OpenMP defaults (libgomp's own default for an unset wait policy,
``GOMP_SPINCOUNT=300000``; treelm's busy-core check off), ``treelm`` today's defaults (nothing
set: treelm's choice applies), ``passive`` and ``active`` force libgomp's wait policy. For each
setting the script runs ``treelm train`` on ``--config`` for ``--tokens`` training tokens alone,
then two such trainings started together (other seeds' data order is the same: each is the
config's run), and reads each run's training speed from its metrics log: the tokens of its
``train`` events over their summed wall time (``log_interval`` 10 batches; the first event, with
start-up, left out). Alone and pair alternate over ``--rounds`` so that a machine's drift falls
on all. Run it alone on the machine: it is a timing.

The record: per setting, alone and pair tokens/s (each of the two), the pair's ratio to alone,
and the threads each training used.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from common import machine_info, write_result  # noqa: E402

#: name -> (what it is, environment it adds, config overrides it adds). ``TREELM_BUSY_CHECK=0``
#: turns treelm's start-up check of other busy processes off, as before it existed.
SETTINGS: dict[str, tuple[str, dict[str, str], tuple[str, ...]]] = {
    "today": ("before this change: libgomp's default for an unset wait policy (spin 300,000 "
              "rounds), no busy-core check", {"GOMP_SPINCOUNT": "300000",
                                             "TREELM_BUSY_CHECK": "0"}, ()),
    "treelm": ("treelm's defaults (nothing set)", {}, ()),
    "short": ("GOMP_SPINCOUNT=10000 (tens of microseconds), no busy-core check",
              {"GOMP_SPINCOUNT": "10000", "TREELM_BUSY_CHECK": "0"}, ()),
    "one-thread": ("treelm's defaults, each training on one thread (train.threads=1)", {},
                   ("train.threads=1",)),
    "passive": ("OMP_WAIT_POLICY=PASSIVE, no busy-core check",
                {"OMP_WAIT_POLICY": "PASSIVE", "TREELM_BUSY_CHECK": "0"}, ()),
    "active": ("OMP_WAIT_POLICY=ACTIVE, no busy-core check",
               {"OMP_WAIT_POLICY": "ACTIVE", "TREELM_BUSY_CHECK": "0"}, ()),
}
OMP_KEYS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "TREELM_BUSY_CHECK", "OMP_NUM_THREADS")


def speed(run: Path) -> dict[str, Any]:
    """Training tokens/s of a finished run from its ``train`` events (the first left out)."""
    from treelm.rundir.files import read_metrics

    events = read_metrics(run, "train")[1:]
    rates = [e["tok_s"] for e in events]
    return {"tok_s": statistics.fmean(rates) if rates else None,
            "tok_s_median": statistics.median(rates) if rates else None,
            "windows": len(rates), "threads": sorted({e.get("threads") for e in events})}


def launch(args: argparse.Namespace, out: Path, env: dict[str, str],
           extra: Sequence[str]) -> subprocess.Popen:
    config = Path(args.config) if Path(args.config).exists() else ROOT / args.config
    cmd = [sys.executable, "-m", "treelm.cli", "train", "--config", str(config), "--out",
           str(out), "--force", "--quiet", f"train.max_units={args.tokens}",
           "train.max_minutes=null", "train.eval_every_minutes=null", "train.log_interval=10",
           "train.lr_schedule=constant", *extra, *args.overrides]
    full = {k: v for k, v in os.environ.items() if k not in OMP_KEYS}
    return subprocess.Popen(cmd, env={**full, **env}, stdout=subprocess.DEVNULL)


def trial(args: argparse.Namespace, tmp: Path, env: dict[str, str], extra: Sequence[str],
          n: int) -> list[Any]:
    """``n`` trainings started together (``study_throughput.py``'s too); their speeds."""
    runs = [tmp / f"run{i}" for i in range(n)]
    for r in runs:
        shutil.rmtree(r, ignore_errors=True)
    procs = [launch(args, r, env, extra) for r in runs]
    codes = [p.wait() for p in procs]
    if any(codes):
        raise SystemExit(f"{Path(sys.argv[0]).name}: a training failed (exit codes {codes})")
    return [speed(r) for r in runs]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="configs/ptb-onlstm-cpu.yaml")
    ap.add_argument("--tokens", type=int, default=150_000, help="training tokens per run")
    ap.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    ap.add_argument("--rounds", type=int, default=1, help="alone/pair alternations per setting")
    ap.add_argument("--out", type=Path)
    ap.add_argument("overrides", nargs="*", metavar="key=value")
    args = ap.parse_args(argv)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="side_by_side-") as d:
        tmp = Path(d)
        for rnd in range(args.rounds):
            for name in args.settings:
                what, env, extra = SETTINGS[name]
                t0 = time.perf_counter()
                alone = trial(args, tmp, env, extra, 1)
                pair = trial(args, tmp, env, extra, 2)
                entry = results.setdefault(name, {"what": what, "env": env,
                                                  "overrides": list(extra), "alone": [],
                                                  "pair": []})
                entry["alone"] += alone
                entry["pair"].append(pair)
                each = " + ".join(f"{p['tok_s']:.0f}" for p in pair)
                print(f"round {rnd + 1} {name}: alone {alone[0]['tok_s']:.0f} tok/s, pair "
                      f"{each} tok/s ({time.perf_counter() - t0:.0f} s)", file=sys.stderr,
                      flush=True)
    for entry in results.values():
        alone = statistics.fmean(a["tok_s"] for a in entry["alone"])
        each = [p["tok_s"] for pair in entry["pair"] for p in pair]
        entry["alone_tok_s"] = alone
        entry["pair_tok_s_each"] = each
        entry["pair_min_ratio"] = min(each) / alone
        entry["pair_mean_ratio"] = statistics.fmean(each) / alone
    if "today" in results and "treelm" in results:
        results["treelm"]["alone_vs_today"] = (results["treelm"]["alone_tok_s"]
                                               / results["today"]["alone_tok_s"])
    record = {"config": args.config, "tokens": args.tokens, "rounds": args.rounds,
              "overrides": args.overrides, "settings": results, "machine": machine_info()}
    # settings measured by separate invocations on one day end up in one record
    out = write_result("side_by_side", record, merge_key="settings", path=args.out, echo=False)
    print(json.dumps(out["settings"], indent=2))
    return out


if __name__ == "__main__":
    main()
