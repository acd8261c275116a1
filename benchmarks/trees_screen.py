"""The tree screen (issue 37): which training recipe makes ON-LSTM's layers parse, one factor at a
time from the paper's recipe, several seeds each, at a fixed token budget.

    NLTK_DATA=../shared/data/nltk_data python benchmarks/trees.py --screen \
        [--budget 2000000] [--seeds 3] [--recipes paper adam ...] [--threads 1] \
        [--runs runs/trees-screen] [--out FILE.json] [--eval-every-tokens 400000] [key=value ...]

Every run trains ``--config`` (``configs/ptb-onlstm-cpu.yaml``, 3 layers of 400) with the
recipe's overrides for ``--budget`` training tokens (``train.max_units``) at a constant rate, and
validates each time the tokens seen cross a multiple of ``--eval-every-tokens``
(``train.eval_every_units``: the same points on any machine, however loaded) and at the budget's
end; every validation logs ``train.eval_parse`` on ``--dev`` (``nltk-dev``): the sentence F1 of
every layer under both tree rules. A run's figures are those of its best validation (lowest
validation loss, the checkpoint ``best`` keeps); the test treebank is never read here.

The recipes (:data:`RECIPES`) each change one thing of the paper's (NT-ASGD at lr 30, batch 20,
BPTT 70, dropouts 0.45 / 0.3 / 0.5 / 0.1, weight drop 0.45, the paper's master input gate, three
layers); ``control`` is the CPU config itself (Adam 3e-3, batch 64, BPTT 35, its lighter
dropouts) at the same budget and a constant rate.

Several workers share one screen: start this command several times, on one machine (``--threads
1`` each) or on several machines with the same ``--runs`` on a shared filesystem. Runs are taken
seed by seed (every recipe's seed 1, then seed 2, ...), so a screen stopped early has compared
every recipe. A worker takes a run by the ``flock`` of ``RUNS/<run>.claim`` (released by the
kernel when the worker dies however it dies), skips runs another worker holds, continues a killed
run with ``treelm train --resume``, and adds each run to the record as it ends, under the record's
own ``flock``, re-reading the record first, and replacing it atomically, so no worker loses
another's run. A rerun of the same command picks up what is left.

The summary, recomputed at every addition: per recipe the seeds done, validation perplexity, and
per rule the layer with the best mean dev F1 over its seeds with that mean ± std; the margin over
right-branching on the same sentences (baselines: :mod:`treelm.syntax.baselines`); the ranking
under the official rule; the chosen recipe (the best dev mean under the official rule among the
recipes with every seed done).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from common import find_record, machine_info, repo_path, result_path, write_result  # noqa: E402
from tree_runs import (  # noqa: E402
    BASELINES,
    RULES,
    StudyError,
    curve,
    finished,
    held,
    mean_std,
    run_command,
    train_to_end,
)

#: The paper's recipe at 400 units on the CPU config (Shen et al. 2019, Sec. 6.1; the official
#: README's command): the base every other recipe changes one factor of.
PAPER = ("train.optimizer=ntasgd", "train.lr=30", "train.batch_size=20", "train.bptt=70",
         "model.dropout=0.45", "model.dropouth=0.3", "model.dropouti=0.5",
         "model.dropoute=0.1", "model.wdrop=0.45")
CPU_DROPOUTS = ("model.dropout=0.35", "model.dropouth=0.2", "model.dropouti=0.3",
                "model.dropoute=0.05", "model.wdrop=0.2")
#: name -> (what it changes, overrides on the config). ``control`` is the config unchanged.
RECIPES: dict[str, tuple[str, tuple[str, ...]]] = {
    "paper": ("the paper's recipe at 400 units", PAPER),
    "control": ("the CPU config unchanged (Adam 3e-3, batch 64, BPTT 35, light dropouts)", ()),
    "adam": ("Adam 3e-3 instead of NT-ASGD lr 30",
             (*PAPER, "train.optimizer=adam", "train.lr=3e-3")),
    "batch64": ("batch 64 instead of 20", (*PAPER, "train.batch_size=64")),
    "bptt35": ("BPTT 35 instead of 70", (*PAPER, "train.bptt=35")),
    "cpu-dropouts": ("the CPU config's dropouts (0.35 / 0.2 / 0.3 / 0.05, wdrop 0.2)",
                     (*PAPER, *CPU_DROPOUTS)),
    "symmetric": ("the symmetric master input gate (Su)",
                  (*PAPER, "model.cell_options.master_input=symmetric")),
    "layers2": ("two layers of 400", (*PAPER, "model.sizes=[400,400,400]")),
    "layers4": ("four layers of 400", (*PAPER, "model.sizes=[400,400,400,400,400]")),
}
EVAL_EVERY_TOKENS = 400_000     # the screen's validation period when none is given
#: Keys a screen keeps across reruns and workers: other values would mix two screens.
#: (A recipe may join a screen later; one defined otherwise than in the record may not.)
SCREEN_KEYS = ("config", "budget", "eval_every", "dev", "precision", "overrides")


ScreenError = StudyError     # (one kind of error for the study and the screen)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--budget", type=int, default=2_000_000,
                    help="training tokens per run (default 2,000,000)")
    ap.add_argument("--eval-every-tokens", type=int,
                    help="validate (and score trees on --dev) every this many tokens (the "
                         "screen's default 400,000; the study's: the config's period)")
    ap.add_argument("--recipes", nargs="+", choices=list(RECIPES), default=list(RECIPES),
                    help="recipes to screen (default all, in this order)")


def settings(args: argparse.Namespace) -> dict[str, Any]:
    return {"config": args.config, "budget": args.budget, "eval_every": args.eval_every_tokens,
            "dev": args.dev, "precision": args.precision, "overrides": list(args.overrides),
            "recipes": {name: list(RECIPES[name][1]) for name in args.recipes}}


def run_name(recipe: str, seed: int) -> str:
    return f"{recipe}-seed{seed}"


def plan(recipes: Sequence[str], seeds: int) -> list[tuple[str, int]]:
    """Every run, seed by seed: a screen cut short has seen every recipe."""
    return [(r, s) for s in range(1, seeds + 1) for r in recipes]


# ----------------------------------------------------------------------------- training
def train_command(args: argparse.Namespace, run: Path, recipe: str, seed: int) -> list[str]:
    """``treelm train`` for a new run, or ``--resume`` for a killed one."""
    from treelm.rundir.files import RunFiles

    base = [sys.executable, "-m", "treelm.cli", "train"]
    if RunFiles(run).pointer.exists():
        return [*base, "--resume", str(run)]
    parse = f"{{treebank: {args.dev}, layers: all, rules: [{', '.join(RULES)}]}}"
    overrides = [*RECIPES[recipe][1], f"seed={seed}", "train.lr_schedule=constant",
                 "train.max_minutes=null", "train.eval_every_minutes=null",
                 f"train.max_units={args.budget}",
                 f"train.eval_every_units={args.eval_every_tokens}",
                 "train.epochs=1000000", f"train.eval_parse={parse}"]
    if args.threads:
        overrides.append(f"train.threads={args.threads}")
    if args.precision is not None:
        overrides.append(f"train.precision={args.precision}")
    overrides = merged([*overrides, *args.overrides])
    config = Path(args.config) if Path(args.config).exists() else ROOT / args.config
    return [*base, "--config", str(config), "--out", str(run), "--force", *overrides]


def merged(overrides: Sequence[str]) -> list[str]:
    """``key=value`` overrides, a later one replacing an earlier one of the same key (the
    command line refuses a key given twice): the user's replace the recipe's."""
    by_key = {o.split("=", 1)[0]: o for o in overrides}
    return list(by_key.values())


@contextmanager
def claimed(path: Path) -> Iterator[bool]:
    """Hold ``path``'s lock for the block if nobody holds it: yields whether it was taken."""
    from treelm.rundir.lock import RunLock, RunLockedError

    lock = RunLock(path)
    try:
        lock.acquire()
    except RunLockedError:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


