"""One ON-LSTM run trained on to 20M tokens with its trees scored throughout (issue 37, item 3):
how far do the trees rise as perplexity falls, and where do they level off? Also the page
``docs/trees-long.md``.

    NLTK_DATA=../shared/data/nltk_data python benchmarks/trees_long.py \\
        --from runs/trees-screen/paper-seed1 [--tokens 20000000] [--eval-every-tokens N] \\
        [--runs runs/trees-long/paper-seed1] [--threads 1] [--no-train]
    NLTK_DATA=... python benchmarks/trees_long.py --config configs/ptb-onlstm-cpu.yaml \\
        --seed 1 [--recipe paper] [--tokens ...] [key=value ...]       # a run from scratch
    python benchmarks/trees_long.py --page    # the page from the newest trees-long record

**Why a copy.** The screen (``benchmarks/trees.py --screen``) trains at a constant rate with
NT-ASGD, validating on token multiples: continuing a finished 2M-token run of it to 20M tokens
(``treelm train --resume RUN train.max_units=20000000``: the loop state, the data position,
the optimiser, NT-ASGD's averager and every RNG state come back whole) is the same training as
a 20M-token run from the start, bit for bit (``tests/test_train_extend.py``), and saves the
first 2M tokens. ``--from`` copies the finished run once to ``--runs`` (through a temporary
folder renamed into place, so a killed copy leaves nothing half made; a ``--runs`` that exists
and is not a copy of it is refused) and continues the copy; the screen's run is only read. The
one difference from a run trained to 20M from the start: the copy's checkpoint ``best`` may be
the screen run's final validation, which a straight run would not have weighed (the loop
weighs validations at epoch ends and at the budget's end only).

**Resumable.** Training is a child ``treelm train`` that dies with this process (SIGTERM: it
saves and stops, :mod:`tree_runs`); rerunning the same command continues a killed run, and a
run another process is training is left alone. ``--no-train`` writes a snapshot of the run as
it is (the partial curve can be committed).

**The record** (``benchmarks/results/trees-long-<YYYYMMDD>.json``, the date of its first day:
a rerun finds the record of its ``--runs``): the curve (per validation: tokens, minutes,
validation perplexity, the sentence F1 of every layer under both tree rules on the dev treebank
as ``train.eval_parse`` logged it, always with NT-ASGD's averaged weights once it averages),
where NT-ASGD began averaging (its ``asgd_start`` event), the baselines on the same dev
sentences, the summary (:func:`summarize`) and, once the run is finished, its checkpoints
``best`` (lowest validation loss) and ``last`` (the final validation's weights, averaged where
NT-ASGD averaged) scored on the dev and test treebanks under both rules, with right-branching on
test beside them.

**The page** (:func:`render`) copies the record: the F1 curves (official solid, split dashed)
against tokens with perplexity on a second axis, right-branching across and a line where
averaging began; F1 at 2M tokens, its peak and where it came, and whether it levelled off: the
mean F1 of the last 5M tokens' validations against the mean of the 5M before (within
:data:`LEVEL_TOLERANCE` of each other: levelled off).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import trees_screen  # noqa: E402
from common import (  # noqa: E402
    RESULTS,
    command_line,
    find_record,
    from_repo,
    newest_record,
    repo_path,
    result_path,
    write_page,
    write_result,
)
from tree_runs import (  # noqa: E402
    RULES,
    StudyError,
    curve,
    held,
    last_done,
    run_command,
    train_to_end,
)

SCRIPT = "trees-long"
DOC = ROOT / "docs" / "trees-long.md"
IMAGE = "trees-long-f1.png"
TOKENS = 20_000_000
EVAL_EVERY = 400_000            # a fresh run's validation period (the screen's)
AT_TOKENS = 2_000_000           # the screen's budget: the F1 the long run is compared with
WINDOW = 5_000_000              # levelled off: the last WINDOW tokens against the WINDOW before
LEVEL_TOLERANCE = 0.01          # ... their mean F1 within one point of each other
#: Settings a record keeps across reruns: other values would mix two long runs.
LONG_KEYS = ("source", "config", "recipe", "seed", "tokens", "eval_every", "dev", "overrides")
LAUNCH = ("NLTK_DATA=../shared/data/nltk_data python benchmarks/trees_long.py "
          "--from runs/trees-screen/paper-seed1 --tokens 20000000 --threads 1")


# ----------------------------------------------------------------------------- arguments
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="source", type=Path, metavar="RUN",
                    help="a finished run to copy and continue (e.g. "
                         "runs/trees-screen/paper-seed1)")
    ap.add_argument("--config", help="train afresh from this config instead (with --seed, "
                    "--recipe)")
    ap.add_argument("--seed", type=int, default=1, help="a fresh run's seed (default 1)")
    ap.add_argument("--recipe", choices=list(trees_screen.RECIPES), default="paper",
                    help="a fresh run's recipe of the screen (default paper)")
    ap.add_argument("--tokens", type=int, default=TOKENS,
                    help=f"training tokens in all (default {TOKENS:,})")
    ap.add_argument("--eval-every-tokens", type=int, help="validate (and score trees) every "
                    f"this many tokens (default: the run's; a fresh run {EVAL_EVERY:,})")
    ap.add_argument("--runs", type=Path, help="the long run's directory (default "
                    "runs/trees-long/<the source's name>, or <recipe>-seed<N>)")
    ap.add_argument("--threads", type=int, help="train.threads for the training (default: the "
                    "run's) and torch threads for the scoring")
    ap.add_argument("--dev", help="dev treebank (default: the run's train.eval_parse treebank; "
                    "a fresh run nltk-dev)")
    ap.add_argument("--test", default="nltk-test", help="treebank the finished run's "
                    "checkpoints are reported on (nltk-test)")
    ap.add_argument("--baseline-seeds", type=int, default=5,
                    help="seeds of the random baselines (default 5)")
    ap.add_argument("--out", type=Path, help="the record (default: this run's record in "
                    "benchmarks/results/, or trees-long-<today>.json)")
    ap.add_argument("--no-train", action="store_true", help="train nothing: write a snapshot "
                    "of the run as it is (scored if it has finished)")
    ap.add_argument("--page", action="store_true", help="only render docs/trees-long.md from "
                    "the newest record")
    ap.add_argument("overrides", nargs="*", metavar="key=value",
                    help="config overrides of a fresh run (a copied run keeps its config)")
    args = ap.parse_args(argv)
    args.command = command_line() if argv is None else shlex.join(
        ["python", "benchmarks/trees_long.py", *argv])
    if args.page:
        return args
    if (args.source is None) == (args.config is None):
        raise StudyError("give --from RUN (a finished run to continue) or --config CONFIG "
                         "(a fresh run), one of them")
    if args.source is not None and args.overrides:
        raise StudyError("key=value overrides apply to a fresh run (--config); a run continued "
                         "with --from keeps its config")
    for name in ("tokens", "eval_every_tokens", "threads", "baseline_seeds", "seed"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise StudyError(f"--{name.replace('_', '-')} must be >= 1")
    return args


def _config(run: Path) -> dict[str, Any]:
    import yaml

    from treelm.rundir.files import RunFiles

    return yaml.safe_load(RunFiles(run).config.read_text(encoding="utf-8")) or {}


def resolve(args: argparse.Namespace) -> dict[str, Any]:
    """The long run's settings: a fresh run's from the arguments, a continued run's defaults
    from its config (the copy's once it exists: the source is needed only to copy it)."""
    if args.source is None:
        name = f"{args.recipe}-seed{args.seed}"
        dev = args.dev or "nltk-dev"
        every = args.eval_every_tokens or EVAL_EVERY
        run = args.runs or Path("runs/trees-long") / name
    else:
        run = args.runs or Path("runs/trees-long") / args.source.name
        if run.exists() and args.source.exists() and not is_copy(args.source, run):
            raise StudyError(f"{run} exists and is not a copy of {args.source}; give another "
                             f"--runs")
        src = run if (run / "config.yaml").exists() else args.source
        if not (src / "config.yaml").exists():
            raise StudyError(f"{src}: not a run directory")
        train = _config(src).get("train", {})
        if not train.get("eval_parse"):
            raise StudyError(f"{src}: logs no tree F1 (its config has no train.eval_parse)")
        if train.get("lr_schedule", "constant") in ("linear_time", "linear_units"):
            raise StudyError(f"{src}: its rate follows its budget (train.lr_schedule = "
                             f"{train['lr_schedule']}): continued, it is not the longer run")
        dev = args.dev or train["eval_parse"].get("treebank", "nltk-dev")
        every = args.eval_every_tokens or train.get("eval_every_units")
        if not every:
            raise StudyError(f"{src}: validates on no token multiple (no "
                             f"train.eval_every_units): give --eval-every-tokens")
    return {"source": None if args.source is None else repo_path(args.source),
            "config": args.config, "recipe": None if args.source else args.recipe,
            "seed": None if args.source else args.seed, "tokens": args.tokens,
            "eval_every": every, "dev": dev, "test": args.test,
            "overrides": list(args.overrides), "run_dir": str(run)}


# ----------------------------------------------------------------------------- the run
def reached(run: Path, tokens: int) -> bool:
    """Whether ``run`` finished at ``tokens`` or beyond (a fresh copy ends where its source
    ended: finished, but short of the long budget)."""
    done = last_done(run)
    return done is not None and done["tokens"] >= tokens


def _metrics_text(run: Path) -> str:
    from treelm.rundir.files import RunFiles

    path = RunFiles(run).metrics
    return path.read_text(encoding="utf-8") if path.exists() else ""


def is_copy(src: Path, run: Path) -> bool:
    """Whether ``run`` is a copy of the finished ``src``, continued or not: the same config and
    a metrics log that begins with the source's (without its ``done`` line, which a resume cuts
    off as logged after the last checkpoint)."""
    from treelm.rundir.files import RunFiles

    mine, theirs = RunFiles(run).config, RunFiles(src).config
    if not (mine.exists() and mine.read_bytes() == theirs.read_bytes()):
        return False
    lines = _metrics_text(src).splitlines(keepends=True)
    while lines and json.loads(lines[-1]).get("event") == "done":
        lines.pop()
    return bool(lines) and _metrics_text(run).startswith("".join(lines))


def copy_run(src: Path, run: Path, tokens: int) -> bool:
    """Copy ``src`` to ``run`` unless ``run`` is a copy of it already; True when copied. A
    ``run`` that holds anything else is refused, and so is a source that is not finished (or
    is training now), or has seen ``tokens`` already."""
    from treelm.rundir.files import LOCK

    if run.exists():
        if not is_copy(src, run):
            raise StudyError(f"{run} exists and is not a copy of {src}; give another --runs")
        return False
    if held(src):
        raise StudyError(f"{src}: another process is training it; continue it once it has "
                         f"finished")
    done = last_done(src)
    if done is None:
        raise StudyError(f"{src}: not finished (no 'done' event): train it to its end first, "
                         f"or start afresh with --config")
    if done["tokens"] >= tokens:
        raise StudyError(f"{src}: has seen {done['tokens']:,} tokens already; --tokens must "
                         f"be more")
    tmp = run.with_name(f".{run.name}.copying")      # ours by its name: a killed copy's rest
    shutil.rmtree(tmp, ignore_errors=True)
    run.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, tmp, ignore=shutil.ignore_patterns(LOCK))
    os.replace(tmp, run)
    print(f"copied {src} to {run}", file=sys.stderr, flush=True)
    return True


