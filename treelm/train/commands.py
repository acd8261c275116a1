"""``treelm train`` and ``treelm eval``: the verbs of the trainer, for every task."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from treelm.errors import TreelmError
from treelm.verb import Number, add_verb

TRAIN_EPILOG = """examples:
  treelm train --config configs/tiny-lm.yaml --out runs/tiny
  treelm train --config configs/ptb-onlstm-cpu.yaml --out runs/onlstm train.max_minutes=60
  treelm train --resume runs/onlstm            # continue a stopped or killed run
  treelm train --resume runs/onlstm train.max_minutes=120   # a finished run: raise its budget
"""


def cmd_train(args: argparse.Namespace) -> int:
    """train a model from a YAML config (or resume a run)

    Train a model from a YAML config into a run directory. Overrides are dotted key=value pairs,
    e.g. train.lr=0.002 model.cell=lstm train.max_minutes=60. Under torchrun the same command trains
    with DistributedDataParallel.
    """
    from treelm.config import apply_overrides, load_config
    from treelm.rundir.files import RunFiles
    from treelm.tasks import saved_config
    from treelm.train.distributed import launched_rank
    from treelm.train.persistence import write_failure
    from treelm.train.trainer import resume, train

    if args.resume:
        if args.config:
            raise TreelmError("--resume takes the config from the run directory; drop --config")
        run = Path(args.resume)
        if not run.is_dir():      # (its config.yaml would be what is said to be missing)
            raise TreelmError(f"{run}: " + ("not a directory" if run.exists()
                                            else "no such run directory"))
        if not (RunFiles(run).pointer.exists() or RunFiles(run).config.exists()):
            raise TreelmError(f"{run}: not a treelm run directory (no checkpoint.json); "
                              f"nothing to resume")
        cfg = apply_overrides(saved_config(load_config(RunFiles(run).config)), args.overrides)
    else:
        if not args.config or not args.out:
            raise TreelmError("train needs --config FILE and --out RUN_DIR (or --resume RUN_DIR)")
        run = Path(args.out)
        if RunFiles(run).pointer.exists() and not args.force:
            raise TreelmError(f"{run} already holds a run; use --resume {run} or --force")
        if not args.force and (foreign := foreign_entries(run)):
            n = len(foreign)
            raise TreelmError(f"{run}: exists and is not a treelm run ({n} "
                              f"{'entry' if n == 1 else 'entries'}, e.g. {foreign[0]}); choose "
                              f"an empty or new directory, or --force")
        cfg = apply_overrides(load_config(args.config), args.overrides)
    try:
        summary = (resume(run, cfg, quiet=args.quiet, started=args.started) if args.resume
                   else train(cfg, run, quiet=args.quiet, started=args.started))
    except OSError as e:    # a full disk, mid-run: one line and the checkpoint to resume from
        failure = write_failure(run, e)
        if failure is None:
            raise
        raise failure from None
    if summary is not None and launched_rank() == 0:    # under torchrun: one result, rank 0's
        print(json.dumps(summary))
    return 130 if summary and summary.get("interrupted") else 0


def foreign_entries(out: Path) -> list[str]:
    """The names in ``out`` that make it no place for a new run: none where ``out`` is new,
    empty or a run already (its ``checkpoint.json`` or ``config.yaml``: ``--force`` decides
    those, as before). A run's files would otherwise land among someone's own (``--out docs``).
    A dead writer's ``train.lock`` alone does not count: the lock takes it over. Visible names
    first, so that the example the message gives is one the user sees with ``ls``."""
    from treelm.rundir.files import RunFiles

    files = RunFiles(out)
    if not out.is_dir() or files.pointer.exists() or files.config.exists():
        return []
    names = [p.name for p in out.iterdir() if p.name != files.lock.name]
    return sorted(names, key=lambda name: (name.startswith("."), name))


def add_train(sub: Any) -> argparse.ArgumentParser:
    t = add_verb(sub, "train", cmd_train, epilog=TRAIN_EPILOG)
    t.add_argument("--config", metavar="FILE", help="YAML config (see configs/)")
    t.add_argument("--out", metavar="RUN_DIR", help="run directory to create (new or empty)")
    t.add_argument("--resume", metavar="RUN_DIR", help="continue this run from its last checkpoint")
    t.add_argument("--force", action="store_true", help="overwrite an existing run in --out, "
                   "or write the run into a non-empty directory that is not one")
    t.add_argument("--quiet", action="store_true", help="no progress output (warnings, notes "
                   "and the result JSON on stdout remain)")
    t.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    return t


EVAL_EPILOG = """examples:
  treelm eval runs/onlstm --split test
  treelm eval runs/onlstm --data other-test.txt              # a text file (language model)
  treelm eval runs/atis-elman --data ../snips/test           # seq.in/seq.out/label, or CoNLL
  treelm eval runs/logic --data bowman/test                  # Bowman's test0 … test12 files
  treelm eval runs/de-en --data newtest --beam 5 --length-penalty 0.6 # newtest.de/.en
