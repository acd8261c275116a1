"""A change to the training step, timed against the code before it: the trainer's step of one
config from two source trees, in alternating processes, round after round.

    python benchmarks/step_ab.py --old ../treelm-old [--new .] [--rounds 9] [--warmup 150]
        [--steps 150] [--validations N] [--config configs/ptb-onlstm-trees.yaml] [--out PATH]
        [key=value ...]

``--validations N`` times the run's validation instead of its step: after the warm-up steps one
untimed validation (its products' backends are measured there), then ``N`` validations, each
the task's score on the valid split and, with ``train.eval_parse``, the dev trees' levels and F1
(``NLTK_DATA`` must hold the treebank), timed apart. Its ``tokens_per_s`` counts the valid
split's tokens and the dev trees' words a second of validation (``ppl_seconds`` and
``trees_seconds`` per validation beside it).

``--old`` / ``--new``: checkouts (a ``git worktree`` of the commit before, and this one); each run
is a fresh process importing ``treelm`` from its tree (``PYTHONPATH``), with the same
interpreter, torch and cache of built loops. A run builds the config's ``Trainer`` (the
overrides apply to both), takes ``--warmup`` steps (the products' backends are measured in the
first ones, and with variable BPTT each new length is a new shape), then times ``--steps``
steps: tokens/s, and the minor page faults a step (fresh memory the kernel zeroes) beside them.
Rounds alternate the order (old, new; new, old; ...), so a machine that drifts slows both alike;
the verdict is the median of the rounds' ratios new / old.

Each run's OpenMP threads wait as ``treelm train`` has them wait (``GOMP_SPINCOUNT``,
:mod:`treelm.omp`, unless the environment sets it): a change to how threads meet (joins, regions)
is judged as the command line runs it; the record's ``machine.env`` says which.

Why a script: on a shared 2-core VM one run's rate wanders by ±10% over minutes, more than most
single changes gain, so a change is kept only on interleaved rounds (issue 56 asks for 9). Run it
alone: it is a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from treelm import omp  # noqa: E402

omp.configure()     # set before torch loads libgomp here, and inherited by each run's process
from common import endless, step_trainer, write_result  # noqa: E402


def one_run(config: str, overrides: list[str], warmup: int, steps: int) -> dict[str, Any]:
    """In this process (``treelm`` from whichever tree ``PYTHONPATH`` names): the step's rate."""
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        tr = step_trainer(config, overrides, tmp)
        batches = endless(tr)
        for _ in range(warmup):
            tr.step(next(batches), tr.tc.lr)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        tokens, t0 = 0, time.perf_counter()
        for _ in range(steps):
            batch = next(batches)
            tr.step(batch, tr.tc.lr)
            tokens += batch.size
        seconds = time.perf_counter() - t0
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        return {"tokens_per_s": round(tokens / seconds, 1), "precision": tr.choice.precision,
                "page_faults_per_step": round(faults / steps), "threads": torch.get_num_threads(),
                "gemm": gemm_chosen()}


def validation_run(config: str, overrides: list[str], warmup: int, n: int) -> dict[str, Any]:
    """In this process: ``n`` validations of the trainer after ``warmup`` steps (module
    docstring), the parts timed apart."""
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        tr = step_trainer(config, overrides, tmp)
        batches = endless(tr)
        for _ in range(warmup):
            tr.step(next(batches), tr.tc.lr)
        tr.validate()
        ppl = trees = 0.0
        with tr.autocast():
            for _ in range(n):
                t0 = time.perf_counter()
                tr.task.evaluate(tr.model, "valid")
                t1 = time.perf_counter()
                if tr.trees is not None:
                    tr.trees.scores(tr.model, tr.task.vocab)
                ppl, trees = ppl + t1 - t0, trees + time.perf_counter() - t1
        words = sum(len(g.words) for g in tr.trees.golds) if tr.trees is not None else 0
        tokens = int(tr.task.corpus.valid.numel()) + words
        return {"tokens_per_s": round(n * tokens / (ppl + trees), 1),
                "ppl_seconds": round(ppl / n, 3), "trees_seconds": round(trees / n, 3),
                "dev_tree_words": words, "precision": tr.choice.precision,
                "threads": torch.get_num_threads(), "gemm": gemm_chosen()}


def gemm_chosen() -> dict[str, str]:
    """This process's GEMM backend per product (``"loop"``: a time loop's, over the batch
    lengths it served; several backends joined by ``/`` where lengths chose differently): each
    process measures its own, and among near ties the choice, with it the rate, flips."""
    from treelm.kernels import gemm

    chosen: dict[str, set[str]] = {}
    for d in gemm.decisions():
        name = f"{d['product']}{'ᵀ' if d['transpose'] else ''}{' loop' if d['steps'] > 1 else ''}"
        chosen.setdefault(name, set()).add(d["backend"])
    return {k: "/".join(sorted(v)) for k, v in sorted(chosen.items())}


def run_tree(tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    """:func:`one_run` in a fresh process importing ``treelm`` from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", "--config", args.config,
           "--warmup", str(args.warmup), "--steps", str(args.steps),
           "--validations", str(args.validations), *args.overrides]
    out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, help="the checkout before the change")
    ap.add_argument("--new", type=Path, default=Path("."), help="the checkout with it (here)")
    ap.add_argument("--config", default="configs/ptb-onlstm-trees.yaml")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--validations", type=int, default=0,
                    help="time this many validations instead of steps (module docstring)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("overrides", nargs="*", help="config overrides (key=value), for both")
    args = ap.parse_args()
    if args.one:
        run = (validation_run(args.config, args.overrides, args.warmup, args.validations)
               if args.validations else
               one_run(args.config, args.overrides, args.warmup, args.steps))
        print(json.dumps(run))
        return
    if args.old is None:
        ap.error("--old: the checkout to compare with (e.g. git worktree add ../old HEAD~1)")
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    for name, tree in trees.items():
        if not (tree / "treelm" / "__init__.py").is_file():
            ap.error(f"--{name} {tree}: not a treelm checkout (no treelm/__init__.py)")

    def commit(tree: Path) -> str:
        git = ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"]
        return subprocess.run(git, capture_output=True, text=True).stdout.strip()

    rounds = []
    for i in range(args.rounds):
        order = ("old", "new") if i % 2 == 0 else ("new", "old")
        got = {name: run_tree(trees[name], args) for name in order}
        ratio = got["new"]["tokens_per_s"] / got["old"]["tokens_per_s"]
        rounds.append({"order": list(order), **got, "new_over_old": round(ratio, 4)})
        print(f"round {i + 1}: old {got['old']['tokens_per_s']:,.0f}  new "
              f"{got['new']['tokens_per_s']:,.0f} tokens/s  ({ratio:.3f})", file=sys.stderr)
    ratios = [r["new_over_old"] for r in rounds]
    write_result("step_ab", {
        "config": args.config, "overrides": args.overrides,
        "old": {"tree": str(args.old), "commit": commit(trees["old"])},
        "new": {"tree": str(args.new), "commit": commit(trees["new"])},
        "warmup": args.warmup, "steps": args.steps, "validations": args.validations,
        "rounds": rounds,
        "median_old_tokens_per_s": statistics.median(r["old"]["tokens_per_s"] for r in rounds),
        "median_new_tokens_per_s": statistics.median(r["new"]["tokens_per_s"] for r in rounds),
        "median_new_over_old": statistics.median(ratios),
        "rounds_new_faster": sum(x > 1 for x in ratios),
    }, path=args.out)


if __name__ == "__main__":
    main()