def train_command(settings: dict[str, Any], run: Path, threads: int | None) -> list[str]:
    """``treelm train --resume`` with the long budget for a run that exists (a copy, or a
    killed fresh run), else a fresh ``treelm train`` with the screen recipe's keys."""
    from treelm.rundir.files import RunFiles

    base = [sys.executable, "-m", "treelm.cli", "train"]
    budget = [f"train.max_units={settings['tokens']}",
              f"train.eval_every_units={settings['eval_every']}", "train.max_minutes=null"]
    if threads:
        budget.append(f"train.threads={threads}")
    if RunFiles(run).pointer.exists():
        return [*base, "--resume", str(run), *budget]
    parse = f"{{treebank: {settings['dev']}, layers: all, rules: [{', '.join(RULES)}]}}"
    overrides = trees_screen.merged([
        *trees_screen.RECIPES[settings["recipe"]][1], f"seed={settings['seed']}",
        "train.lr_schedule=constant", "train.eval_every_minutes=null", "train.epochs=1000000",
        f"train.eval_parse={parse}", *budget, *settings["overrides"]])
    config = Path(settings["config"])
    config = config if config.exists() else ROOT / config
    return [*base, "--config", str(config), "--out", str(run), "--force", *overrides]


def _check_fresh(settings: dict[str, Any], run: Path) -> None:
    """A fresh run's directory holds this long run or nothing (a rerun resumes it)."""
    from treelm.rundir.files import RunFiles

    if not RunFiles(run).pointer.exists():
        return
    cfg = _config(run)
    if cfg.get("seed") != settings["seed"] or cfg.get("train", {}).get(
            "max_units") != settings["tokens"]:
        raise StudyError(f"{run} holds another run (seed {cfg.get('seed')}, "
                         f"train.max_units {cfg.get('train', {}).get('max_units')}); give "
                         f"another --runs")