@contextmanager
def record_lock(out: Path) -> Iterator[None]:
    """The record's own lock: read, merge and replace it as one step among workers."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_name(out.name + ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# ----------------------------------------------------------------------------- scoring
def run_entry(run: Path, recipe: str, seed: int) -> dict[str, Any]:
    """A finished run: its curve (tokens, perplexity, dev F1 per rule and layer) and the figures
    of the validation its checkpoint ``best`` holds (the lowest validation loss among those at
    epoch ends and the budget's end: the loop chooses among those alone)."""
    from treelm.rundir.files import read_metrics

    points = curve(run)
    done = read_metrics(run, "done")[-1]
    # the loop keeps as best only validations at epoch ends and at the budget's end
    kept = [p for p, v in zip(points, read_metrics(run, "valid"))
            if v.get("epoch_end") or v.get("budget_end")]
    best = min(kept, key=lambda p: (abs(p["ppl"] - done["best_valid_ppl"]), p["tokens"]))
    layers = sorted({int(k.split("/L")[1]) for p in points for k in p if "/L" in k})
    return {"recipe": recipe, "seed": seed, "run_dir": str(run), "tokens": done["tokens"],
            "minutes": round(done["elapsed"] / 60, 3), "precision": done.get("precision"),
            "best_valid_ppl": done.get("best_valid_ppl"), "best_tokens": best["tokens"],
            "dev": {rule: {str(k): best[f"{rule}/L{k}"] for k in layers} for rule in RULES},
            "curve": points, "machine": machine_info()}


def dev_baselines(dev: str, seeds: int) -> dict[str, Any]:
    from treelm.syntax.report import parsing_report

    rep = parsing_report(dev, None, baselines=BASELINES, seeds=range(seeds))
    return {"n_sentences": rep["n_sentences"], "n_words": rep["n_words"],
            "baselines": {b: r["sentence_f1"] for b, r in rep["baselines"].items()}}


def summarize(runs: dict[str, Any], baselines: dict[str, Any], recipes: Sequence[str],
              seeds: int) -> dict[str, Any]:
    """Per recipe, layer choice and F1 on dev; the ranking and the chosen recipe."""
    rb = baselines["baselines"]["right_branching"]
    table: dict[str, Any] = {}
    for recipe in recipes:
        mine = sorted((r for r in runs.values() if r["recipe"] == recipe),
                      key=lambda r: r["seed"])
        if not mine:
            continue
        entry: dict[str, Any] = {"what": RECIPES[recipe][0], "seeds": [r["seed"] for r in mine],
                                 "complete": len(mine) >= seeds,
                                 "valid_ppl": mean_std([r["best_valid_ppl"] for r in mine])}
        for rule in RULES:
            layers = sorted(mine[0]["dev"][rule], key=int)
            by_layer = {k: mean_std([r["dev"][rule][k] for r in mine]) for k in layers}
            best = max(layers, key=lambda k: (by_layer[k]["mean"], -int(k)))
            entry[rule] = {"layer": int(best), "dev": by_layer[best],
                           "dev_by_layer": {k: v["mean"] for k, v in by_layer.items()},
                           "margin_over_right_branching": by_layer[best]["mean"] - rb,
                           "seeds_above_right_branching": sum(
                               v > rb for v in by_layer[best]["runs"])}
        table[recipe] = entry
    ranking = sorted(table, key=lambda r: -table[r]["official"]["dev"]["mean"])
    complete = [r for r in ranking if table[r]["complete"]]
    return {"choice_rule": "the recipe with the best mean sentence F1 on the dev treebank under "
                           "the official rule (layer chosen per recipe, best validation "
                           "checkpoints) among the recipes with every seed done",
            "right_branching_dev": rb, "recipes": table, "ranking_official": ranking,
            "chosen": complete[0] if complete else None}


# ----------------------------------------------------------------------------- the record
def _write(out: Path, record: dict[str, Any]) -> None:
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    write_result("trees-screen", record, path=tmp, echo=False)
    os.replace(tmp, out)


def add_to_record(out: Path, screen: dict[str, Any], key: str | None,
                  entry: dict[str, Any] | None, args: argparse.Namespace) -> dict[str, Any]:
    """Under the record's lock: re-read it, add ``entry`` as ``key``, recompute, replace."""
    with record_lock(out):
        old: dict[str, Any] = {}
        if out.exists():
            old = json.loads(out.read_text(encoding="utf-8"))
            differ = [k for k in SCREEN_KEYS if old.get("screen", {}).get(k) != screen[k]]
            known = old.get("screen", {}).get("recipes", {})
            differ += [f"recipe {n}" for n, o in screen["recipes"].items()
                       if n in known and known[n] != o]
            if differ:
                raise ScreenError(f"{out} holds another screen (its {', '.join(differ)} "
                                  f"differ); give another --out or --runs")
            screen = {**screen, "recipes": {**known, **screen["recipes"]}}
        runs = dict(old.get("runs", {}))
        if key is not None and entry is not None:
            runs[key] = entry
        baselines = old.get("baselines") or dev_baselines(args.dev, args.baseline_seeds)
        commands = [*(c for c in old.get("commands", []) if c != args.command), args.command]
        record = {"screen": screen, "runs_dir": repo_path(args.runs),
                  "seeds": args.seeds, "baselines": baselines, "commands": commands,
                  "summary": summarize(runs, baselines, [r for r in RECIPES
                                                         if r in screen["recipes"]], args.seeds),
                  "runs": dict(sorted(runs.items()))}
        _write(out, record)
        return record


def main(args: argparse.Namespace) -> dict[str, Any]:
    if args.eval_every_tokens is None:      # (the flag is shared with the study: no default)
        args.eval_every_tokens = EVAL_EVERY_TOKENS
    if args.budget < 1 or args.eval_every_tokens < 1:
        raise ScreenError("--budget and --eval-every-tokens must be >= 1")
    if args.runs == Path("runs/trees"):          # trees.py's default: the study's runs
        args.runs = Path("runs/trees-screen")
    args.runs.mkdir(parents=True, exist_ok=True)
    screen = settings(args)
    out = args.out or find_record(args.runs, "trees-screen-*.json") or result_path(
        "trees-screen")
    record = add_to_record(out, screen, None, None, args)     # refuses another screen early
    for recipe, seed in plan(args.recipes, args.seeds):
        key, run = run_name(recipe, seed), args.runs / run_name(recipe, seed)
        if key in record["runs"]:
            continue
        with claimed(args.runs / f"{key}.claim") as mine:
            if not mine:
                print(f"{key}: another worker holds it", file=sys.stderr, flush=True)
                continue
            # another worker may have finished it between our read and our claim
            current = json.loads(out.read_text(encoding="utf-8"))
            if key in current["runs"]:
                record = current
                continue
            if not finished(run):
                if held(run):     # a training started elsewhere (by hand, another machine)
                    print(f"{key}: another process is training it", file=sys.stderr,
                          flush=True)
                    continue
                train_to_end(train_command(args, run, recipe, seed), run, run_command)
            record = add_to_record(out, screen, key, run_entry(run, recipe, seed), args)
            print(f"{key}: added to {out}", file=sys.stderr, flush=True)
    print(json.dumps(record["summary"], indent=2))
    return record


if __name__ == "__main__":
    print("run it as: python benchmarks/trees.py --screen ...", file=sys.stderr)
    sys.exit(2)