"""


def cmd_eval(args: argparse.Namespace) -> int:
    """score a trained run on a split or a data file (perplexity, bits/char, F1, accuracy, BLEU)

    Evaluate a run's best checkpoint on a split of its config, or on any data in the task's own
    format (--data), and print JSON with the task's scores: perplexity for word models, bits per
    character for character models, chunk F1 for slot filling, accuracy for logic, BLEU and chrF for
    translation (after sacreBLEU's lines with their signatures). --data reads: a text file (language
    model); a directory with seq.in/seq.out[/label] or a CoNLL file (tagging); Bowman's
    relation<TAB>formula<TAB>formula file or his directory of test<n> files (logic); a file stem
    STEM with STEM.<src> and STEM.<tgt>, plain or .gz (translation).
    """
    from treelm.run import open_run

    if args.data is not None and args.split is not None:
        raise TreelmError("--data scores a file instead of a split; drop --split")
    search = {k: v for k in ("beam", "length_penalty") if (v := getattr(args, k)) is not None}
    r = open_run(args)
    unsupported = [f"--{k.replace('_', '-')}" for k in search if k not in r.task.EVAL_OPTIONS]
    if unsupported:
        raise TreelmError(f"{' and '.join(unsupported)}: a {r.task.name} run has no search; "
                          "these options apply to translation runs")
    if args.data is not None:
        ev = r.task.evaluate_file(r.model, args.data, args.batch_size, **search)
        where = {"data": args.data}
    else:
        split = args.split or "valid"
        ev = r.task.evaluate(r.model, split, args.batch_size, **search)
        where = {"split": split}
    scores = {k: round(v, 5 if k == "loss" else 4) for k, v in ev.scores.items()}
    for line in ev.lines:        # the task's own report (e.g. sacreBLEU's line and signature)
        print(line)
    print(json.dumps({"run": str(r.path), **where, "checkpoint": args.checkpoint, **search,
                      ev.unit: ev.size, **scores, **ev.details}, ensure_ascii=False))
    return 0


def add_eval(sub: Any) -> argparse.ArgumentParser:
    from treelm.run import add_run_options

    e = add_verb(sub, "eval", cmd_eval, epilog=EVAL_EPILOG)
    e.add_argument("run_dir")
    e.add_argument("--split", choices=["valid", "test"],
                   help="a split of the run's config (default valid)")
    e.add_argument("--data", metavar="PATH", help="score this data instead of a split, in the "
                   "task's own format (see above)")
    e.add_argument("--batch-size", type=Number(int, at_least=1),
                   help="default: the config's eval/test batch size "
                   "(translation: sentences per decoding batch)")
    e.add_argument("--beam", type=Number(int, at_least=1), help="translation: beam size, 1 = "
                   "greedy (default: the config's eval_beam)")
    e.add_argument("--length-penalty", type=Number(float, at_least=0), metavar="α",
                   help="translation: beam search length penalty α (default: the config's "
                   "train.length_penalty)")
    add_run_options(e)
    return e