# ----------------------------------------------------------------------------- scoring
def asgd_start(run: Path) -> dict[str, Any] | None:
    """Where NT-ASGD began averaging (its ``asgd_start`` event), or None."""
    from treelm.rundir.files import read_metrics

    ev = read_metrics(run, "asgd_start")
    return None if not ev else {"tokens": ev[0]["tokens"], "epoch": ev[0]["epoch"],
                                "step": ev[0]["step"],
                                "minutes": round(ev[0]["elapsed"] / 60, 3)}


def source_tokens(run: Path) -> int | None:
    """Where the copied run ended: the first validation at a budget's end (the source's)."""
    from treelm.rundir.files import read_metrics

    return next((v["tokens"] for v in read_metrics(run, "valid") if v.get("budget_end")), None)


def _checkpoint_point(run: Path, which: str) -> dict[str, Any]:
    """Tokens and validation figures of the validation checkpoint ``which`` was saved after:
    ``last`` the final one, ``best`` the lowest loss among those the loop weighs (epoch ends and
    the budget's end)."""
    from treelm.rundir.files import read_metrics

    valids = read_metrics(run, "valid")
    if which == "last":
        v = valids[-1]
    else:
        best = last_done(run)["best_valid_loss"]   # type: ignore[index]
        kept = [v for v in valids if v.get("epoch_end") or v.get("budget_end")]
        v = min(kept, key=lambda v: (abs(v["loss"] - best), v["tokens"]))
    return {"tokens": v["tokens"], "valid_ppl": v.get("ppl"), "valid_loss": v["loss"]}


