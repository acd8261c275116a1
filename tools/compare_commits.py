"""Does a refactoring change what training computes? Each task trained at two commits, compared
step by step (:mod:`compare_runs`).

    python tools/compare_commits.py BEFORE AFTER --name PREFIX
        [--tasks lm tagging logic translation listops] [--work DIR] [--gemm mm]

For each task a config of it (:data:`TASKS`: its name, the config and a unit budget) is trained
from the same seed at commit BEFORE and at commit AFTER (each checked out as a detached git
worktree under ``--work``), side by side, one thread each (``OMP_NUM_THREADS=1``,
``train.threads=1``), in float32, at a constant learning rate, for the same number of training
units (``train.max_units``), logging every 5 steps, with the GEMM backend pinned (``TREELM_GEMM``,
default ``mm``: a measured choice may differ between two processes and change the rounding). Then
the logged training losses, the validation scores and the final weights of the two runs are
compared (:func:`compare_runs.compare`) and written to
``benchmarks/results/compare_runs-<date>.json`` as ``PREFIX-<task>``. Identical losses at every
logged step and identical weights mean the two commits train alike.

It lives in ``tools/``, not ``benchmarks/``: it checks that two commits compute alike and
measures no speed; its record goes where the benchmarks' go (``benchmarks/common.py``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "benchmarks")]      # compare_runs, common
from common import write_result  # noqa: E402
from compare_runs import compare  # noqa: E402

#: task -> (config, training units): a few minutes on one thread each.
TASKS = {
    "lm": ("configs/ptb-onlstm-cpu.yaml", 150_000),
    "tagging": ("configs/atis-elman.yaml", 150_000),
    "logic": ("configs/logic-onlstm.yaml", 40_000),
    "translation": ("configs/reverse-convs2s.yaml", 100_000),
    "listops": ("configs/listops-onlstm.yaml", 20_000),
}


def checkout(commit: str, work: Path) -> Path:
    """A detached worktree of ``commit`` under ``work`` (reused when it is there)."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", commit], check=True,
                         capture_output=True, text=True).stdout.strip()
    tree = work / f"tree-{sha}"
    if not tree.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), sha],
                       check=True, capture_output=True)
    return tree


def train(tree: Path, config: str, units: int, out: Path, gemm: str) -> subprocess.Popen:
    """``treelm train`` of ``config`` at the commit checked out in ``tree`` (its own code: the
    worktree is first on the path), in the background."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TREELM_GEMM": gemm, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "treelm.cli", "train", "--config", config, "--out", str(out),
           "--force", "--quiet", "train.threads=1", "train.precision=fp32",
           "train.lr_schedule=constant", f"train.max_units={units}", "train.max_minutes=null",
           "train.eval_every_minutes=null", "train.epochs=1000", "train.log_interval=5"]
    return subprocess.Popen(cmd, cwd=tree, env=env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--name", required=True, help="prefix of the record's entries")
    ap.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=list(TASKS))
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "compare_commits")
    ap.add_argument("--gemm", default="mm", help="TREELM_GEMM for both (default mm)")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    trees = {side: checkout(c, args.work.resolve())
             for side, c in (("before", args.before), ("after", args.after))}
    entries = {}
    for task in args.tasks:
        config, units = TASKS[task]
        runs = {side: args.work.resolve() / side / task for side in trees}
        procs = [train(trees[s], config, units, runs[s], args.gemm) for s in trees]
        if any(p.wait() != 0 for p in procs):
            raise SystemExit(f"compare_commits: a {task} run failed")
        entry = compare(runs["before"], runs["after"], weights=True)
        entry["note"] = (f"before {trees['before'].name[5:]}, after {trees['after'].name[5:]}: "
                         f"{config}, {units:,} units, one thread each, fp32, constant rate, "
                         f"TREELM_GEMM={args.gemm}")
        entries[f"{args.name}-{task}"] = entry
        print(f"{task}: losses identical {entry['train_losses_identical']} over "
              f"{entry['train_steps_compared']} steps, weights identical "
              f"{entry.get('weights_identical')}", file=sys.stderr, flush=True)
    write_result("compare_runs", {"entries": entries}, merge_key="entries", folder="tools")


if __name__ == "__main__":
    main()
