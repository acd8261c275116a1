"""The tree result over seeds: ON-LSTM trees against right-branching and the rule control, with the
paper's master input gate and the symmetric one (issue 24).

    NLTK_DATA=../shared/data/nltk_data python benchmarks/trees.py [--minutes 600 | --tokens N] \
        [--seeds 3] [--gates paper symmetric] [--config configs/ptb-onlstm-cpu.yaml] \
        [--eval-every MIN | --eval-every-tokens N] [--runs runs/trees] [--out FILE.json] \
        [--precision P] [key=value ...]

Trains ``--config`` once per gate (``model.cell_options.master_input``) and seed (``seed=1..N``)
within a budget per run: ``--minutes`` of wall-clock time (``train.max_minutes``), or ``--tokens``
training tokens (``train.max_units``: the same point of training on any machine, however loaded),
or, with neither, the budget the config itself sets (one of the two keys, else refused). Each
flag replaces the config's other kind of budget (``--tokens`` sets ``train.max_minutes=null``,
``--minutes`` ``train.max_units=null``), as ``--eval-every`` (minutes) and
``--eval-every-tokens`` do for the validations, so that the study's budget is the one named.
Every run validates with ``train.eval_parse`` scoring every layer's trees under both tree rules
on ``--dev`` (``nltk-dev``) at every validation, so that each run's metrics hold the F1 against
the tokens seen. Checkpoints are chosen on the validation loss alone. For each finished run the
best checkpoint's layers are scored on ``--dev`` (all lengths) and ``--test`` (``nltk-test``, all
lengths and at most 10 words) under both rules, the exact reports ``treelm eval-parse RUN
--treebank T --style R [--max-len 10]`` prints (:func:`treelm.syntax.report.parsing_report`).

The summary, recomputed whenever a run is added: per gate and rule the layer with the best mean
sentence F1 over the seeds on ``--dev`` (the test set chooses nothing), its test F1 at all
lengths and at <= 10 words as mean ± sample std over seeds, the validation perplexity of the
same runs; the baselines on the same sentences (left-, right-branching, balanced, random trees and
the rule control, random levels through each rule: :mod:`treelm.syntax.baselines`); the best
configuration (gate with the best dev F1 under the official rule) against right-branching on
test; and, per run and layer, the tokens seen when its F1 on ``--dev`` first exceeded
right-branching there.

``--adopt DIR`` (repeatable) takes runs another study or the screen (``--screen``) has trained:
a gate and seed not finished under ``--runs`` is taken from a finished run under ``DIR`` whose
saved config, resolved as the trainer reads it (every default filled in), equals the one this
study would train for that gate and seed, save for ``train.threads`` and
``train.save_every_minutes``. Such a run is scored where it lies (nothing is copied) and its entry
in the record says ``adopted_from``; a run under ``DIR`` that differs is named on stderr with its
first differing key, and an unfinished one is never adopted.

Resumable, for a study of several days: a run directory per (gate, seed) under ``--runs``; a rerun
skips finished runs, continues a killed one with ``treelm train --resume`` and starts the rest.
Each run is added to the record (``benchmarks/results/trees-<YYYYMMDD>.json``, the date of the
study's first day: a rerun finds the record of its ``--runs`` there; or ``--out``) as soon as it
is scored. ``python benchmarks/report.py`` renders ``docs/syntax-results.md`` from the newest
record. Under a wall-clock budget run it alone on the machine (a token budget does not depend on
the load; its minutes still do). The record also holds, under
``in_progress``, the validation curves of the runs not yet finished as they were when it was
written; ``--no-train`` writes such a snapshot of a running study (and scores any run that has
finished) without training anything.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import trees_screen  # noqa: E402
from common import (  # noqa: E402
    command_line,
    find_record,
    machine_info,
    repo_path,
    result_path,
    write_result,
)
from tree_runs import (  # noqa: E402
    BASELINES,
    RULES,
    StudyError,
    curve,
    finished,
    mean_std,
    run_command,
    train_to_end,
)

GATES = ("paper", "symmetric")
#: Keys a study keeps across reruns: a rerun with other values would mix two studies.
#: (``tokens`` and ``eval_every_tokens`` came later: a record without them has None there.)
STUDY_KEYS = ("config", "minutes", "tokens", "dev", "test", "precision", "overrides",
              "eval_every", "eval_every_tokens")
#: Keys an adopted run may hold otherwise: they set how fast a run goes (threads; the order of a
#: product's partial sums, so its last bits) and how often it checkpoints, not what it trains on,
#: for how long or with what model, so its scores mean what this study's own run's would.
ADOPT_IGNORES = ("train.threads", "train.save_every_minutes")
EXAMPLE_WORDS = 12      # the drawn test sentence: the first whose length is nearest to this


# ----------------------------------------------------------------------------- arguments
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--screen", action="store_true",
                    help="the recipe screen instead of the study (benchmarks/trees_screen.py)")
    ap.add_argument("--minutes", type=float, help="wall-time budget per run (the study; "
                    "train.max_minutes; default: the config's budget)")
    ap.add_argument("--tokens", type=int, help="training tokens per run (the study; "
                    "train.max_units, and train.max_minutes=null)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds 1..N per gate (default 3)")
    ap.add_argument("--gates", nargs="+", choices=GATES, default=list(GATES),
                    help="master input gates (model.cell_options.master_input)")
    ap.add_argument("--config", default="configs/ptb-onlstm-cpu.yaml", help="YAML config")
    ap.add_argument("--runs", type=Path, default=Path("runs/trees"),
                    help="run directories, one per gate and seed (default runs/trees)")
    ap.add_argument("--out", type=Path, help="the record (default: this study's record in "
                    "benchmarks/results/, or trees-<today>.json)")
    ap.add_argument("--dev", default="nltk-dev",
                    help="treebank the layer is chosen on, scored during training (nltk-dev)")
    ap.add_argument("--test", default="nltk-test", help="treebank reported on (nltk-test)")
    ap.add_argument("--precision", help="train.precision=P for every run (only when given)")
    ap.add_argument("--eval-every", type=float,
                    help="validate every this many minutes: train.eval_every_minutes (and "
                         "train.eval_every_units=null; default: the config's)")
    ap.add_argument("--baseline-seeds", type=int, default=5,
                    help="seeds of random trees and of the rule control (default 5)")
    ap.add_argument("--threads", type=int, help="torch threads for the scoring, and the "
                    "screen's train.threads (default: torch's, the config's)")
    ap.add_argument("--no-train", action="store_true",
                    help="train nothing: score the finished runs not yet in the record and write "
                         "the curves of the runs still training (a snapshot of a running study)")
    ap.add_argument("--adopt", type=Path, action="append", default=[], metavar="DIR",
                    help="take a gate and seed not finished under --runs from a finished run "
                         "in DIR with the same resolved config (e.g. runs/trees-screen); "
                         "repeatable")
    ap.add_argument("overrides", nargs="*", metavar="key=value",
                    help="config overrides for every run (e.g. data.file=... for a tiny run)")
    trees_screen.add_arguments(ap)
    args = ap.parse_args(argv)
    if args.screen:
        if args.tokens is not None or args.minutes is not None:
            raise StudyError("--minutes and --tokens are the study's budgets; the screen's is "
                             "--budget (tokens)")
        if args.adopt:
            raise StudyError("--adopt is an option of the study, not of --screen")
    else:
        check_budget_flags(args)
    if args.seeds < 1 or args.baseline_seeds < 1:
        raise StudyError("--seeds and --baseline-seeds must be >= 1")
    args.command = command_line() if argv is None else shlex.join(
        ["python", "benchmarks/trees.py", *argv])
    return args


def check_budget_flags(args: argparse.Namespace) -> None:
    """One kind of budget and one kind of validation period at most, each > 0."""
    if args.minutes is not None and args.tokens is not None:
        raise StudyError("give --minutes (wall-clock) or --tokens (training tokens), not both")
    if args.eval_every is not None and args.eval_every_tokens is not None:
        raise StudyError("give --eval-every (minutes) or --eval-every-tokens, not both")
    for flag, value in (("--minutes", args.minutes), ("--tokens", args.tokens),
                        ("--eval-every", args.eval_every),
                        ("--eval-every-tokens", args.eval_every_tokens)):
        if value is not None and value <= 0:
            raise StudyError(f"{flag} must be > 0, got {value:g}")


def study_settings(args: argparse.Namespace) -> dict[str, Any]:
    return {"config": args.config, "minutes": args.minutes, "tokens": args.tokens,
            "dev": args.dev, "test": args.test, "precision": args.precision,
            "overrides": list(args.overrides), "eval_every": args.eval_every,
            "eval_every_tokens": args.eval_every_tokens}


def budget_of(args: argparse.Namespace) -> dict[str, Any]:
    """The budget and validation period the study's runs train with, as resolved from the config
    and the flags (the first gate's seed 1; every run has the same): refused when the config
    sets no budget and no flag gives one, before anything is trained."""
    from treelm.train.builders import read_config

    tc, _ = read_config(study_config(args, args.gates[0], 1))
    if tc.max_units is None and tc.max_minutes is None:
        raise StudyError(f"{args.config} sets no budget (neither train.max_units nor "
                         f"train.max_minutes): give --tokens or --minutes")
    return {"max_units": tc.max_units, "max_minutes": tc.max_minutes,
            "eval_every_units": tc.eval_every_units,
            "eval_every_minutes": tc.eval_every_minutes}


# ----------------------------------------------------------------------------- the record
def load_record(path: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """The record at ``path`` if it exists, refused when it holds another study."""
    if not path.exists():
        return {}
    old = json.loads(path.read_text(encoding="utf-8"))
    study = old.get("study", {})
    # a key the record lacks (it predates the key) reads as None: the flag was not given
    differ = [f"{k}={study.get(k)!r}" for k in STUDY_KEYS if study.get(k) != settings[k]]
    if differ:
        raise StudyError(f"{path} holds another study ({', '.join(differ)}); give another --out "
                         f"or --runs")
    return old


# ----------------------------------------------------------------------------- training
def train_command(args: argparse.Namespace, run: Path, gate: str, seed: int) -> list[str]:
    """``treelm train`` for a new run, or ``--resume`` for a killed one."""
    from treelm.rundir.files import RunFiles

    base = [sys.executable, "-m", "treelm.cli", "train"]
    if RunFiles(run).pointer.exists():
        return [*base, "--resume", str(run)]
    return [*base, "--config", str(config_path(args)), "--out", str(run), "--force",
            *study_overrides(args, gate, seed)]


def config_path(args: argparse.Namespace) -> Path:
    """``--config`` as given, or under the repository when it is not there."""
    return Path(args.config) if Path(args.config).exists() else ROOT / args.config


def study_overrides(args: argparse.Namespace, gate: str, seed: int) -> list[str]:
    """The overrides on ``--config`` of the run of ``gate`` and ``seed``."""
    parse = f"{{treebank: {args.dev}, layers: all, rules: [{', '.join(RULES)}]}}"
    overrides = [f"seed={seed}", f"model.cell_options.master_input={gate}"]
    # each flag names the study's budget and validation period, so the config's other kind goes
    if args.minutes is not None:
        overrides += [f"train.max_minutes={args.minutes}", "train.max_units=null"]
    if args.tokens is not None:
        overrides += [f"train.max_units={args.tokens}", "train.max_minutes=null"]
    overrides += ["train.epochs=1000000", f"train.eval_parse={parse}"]
    if args.eval_every is not None:
        overrides += [f"train.eval_every_minutes={args.eval_every}",
                      "train.eval_every_units=null"]
    if args.eval_every_tokens is not None:
        overrides += [f"train.eval_every_units={args.eval_every_tokens}",
                      "train.eval_every_minutes=null"]
    if args.precision is not None:
        overrides.append(f"train.precision={args.precision}")
    return trees_screen.merged([*overrides, *args.overrides])  # the user's replace the study's


def study_config(args: argparse.Namespace, gate: str, seed: int) -> dict[str, Any]:
    """The config the study trains for ``gate`` and ``seed``, as ``treelm train`` builds it from
    ``--config`` and the overrides (before its data paths are made absolute)."""
    from treelm.config import apply_overrides, load_config

    return apply_overrides(load_config(config_path(args)), study_overrides(args, gate, seed))


# ----------------------------------------------------------------------------- adoption
def resolved(cfg: dict[str, Any], new: bool = True) -> dict[str, Any]:
    """``cfg`` as the trainer reads it (:func:`treelm.train.builders.read_config`: every value
    checked, the loop's and the task's defaults filled in, a new config's data paths made
    absolute), flattened to dotted keys, without :data:`ADOPT_IGNORES`."""
    from treelm.train.builders import read_config

    tc, rc = read_config(cfg, new=new)
    flat: dict[str, Any] = {"seed": rc.seed, "task": rc.task.name}
    for section, values in (("data", rc.data), ("train", tc), ("train", rc.options),
                            ("model", rc.model)):
        _flatten(section, dataclasses.asdict(values) if dataclasses.is_dataclass(values)
                 else values, flat)
    return {k: v for k, v in flat.items() if k not in ADOPT_IGNORES}


def _flatten(prefix: str, value: Any, into: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}", v, into)
    else:
        into[prefix] = value


def first_difference(mine: dict[str, Any], theirs: dict[str, Any]) -> str | None:
    """The first key (in ``mine``'s order, then ``theirs``') whose values differ, or None."""
    absent = object()
    return next((k for k in [*mine, *(k for k in theirs if k not in mine)]
                 if mine.get(k, absent) != theirs.get(k, absent)), None)


def _said(cfg: dict[str, Any], key: str) -> str:
    return repr(cfg[key]) if key in cfg else "absent"


def adoptable(args: argparse.Namespace, needed: Sequence[tuple[str, int]],
              seeds: Sequence[int], quiet: bool = False) -> dict[str, Path]:
    """``gate/seed`` -> the finished run under an ``--adopt`` directory whose resolved config is
    the one this study trains for that gate and seed, for the ``needed`` ones (the first such
    run, in the order of ``--adopt`` and of names). Unless ``quiet``, every other run there is
    named on stderr: unfinished, unreadable, or its first key that differs from the nearest of
    the study's configs."""
    from treelm.config import load_config
    from treelm.errors import TreelmError
    from treelm.rundir.files import RunFiles
    from treelm.tasks import saved_config

    wanted = {(g, s): resolved(study_config(args, g, s)) for g in args.gates for s in seeds}
    found: dict[str, Path] = {}

    def say(run: Path, why: str) -> None:
        if not quiet:
            print(f"--adopt: {run}: not adopted: {why}", file=sys.stderr, flush=True)

    for folder in args.adopt:
        if not folder.is_dir():
            raise StudyError(f"--adopt {folder}: no such directory")
        for run in sorted(p for p in folder.iterdir() if RunFiles(p).config.is_file()):
            try:
                theirs = resolved(saved_config(load_config(RunFiles(run).config)), new=False)
            except TreelmError as e:
                say(run, f"its config does not read ({e})")
                continue
            diffs = {gs: first_difference(mine, theirs) for gs, mine in wanted.items()}
            same = [gs for gs, d in diffs.items() if d is None]
            if not same:
                # the nearest of the study's configs: the fewest keys apart
                near = min(wanted, key=lambda gs: sum(
                    wanted[gs].get(k) != theirs.get(k) for k in {*wanted[gs], *theirs}))
                key = diffs[near]
                assert key is not None
                say(run, f"{key} is {_said(theirs, key)} there, {_said(wanted[near], key)} for "
                         f"the {near[0]} gate, seed {near[1]}")
                continue
            gate, seed = same[0]
            if (gate, seed) not in needed or f"{gate}/{seed}" in found:
                continue            # this study has that run already
            if not finished(run):
                say(run, f"it has the config of the {gate} gate, seed {seed}, but has not "
                         f"finished")
                continue
            found[f"{gate}/{seed}"] = run
    return found


def train(args: argparse.Namespace, run: Path, gate: str, seed: int) -> None:
    train_to_end(train_command(args, run, gate, seed), run, run_command)


# ----------------------------------------------------------------------------- scoring
def _f1s(report: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {k: {"sentence_f1": v["sentence_f1"], "corpus_f1": v["corpus_f1"]}
            for k, v in report["layers"].items()}


def score_baselines(args: argparse.Namespace) -> dict[str, Any]:
    """The baselines on the dev sentences (all lengths) and on test (all, <= 10 words)."""
    from treelm.syntax.report import parsing_report

    out = {}
    for name, treebank, max_len in (("dev", args.dev, None), ("test", args.test, None),
                                    ("test_10", args.test, 10)):
        rep = parsing_report(treebank, max_len, baselines=BASELINES,
                             seeds=range(args.baseline_seeds))
        out[name] = {"n_sentences": rep["n_sentences"], "n_words": rep["n_words"],
                     "baselines": {b: {"sentence_f1": r["sentence_f1"],
                                       "corpus_f1": r["corpus_f1"]}
                                   for b, r in rep["baselines"].items()}}
    return out


def example_sentence(treebank: str) -> dict[str, Any]:
    """The drawn test sentence: the first whose length is nearest to :data:`EXAMPLE_WORDS`."""
    from treelm.syntax.report import load_golds

    golds = load_golds(treebank)
    i = min(range(len(golds)), key=lambda j: (abs(len(golds[j].words) - EXAMPLE_WORDS), j))
    return {"choice": f"the first sentence of {treebank} whose length is nearest to "
                      f"{EXAMPLE_WORDS} words", "source": golds[i].source,
            "words": golds[i].words, "gold": golds[i].tree}


def score_run(args: argparse.Namespace, run: Path, gate: str, seed: int,
              example: dict[str, Any]) -> dict[str, Any]:
    """A finished run: its best checkpoint scored on dev and test under both rules, its
    validation curve, and its trees of the example sentence."""
    from treelm.run import load_run
    from treelm.rundir.files import read_metrics
    from treelm.syntax.levels import sentence_levels
    from treelm.syntax.report import parsing_report

    r = load_run(run, "best", expect="lm")
    done = read_metrics(run, "done")[-1]
    scores: dict[str, Any] = {}
    for rule in RULES:
        for name, treebank, max_len in (("dev", args.dev, None), ("test", args.test, None),
                                        ("test_10", args.test, 10)):
            rep = parsing_report(treebank, max_len, run=r, style=rule, baselines=())
            scores.setdefault(rule, {})[name] = _f1s(rep)
            scores[rule]["oov_" + name] = rep["oov_words"] / max(rep["n_words"], 1)
    (lv,) = sentence_levels(r.model, r.vocab, [example["words"]])
    trees = {rule: {str(k): lv.tree(k, rule) for k in lv.layers} for rule in RULES}
    return {"gate": gate, "seed": seed, "run_dir": str(run), "checkpoint": "best",
            "tokens": done["tokens"], "minutes": round(done["elapsed"] / 60, 3),
            "epochs": done.get("epochs"), "precision": done.get("precision"),
            "best_valid_ppl": done.get("best_valid_ppl"),
            "best_valid_loss": done.get("best_valid_loss"), "scores": scores,
            "curve": curve(run), "example_trees": trees, "machine": machine_info()}


def progress_entry(run: Path, gate: str, seed: int) -> dict[str, Any] | None:
    """A run still training (or killed): its validations so far, None before the first."""
    from treelm.rundir.files import RunFiles

    if not RunFiles(run).metrics.exists():
        return None
    points = curve(run)
    if not points:
        return None
    return {"gate": gate, "seed": seed, "run_dir": str(run), "tokens": points[-1]["tokens"],
            "minutes": points[-1]["minutes"], "curve": points}


# ----------------------------------------------------------------------------- summary
def _rb(baselines: dict[str, Any], part: str) -> float:
    return baselines[part]["baselines"]["right_branching"]["sentence_f1"]


def summarize(runs: dict[str, Any], baselines: dict[str, Any]) -> dict[str, Any]:
    """Layer choice on dev, test figures over seeds, the best configuration, the crossings."""
    configs: dict[str, Any] = {}
    for gate in GATES:
        mine = sorted((r for r in runs.values() if r["gate"] == gate), key=lambda r: r["seed"])
        if not mine:
            continue
        layers = sorted(mine[0]["scores"][RULES[0]]["dev"], key=int)
        entry: dict[str, Any] = {"seeds": [r["seed"] for r in mine],
                                 "valid_ppl": mean_std([r["best_valid_ppl"] for r in mine]),
                                 "tokens": mean_std([r["tokens"] for r in mine]), "rules": {}}
        for rule in RULES:
            dev = {k: mean_std([r["scores"][rule]["dev"][k]["sentence_f1"] for r in mine])
                   for k in layers}
            best = max(layers, key=lambda k: (dev[k]["mean"], -int(k)))
            entry["rules"][rule] = {
                "layer": int(best), "dev_by_layer": {k: v["mean"] for k, v in dev.items()},
                "dev": dev[best],
                **{part: mean_std([r["scores"][rule][part][best]["sentence_f1"] for r in mine])
                   for part in ("test", "test_10")},
                **{f"{part}_corpus": mean_std([r["scores"][rule][part][best]["corpus_f1"]
                                               for r in mine]) for part in ("test", "test_10")}}
        configs[gate] = entry
    summary: dict[str, Any] = {
        "layer_choice": "per gate and rule, the layer with the best mean sentence F1 over the "
                        "seeds on the dev treebank (best checkpoints, all lengths)",
        "configs": configs}
    if configs:
        gate = max(configs, key=lambda g: configs[g]["rules"]["official"]["dev"]["mean"])
        best = configs[gate]["rules"]["official"]
        rb = _rb(baselines, "test")
        summary["best"] = {"gate": gate, "rule": "official", "layer": best["layer"],
                           "test": best["test"], "right_branching_test": rb,
                           "beats_right_branching": best["test"]["mean"] > rb,
                           "margin": best["test"]["mean"] - rb}
    rb_dev = _rb(baselines, "dev")
    summary["crossings"] = {
        f"{r['gate']}/{r['seed']}": {key: next((p["tokens"] for p in r["curve"]
                                                 if p.get(key, 0.0) > rb_dev), None)
                                      for key in sorted({k for p in r["curve"] for k in p
                                                         if "/L" in k})}
        for r in sorted(runs.values(), key=lambda r: (r["gate"], r["seed"]))}
    return summary


# ----------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    import torch

    if args.screen:
        return trees_screen.main(args)

    torch.set_flush_denormal(True)      # as the CLI does: trained gates produce denormals
    if args.threads:
        torch.set_num_threads(args.threads)
    settings = study_settings(args)
    budget = budget_of(args)        # (refuses a study without a budget before anything runs)
    out = args.out or find_record(args.runs, "trees-[0-9]*.json") or result_path("trees")
    record = load_record(out, settings)
    runs: dict[str, Any] = dict(record.get("runs", {}))
    baselines = record.get("baselines") or score_baselines(args)
    example = record.get("example") or example_sentence(args.test)
    data = {"study": {**settings, "budget": budget}, "runs_dir": repo_path(args.runs),
            "gates": args.gates,
            "seeds": list(range(1, args.seeds + 1)), "rules": list(RULES),
            "baselines": baselines, "example": example, "command": args.command,
            "commands": [*(c for c in record.get("commands", []) if c != args.command),
                         args.command]}

    def write() -> dict[str, Any]:
        running = {f"{g}/{s}": e for g in args.gates for s in range(1, args.seeds + 1)
                   if f"{g}/{s}" not in runs
                   and (e := progress_entry(args.runs / f"{g}-seed{s}", g, s)) is not None}
        rec = {**data, "runs": runs, "in_progress": running,
               "summary": summarize(runs, baselines)}
        return write_result("trees", rec, path=out, echo=False)

    rec = write()
    seeds = range(1, args.seeds + 1)
    needed = [(g, s) for g in args.gates for s in seeds
              if f"{g}/{s}" not in runs and not finished(args.runs / f"{g}-seed{s}")]
    adopted = adoptable(args, needed, seeds) if args.adopt and needed else {}
    for gate in args.gates:
        for seed in seeds:
            key, run = f"{gate}/{seed}", args.runs / f"{gate}-seed{seed}"
            if key in runs:
                continue
            if (key not in adopted and not finished(run) and args.adopt
                    and not args.no_train):
                # the screen may have finished it while this study trained others: look again
                adopted.update(adoptable(args, [(gate, seed)], seeds, quiet=True))
            if key in adopted:
                # scored where it lies: its minutes are its own machine's and load's, which
                # the page says
                runs[key] = {**score_run(args, adopted[key], gate, seed, example),
                             "adopted_from": repo_path(adopted[key]),
                             "adopted_threads": _threads(adopted[key])}
                rec = write()
                print(f"{key}: adopted from {adopted[key]}, added to {out}", file=sys.stderr,
                      flush=True)
                continue
            if not finished(run):
                if args.no_train:
                    continue
                train(args, run, gate, seed)
            runs[key] = score_run(args, run, gate, seed, example)
            rec = write()
            print(f"{key}: added to {out}", file=sys.stderr, flush=True)
    print(json.dumps(rec["summary"], indent=2))
    return rec


def _threads(run: Path) -> int | None:
    """The ``train.threads`` an adopted run trained with (None: torch's default)."""
    from treelm.config import load_config
    from treelm.rundir.files import RunFiles

    return (load_config(RunFiles(run).config).get("train") or {}).get("threads")


def cli() -> int:
    from treelm.errors import TreelmError

    try:
        main()
    except (StudyError, trees_screen.ScreenError, TreelmError) as e:
        print(f"trees.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(cli())