def score_checkpoint(run: Path, which: str, dev: str, test: str) -> dict[str, Any]:
    """Checkpoint ``which`` with the weights its validation scored (NT-ASGD's average where it
    averaged) on dev, test and test at <= 10 words under both rules."""
    from treelm.run import load_run
    from treelm.rundir.checkpoint import read_pointer
    from treelm.rundir.files import AVERAGED
    from treelm.syntax.report import parsing_report

    r = load_run(run, which, expect="lm", averaged=True)
    scores: dict[str, Any] = {}
    for rule in RULES:
        for part, treebank, max_len in (("dev", dev, None), ("test", test, None),
                                        ("test_10", test, 10)):
            rep = parsing_report(treebank, max_len, run=r, checkpoint=which, style=rule,
                                 baselines=())
            scores.setdefault(rule, {})[part] = {
                k: {"sentence_f1": v["sentence_f1"], "corpus_f1": v["corpus_f1"]}
                for k, v in rep["layers"].items()}
    averaged = (run / read_pointer(run)[which] / AVERAGED).exists()
    return {**_checkpoint_point(run, which), "averaged": averaged, "scores": scores}


def baselines_on_test(test: str, seeds: int) -> dict[str, Any]:
    """The baselines' sentence F1 on the test treebank, all lengths and <= 10 words."""
    from treelm.syntax.report import parsing_report

    out = {}
    for part, max_len in (("test", None), ("test_10", 10)):
        rep = parsing_report(test, max_len, baselines=("right_branching", "left_branching",
                                                       "balanced"), seeds=range(seeds))
        out[part] = {"n_sentences": rep["n_sentences"],
                     "baselines": {b: r["sentence_f1"] for b, r in rep["baselines"].items()}}
    return out


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def series_summary(points: Sequence[tuple[int, float]], higher: bool = True,
                   at: int = AT_TOKENS, window: int = WINDOW) -> dict[str, Any]:
    """One series (tokens, value) of a curve: its value at the first validation at or past
    ``at``, its best (highest F1, or lowest perplexity with ``higher`` false) and where, its
    last, the mean over the last ``window`` tokens' validations against the mean over the
    ``window`` before (None until the curve spans two windows), and the first validation whose
    trailing ``window``'s mean comes within :data:`LEVEL_TOLERANCE` of the last window's mean
    (F1 only): where it levelled off, when it did."""
    first_at = next(((t, v) for t, v in points if t >= at), None)
    best = (max(points, key=lambda p: (p[1], -p[0])) if higher else
            min(points, key=lambda p: (p[1], p[0])))       # the first of equals
    end = points[-1][0]
    last = [v for t, v in points if t > end - window]
    before = [v for t, v in points if end - 2 * window < t <= end - window]
    spans = end >= 2 * window and bool(before)
    out: dict[str, Any] = {
        "at": None if first_at is None else {"tokens": first_at[0], "value": first_at[1]},
        "best": {"tokens": best[0], "value": best[1]},
        "last": {"tokens": end, "value": points[-1][1]},
        "last_window": {"mean": _mean(last), "n": len(last), "min": min(last),
                        "max": max(last)},
        "previous_window": {"mean": _mean(before), "n": len(before)} if spans else None,
        "change": _mean(last) - _mean(before) if spans else None}   # type: ignore[operator]
    if higher:
        change = out["change"]
        out["trend"] = (None if change is None else "levelled off"
                        if abs(change) < LEVEL_TOLERANCE else "rising" if change > 0
                        else "falling")
        target = out["last_window"]["mean"]
        out["within_tolerance_from"] = next(
            (t for t, _ in points if t >= window and abs(statistics.fmean(
                [v for s, v in points if t - window < s <= t]) - target) < LEVEL_TOLERANCE),
            None) if out["trend"] == "levelled off" else None
    return out


