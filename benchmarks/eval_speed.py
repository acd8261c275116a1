"""How long ``treelm eval RUN --split test`` takes, what it says meanwhile, and whether the fast
path gives the readable path's perplexity (issue 23).

    python benchmarks/eval_speed.py RUN [--split test] [--precisions fp32 run]
        [--no-reference] [--out FILE]

For each precision (``run``: the one the run trained in) the verb runs as a user runs it, in a
subprocess, timed from start to exit (loading the run included); its stderr lines are kept with
the second each arrived, so the record shows the longest silence (the verb must speak at least
every 30 s). Then, unless ``--no-reference``, the same split is scored in this process with every
ON-LSTM layer on its readable per-step implementation (``impl="reference"``, float32): the
fused path's float32 perplexity should agree with it to 4 significant digits.

Target: at most 60 s for a ``ptb-onlstm-cpu`` run's test split (batch 1) on 2 cores. Run it
alone: the figures are wall-clock. The record: ``benchmarks/results/eval_speed-<date>.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

TARGET_S = 60.0
QUIET_MAX_S = 30.0


def timed_eval(run: str, split: str, precision: str) -> dict:
    """``treelm eval RUN --split S [--precision P]`` in a subprocess: seconds, the printed scores
    and the longest gap between lines on stderr (from the start to the exit)."""
    cmd = [sys.executable, "-m", "treelm.cli", "eval", run, "--split", split]
    if precision != "run":
        cmd += ["--precision", precision]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    arrivals, lines = [], []
    assert proc.stderr is not None and proc.stdout is not None
    for line in proc.stderr:                  # progress lines and a final carriage return or two
        arrivals.append(time.perf_counter() - t0)
        lines.append(line.rstrip("\n")[-160:])
    out = proc.stdout.read()
    code = proc.wait()
    seconds = time.perf_counter() - t0
    if code != 0:
        raise SystemExit(f"eval_speed: {' '.join(cmd[2:])} failed (exit {code}): {lines[-1:]}")
    marks = [0.0, *arrivals, seconds]
    scores = json.loads(out.strip().splitlines()[-1])
    return {"command": "treelm " + " ".join(cmd[3:]), "seconds": round(seconds, 2),
            "ppl": scores.get("ppl"), "bpc": scores.get("bpc"), "loss": scores["loss"],
            "stderr_lines": len(lines), "longest_silence_s": round(max(
                b - a for a, b in zip(marks, marks[1:])), 2), "last_stderr": lines[-3:]}


def reference_eval(run: str, split: str) -> dict:
    """The split scored with every ON-LSTM layer on its readable loop, in float32."""
    from treelm.run import load_run

    r = load_run(run)             # no autocast around it: float32
    cells = [c for c in r.model.layer_cells() if hasattr(c, "impl")]
    for cell in cells:
        cell.impl = "reference"
    t0 = time.perf_counter()
    ev = r.task.evaluate(r.model, split)
    return {"seconds": round(time.perf_counter() - t0, 2), "impl": "reference",
            "layers_switched": len(cells), **{k: ev.scores[k] for k in ("loss", "ppl", "bpc")
                                              if k in ev.scores}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run")
    ap.add_argument("--split", choices=["valid", "test"], default="test")
    ap.add_argument("--precisions", nargs="+", default=["fp32", "run"],
                    choices=["fp32", "bf16", "run"])
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    entries = {}
    for prec in args.precisions:
        entries[prec] = timed_eval(args.run, args.split, prec)
        e = entries[prec]
        print(f"{prec}: {e['seconds']:.1f} s, loss {e['loss']}, longest silence "
              f"{e['longest_silence_s']} s", file=sys.stderr, flush=True)
    record: dict = {"run": args.run, "split": args.split, "target_s": TARGET_S,
                    "quiet_max_s": QUIET_MAX_S, "evals": entries}
    if not args.no_reference:
        ref = reference_eval(args.run, args.split)
        record["reference"] = ref
        if "fp32" in entries:
            key = "ppl" if "ppl" in ref else "bpc"
            fast = entries["fp32"][key]
            record["agreement"] = {"figure": key, "fused_fp32": fast, "reference": ref[key],
                                   "same_to_4_digits": f"{fast:.4g}" == f"{ref[key]:.4g}"}
    write_result("eval_speed", record)


if __name__ == "__main__":
    main()
