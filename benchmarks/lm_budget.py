"""Train language-model configs for the same wall time and compare what they reach.

    python benchmarks/lm_budget.py --minutes 60 --configs configs/ptb-onlstm-cpu.yaml \
        configs/ptb-lstm-cpu.yaml

Each config is trained alone (one after the other, never side by side: two jobs on two cores
halve each other) by ``treelm train ... train.max_minutes=M`` into ``--runs/<config name>``, with a
validation every ``--eval-every`` minutes. The JSON record
(``benchmarks/results/lm_budget-DATE.json``;
entries of the same day are merged by config) holds per config: parameters, tokens seen, tokens/s,
the validation curve (minutes, perplexity or bits/char), the best validation figure, the machine
and, with ``--test``, the test figure of the best checkpoint. On a GPU (``train.device=cuda``)
write to a file of its own (``--out benchmarks/results/lm_budget-gpu-DATE.json``), so that CPU and
GPU entries of one day do not mix.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine_info, write_result  # noqa: E402

from treelm.rundir.files import read_metrics  # noqa: E402


def summarize(run: Path, minutes: float) -> dict:
    ms = read_metrics(run)
    valid = [m for m in ms if m["event"] == "valid"]
    train = [m for m in ms if m["event"] == "train"]
    done = next((m for m in reversed(ms) if m["event"] == "done"), {})
    key = "bpc" if valid and "bpc" in valid[0] else "ppl"
    elapsed = done.get("elapsed", valid[-1]["elapsed"] if valid else 0.0)
    tokens = done.get("tokens", train[-1]["tokens"] if train else 0)
    return {
        "minutes": minutes,
        "metric": key,
        "tokens_seen": tokens,
        "tokens_per_s": tokens / elapsed if elapsed else None,
        "epochs_completed": sum(1 for m in valid if m.get("epoch_end")),
        "valid_curve": [[round(m["elapsed"] / 60, 2), round(m[key], 3)] for m in valid],
        f"best_valid_{key}": min((m[key] for m in valid), default=None),
        "elapsed_s": elapsed,
        "precision": done.get("precision", "fp32"),     # train.precision as resolved
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, required=True, help="wall-time budget per config")
    ap.add_argument("--configs", nargs="+", required=True, help="YAML configs to compare")
    ap.add_argument("--runs", default="runs/lm_budget", help="where the run directories go")
    ap.add_argument("--eval-every", type=float, default=None,
                    help="minutes between validations inside an epoch (default: minutes / 12)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--test", action="store_true", help="also evaluate the best checkpoint on test")
    ap.add_argument("--no-train", action="store_true",
                    help="only collect the figures of runs already in --runs (e.g. after a "
                    "run was killed and finished with `treelm train --resume`)")
    ap.add_argument("--note", help="a remark stored with each config's entry")
    ap.add_argument("--checkout", metavar="DIR",
                    help="train with the treelm of another checkout (e.g. a `git worktree` of an "
                    "earlier commit, to compare speed and curves across a change); its commit "
                    "is recorded and appended to the entry's name")
    ap.add_argument("--name-suffix", default="", help="appended to each entry's name")
    ap.add_argument("--out", type=Path, default=None,
                    help="result file (default benchmarks/results/lm_budget-DATE.json; a GPU "
                         "run goes to its own file, e.g. lm_budget-gpu-DATE.json)")
    ap.add_argument("overrides", nargs="*", help="key=value overrides for every config")
    args = ap.parse_args()
    results = {}
    env, commit, where = dict(os.environ), _commit(Path.cwd()), None
    if args.checkout:
        # run inside the checkout: `python -m` puts the working directory first on sys.path,
        # ahead of PYTHONPATH and of an editable install of this tree
        where = str(Path(args.checkout).resolve())
        env["PYTHONPATH"] = where
        commit = _commit(Path(args.checkout))
    suffix = args.name_suffix + (f"@{commit[:7]}" if args.checkout else "")
    for cfg in args.configs:
        name = Path(cfg).stem + suffix
        run = Path(args.runs) / name
        every = args.eval_every or max(0.5, args.minutes / 12)
        cmd = [sys.executable, "-m", "treelm.cli", "train", "--config",
               str(Path(cfg).resolve()), "--out", str(run.resolve()),
               "--force", f"train.max_minutes={args.minutes}", f"train.eval_every_minutes={every}",
               f"train.threads={args.threads}", "train.epochs=100000", *args.overrides]
        if not args.no_train:
            print("+", " ".join(cmd), file=sys.stderr, flush=True)
            subprocess.run(cmd, check=True, env=env, cwd=where)
        res = summarize(run, args.minutes)
        res["config"] = cfg
        res["run_dir"] = str(run)
        res["parameters"] = _parameters(run)
        res["train_command"] = " ".join(["python -m treelm.cli", *cmd[3:]])
        res["commit"] = commit
        res["machine"] = machine_info()     # per entry: same-day entries merge into one file
        if args.note:
            res["note"] = args.note
        if args.test:
            out = subprocess.run([sys.executable, "-m", "treelm.cli", "eval", str(run), "--split",
                                  "test", "--threads", str(args.threads)],
                                 check=True, capture_output=True, text=True).stdout
            res["test"] = json.loads(out.strip().splitlines()[-1])
        results[name] = res
    write_result("lm_budget", {"configs": results}, merge_key="configs", path=args.out)


def _commit(where: Path) -> str:
    out = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True,
                         text=True)
    return out.stdout.strip() or "unknown"


def _parameters(run: Path) -> int:
    from treelm.run import load_run

    return sum(p.numel() for p in load_run(run).model.parameters())


if __name__ == "__main__":
    main()