def summarize(points: Sequence[dict[str, Any]], rb_dev: float) -> dict[str, Any]:
    """Per rule and layer the F1 series' summary (:func:`series_summary`), the headline layer
    per rule (the highest peak), and the perplexity's."""
    layers = sorted({int(k.split("/L")[1]) for p in points for k in p if "/L" in k})
    rules: dict[str, Any] = {}
    for rule in RULES:
        by_layer = {str(k): series_summary([(p["tokens"], p[f"{rule}/L{k}"]) for p in points
                                            if f"{rule}/L{k}" in p]) for k in layers}
        head = max(by_layer, key=lambda k: (by_layer[k]["best"]["value"], -int(k)))
        rules[rule] = {"layer": int(head), "layers": by_layer,
                       "peak_above_right_branching": by_layer[head]["best"]["value"] - rb_dev}
    ppl = [(p["tokens"], p["ppl"]) for p in points if p.get("ppl") is not None]
    return {"at_tokens": AT_TOKENS, "window": WINDOW, "tolerance": LEVEL_TOLERANCE,
            "headline": "per rule, the layer whose F1 peaked highest on the dev treebank",
            "right_branching_dev": rb_dev, "rules": rules,
            "ppl": series_summary(ppl, higher=False) if ppl else None}


# ----------------------------------------------------------------------------- the record
def load_record(path: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """The record at ``path`` if it exists, refused when it holds another long run."""
    if not path.exists():
        return {}
    old = json.loads(path.read_text(encoding="utf-8"))
    differ = [f"{k}={old.get('long', {}).get(k)!r}" for k in LONG_KEYS
              if old.get("long", {}).get(k) != settings[k]]
    if differ:
        raise StudyError(f"{path} holds another long run ({', '.join(differ)}); give another "
                         f"--out or --runs")
    return old


def build_record(settings: dict[str, Any], run: Path, old: dict[str, Any],
                 args: argparse.Namespace) -> dict[str, Any]:
    """The record of ``run`` as it is now (scored once finished; what ``old`` holds already is
    kept: baselines, scores)."""
    from treelm.rundir.files import RunFiles

    points = curve(run) if RunFiles(run).metrics.exists() else []
    baselines = old.get("baselines") or {"dev": trees_screen.dev_baselines(
        settings["dev"], args.baseline_seeds)}
    rb = baselines["dev"]["baselines"]["right_branching"]
    finished = reached(run, settings["tokens"])
    status = ("finished" if finished else "training" if held(run) else
              "stopped" if points else "not started")
    done = last_done(run)
    rec: dict[str, Any] = {
        "long": {k: settings[k] for k in (*LONG_KEYS, "test")}, "runs_dir": repo_path(run),
        "run_dir": settings["run_dir"], "config": _config(run) if run.is_dir() else None,
        "source_tokens": source_tokens(run) if settings["source"] and points else None,
        "status": status, "tokens": points[-1]["tokens"] if points else 0,
        "minutes": points[-1]["minutes"] if points else 0.0,
        "best_valid_ppl": done.get("best_valid_ppl") if finished and done else None,
        "asgd_start": asgd_start(run) if points else None, "baselines": baselines,
        "curve": points, "summary": summarize(points, rb) if points else None,
        "command": args.command,
        "commands": [*(c for c in old.get("commands", []) if c != args.command), args.command]}
    if finished and done is not None:
        final = old.get("final")
        if not final or final.get("tokens") != done["tokens"]:     # scored once
            print(f"{run}: scoring the checkpoints best and last on {settings['dev']} and "
                  f"{settings['test']}", file=sys.stderr, flush=True)
            final = {"tokens": done["tokens"],
                     "baselines": baselines_on_test(settings["test"], args.baseline_seeds),
                     "checkpoints": {w: score_checkpoint(run, w, settings["dev"],
                                                         settings["test"])
                                     for w in ("best", "last")}}
        rec["final"] = final
    return rec


def write(out: Path, rec: dict[str, Any]) -> dict[str, Any]:
    """Replace the record under its lock; a snapshot never replaces a finished record."""
    with trees_screen.record_lock(out):
        if out.exists() and not rec.get("final"):
            old = json.loads(out.read_text(encoding="utf-8"))
            if old.get("final") and old.get("runs_dir") == rec["runs_dir"]:
                return old
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        written = write_result(SCRIPT, rec, path=tmp, echo=False)
        os.replace(tmp, out)
        return written


# ----------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> dict[str, Any] | None:
    args = parse_args(argv)
    if args.page:
        page_main()
        return None
    import torch

    torch.set_flush_denormal(True)      # as the CLI does: trained gates produce denormals
    if args.threads:
        torch.set_num_threads(args.threads)
    settings = resolve(args)
    run = Path(settings["run_dir"])
    out = args.out or find_record(run, f"{SCRIPT}-*.json") or result_path(SCRIPT)
    old = load_record(out, settings)
    if args.no_train:
        if not run.is_dir():
            raise StudyError(f"{run}: no such run yet; start it without --no-train")
    elif not reached(run, settings["tokens"]):
        if args.source is not None:
            copy_run(args.source, run, settings["tokens"])
        else:
            _check_fresh(settings, run)
        if held(run):
            print(f"{run}: another process is training it", file=sys.stderr, flush=True)
        else:
            old = write(out, build_record(settings, run, old, args))    # the start, on record
            train_to_end(train_command(settings, run, args.threads), run, run_command)
            if not reached(run, settings["tokens"]):
                raise StudyError(f"{run}: stopped at {(last_done(run) or {}).get('tokens', 0):,} "
                                 f"tokens, short of {settings['tokens']:,}")
    rec = write(out, build_record(settings, run, old, args))
    print(f"{run}: {rec['status']} at {rec['tokens']:,} tokens; record {out}", file=sys.stderr,
          flush=True)
    return rec


# ----------------------------------------------------------------------------- the page
def pct(x: float) -> str:
    return f"{100.0 * x:.1f}"


def _mtok(tokens: float) -> str:
    return f"{tokens / 1e6:.1f}M"


def no_record() -> list[str]:
    return ["# Trees over a long run", "",
            "Generated by `python benchmarks/report.py`; do not edit by hand.", "",
            "No `benchmarks/results/trees-long-*.json` record has been written yet, so this page "
            "has no curve. The record comes from one ON-LSTM run of the tree screen's paper "
            "recipe (NT-ASGD at lr 30, constant rate) continued to 20M training tokens, its "
            "trees scored on `nltk-dev` at every validation, NT-ASGD's averaging included:", "",
            "```", LAUNCH, "python benchmarks/trees_long.py --page", "```", "",
            "The run is the screen's `runs/trees-screen/paper-seed1` copied to "
            "`runs/trees-long/paper-seed1` and continued (the same training as a 20M-token run "
            "from the start); rerunning the command continues it after a kill, and `--no-train` "
            "records a snapshot of a run still training.", ""]


def head(path: Path, rec: dict[str, Any]) -> list[str]:
    long, cfg = rec["long"], rec.get("config") or {}
    train = cfg.get("train", {})
    what = (f"the screen's run `{repo_path(from_repo(long['source']))}` (trained to "
            f"{rec['source_tokens']:,} tokens) copied to `{rec['run_dir']}` and continued"
            if long["source"] else f"`{long['config']}` with the screen's `{long['recipe']}` "
            f"recipe, seed {long['seed']}, trained from scratch in `{rec['run_dir']}`")
    patience = (f" (averaging once an epoch's validation is worse than the best before the "
                f"last {train.get('nonmono', 5)}, `train.nonmono`)"
                if train.get("optimizer") == "ntasgd" else "")
    recipe = (f"{train.get('optimizer')} at lr {train.get('lr')} ({train.get('lr_schedule')} "
              f"rate), batch {train.get('batch_size')}, BPTT {train.get('bptt')}, "
              f"{len(cfg.get('model', {}).get('sizes', [0])) - 1} layers{patience}")
    state = "still training" if rec["status"] == "training" else "stopped"
    status = (f"finished at {rec['tokens']:,} tokens after {rec['minutes'] / 60:.1f} hours"
              if rec["status"] == "finished" else
              f"a snapshot of a run {state}: {rec['tokens']:,} of {long['tokens']:,} tokens "
              f"after {rec['minutes'] / 60:.1f} hours")
    machine = rec.get("machine", {})
    return [
        "# Trees over a long run: F1 as perplexity falls", "",
        f"Generated by `python benchmarks/report.py` from `{repo_path(path)}` (command: "
        f"`{rec['commands'][-1]}`); do not edit by hand.", "",
        f"One run: {what}; {recipe}. It validates every {long['eval_every']:,} tokens, at every "
        f"epoch's end and at the end, and each validation scores the trees of every layer on "
        f"`{long['dev']}` under both tree rules (`train.eval_parse`), with NT-ASGD's averaged "
        f"weights once it averages. The record is {status} (machine: "
        f"{machine.get('cpu_model', machine.get('cpu', '?'))}).", ""]


def findings(rec: dict[str, Any]) -> list[str]:
    s, asgd = rec["summary"], rec["asgd_start"]
    rb = s["right_branching_dev"]
    nonmono = (rec.get("config") or {}).get("train", {}).get("nonmono", 5)
    lines = [(f"**NT-ASGD** began averaging at {asgd['tokens']:,} tokens (epoch "
              f"{asgd['epoch']}, {asgd['minutes'] / 60:.1f} hours)." if asgd else
              f"**NT-ASGD** has not begun averaging: no epoch's validation was worse than the "
              f"best before the last {nonmono} (`train.nonmono`; the validations inside an "
              f"epoch do not count)."), ""]
    for rule in RULES:
        e = s["rules"][rule]
        f = e["layers"][str(e["layer"])]
        at = (f"{pct(f['at']['value'])} at {f['at']['tokens']:,} tokens, "
              if f["at"] else "")
        trend = f["trend"]
        if trend is None:
            level = (f"too early to say whether it levelled off (the curve must span "
                     f"{2 * s['window'] / 1e6:.0f}M tokens)")
        else:
            level = (f"over the last {_mtok(s['window'])} tokens its mean was "
                     f"{pct(f['last_window']['mean'])} ({f['last_window']['n']} validations, "
                     f"{pct(f['last_window']['min'])} to {pct(f['last_window']['max'])}), "
                     f"{100 * f['change']:+.1f} points on the {_mtok(s['window'])} before: "
                     f"**{trend}**" + (f" (its mean within {100 * s['tolerance']:.0f} point of "
                                       f"that level from {f['within_tolerance_from']:,} tokens)"
                                       if f.get("within_tolerance_from") else ""))
        lines += [f"**{rule.capitalize()} rule, layer {e['layer']}** (the layer that peaked "
                  f"highest): {at}peak {pct(f['best']['value'])} at {f['best']['tokens']:,} "
                  f"tokens ({100 * e['peak_above_right_branching']:+.1f} points on "
                  f"right-branching's {pct(rb)}), {pct(f['last']['value'])} at the last "
                  f"validation; {level}.", ""]
    p = s["ppl"]
    if p:
        at = f"{p['at']['value']:.1f} at {p['at']['tokens']:,} tokens, " if p["at"] else ""
        change = ("" if p["change"] is None else
                  f"; its mean over the last {_mtok(s['window'])} tokens, "
                  f"{p['last_window']['mean']:.1f}, is "
                  f"{100 * p['change'] / p['previous_window']['mean']:+.1f}% on the "
                  f"{_mtok(s['window'])} before")
        lines += [f"**Validation perplexity**: {at}lowest {p['best']['value']:.1f} at "
                  f"{p['best']['tokens']:,} tokens, {p['last']['value']:.1f} at the last "
                  f"validation{change}.", ""]
    return lines


def layer_table(rec: dict[str, Any]) -> list[str]:
    s = rec["summary"]
    lines = [f"| rule | layer | at {_mtok(s['at_tokens'])} | peak (tokens) | last | mean of the "
             f"last {_mtok(s['window'])} | change on the {_mtok(s['window'])} before |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for rule in RULES:
        for k, f in sorted(s["rules"][rule]["layers"].items(), key=lambda kv: int(kv[0])):
            change = "–" if f["change"] is None else f"{100 * f['change']:+.1f}"
            at = pct(f["at"]["value"]) if f["at"] else "–"
            lines.append(f"| {rule} | {k} | {at} | {pct(f['best']['value'])} "
                         f"({f['best']['tokens']:,}) | {pct(f['last']['value'])} | "
                         f"{pct(f['last_window']['mean'])} | {change} |")
    return lines + [""]


def final_table(rec: dict[str, Any]) -> list[str]:
    final = rec["final"]
    long = rec["long"]
    rb = final["baselines"]
    lines = [f"## The finished run's checkpoints on `{long['test']}`", "",
             "Sentence F1 of every layer (dev, test at all lengths, test at <= 10 words) of the "
             "checkpoints `best` (lowest validation loss) and `last` (the final validation's "
             "weights), each with the weights its validation scored. Right-branching on test: "
             f"{pct(rb['test']['baselines']['right_branching'])} (all lengths, "
             f"{rb['test']['n_sentences']:,} sentences), "
             f"{pct(rb['test_10']['baselines']['right_branching'])} (<= 10 words).", "",
             "| checkpoint | tokens | valid ppl | rule | layer | dev | test | test <= 10 |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for which, c in final["checkpoints"].items():
        for rule in RULES:
            sc = c["scores"][rule]
            for k in sorted(sc["dev"], key=int):
                lines.append(f"| `{which}`{' (averaged)' if c['averaged'] else ''} | "
                             f"{c['tokens']:,} | {c['valid_ppl']:.1f} | {rule} | {k} | "
                             f"{pct(sc['dev'][k]['sentence_f1'])} | "
                             f"{pct(sc['test'][k]['sentence_f1'])} | "
                             f"{pct(sc['test_10'][k]['sentence_f1'])} |")
    return lines + [""]


def plot(rec: dict[str, Any], path: Path) -> None:
    from matplotlib.figure import Figure

    points, s = rec["curve"], rec["summary"]
    fig = Figure(figsize=(10, 5))
    ax = fig.subplots()
    layers = sorted({int(k.split("/L")[1]) for p in points for k in p if "/L" in k})
    for i, k in enumerate(layers):
        for rule, style in zip(RULES, ("-", "--")):
            pts = [(p["tokens"] / 1e6, 100 * p[f"{rule}/L{k}"]) for p in points
                   if f"{rule}/L{k}" in p]
            ax.plot(*zip(*pts), style, color=f"C{i}", lw=1.4, marker="." if rule == RULES[0]
                    else None, label=f"layer {k}, {rule} rule")
    rb = 100 * s["right_branching_dev"]
    ax.axhline(rb, color="black", ls=":", lw=1, label=f"right-branching {rb:.1f}")
    if rec["asgd_start"]:
        ax.axvline(rec["asgd_start"]["tokens"] / 1e6, color="red", ls="-.", lw=1,
                   label="NT-ASGD begins averaging")
    if rec.get("source_tokens"):
        ax.axvline(rec["source_tokens"] / 1e6, color="grey", ls=":", lw=1,
                   label="end of the copied screen run")
    ax.set_xlabel("training tokens seen (millions)")
    ax.set_ylabel(f"sentence F1 on {rec['long']['dev']} (%)")
    ax.grid(alpha=0.3)
    ppl_ax = ax.twinx()
    ppl = [(p["tokens"] / 1e6, p["ppl"]) for p in points if p.get("ppl") is not None]
    ppl_ax.plot(*zip(*ppl), color="grey", lw=1.2, alpha=0.7, label="validation perplexity")
    ppl_ax.set_ylabel("validation perplexity (grey)")
    ppl_ax.set_yscale("log")
    from matplotlib.ticker import FormatStrFormatter
    ppl_ax.yaxis.set_major_formatter(FormatStrFormatter("%.0f"))
    ppl_ax.yaxis.set_minor_formatter(FormatStrFormatter("%.0f"))
    handles = ax.get_legend_handles_labels()
    more = ppl_ax.get_legend_handles_labels()
    ax.legend(handles[0] + more[0], handles[1] + more[1], fontsize=7, loc="upper center",
              bbox_to_anchor=(0.5, -0.12), ncol=3)
    ax.set_title("trees of every layer as the language model trains")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight", facecolor="white")


def render(path: Path | None, rec: dict[str, Any] | None, doc: Path = DOC,
           img: Path | None = None) -> str:
    """Write the page of ``rec`` (read from ``path``; None: the page without a record) to
    ``doc``, its picture to ``img`` (default ``doc``'s ``img/``); returns the page."""
    img = img or doc.parent / "img"
    if rec is None or path is None or not rec.get("curve"):
        return write_page(doc, no_record())
    plot(rec, img / IMAGE)
    lines = head(path, rec) + findings(rec) + [
        f"![sentence F1 of every layer on {rec['long']['dev']} (official solid, split dashed) "
        f"and validation perplexity against tokens seen](img/{IMAGE})", "",
        f"## Every layer on `{rec['long']['dev']}`", ""] + layer_table(rec)
    if rec.get("final"):
        lines += final_table(rec)
    return write_page(doc, lines)


def page_main(results: Path = RESULTS, doc: Path = DOC) -> Path:
    """Render the newest trees-long record, or the page that says there is none."""
    found = newest_record(f"{SCRIPT}-*.json", results)
    render(*(found or (None, None)), doc)
    print(f"wrote {doc}" + ("" if found else " (no trees-long record yet)"))
    return doc


def cli() -> int:
    from treelm.errors import TreelmError

    try:
        main()
    except (StudyError, TreelmError) as e:
        print(f"trees_long.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(cli())
