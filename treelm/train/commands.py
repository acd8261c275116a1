"""``treelm train`` and ``treelm eval``: the verbs of the trainer, for every task."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from treelm.errors import TreelmError

TRAIN_EPILOG = """examples:
  treelm train --config configs/tiny-lm.yaml --out runs/tiny
  treelm train --config configs/ptb-onlstm-cpu.yaml --out runs/onlstm train.max_minutes=60
  treelm train --resume runs/onlstm            # continue a stopped or killed run
  treelm train --resume runs/onlstm train.max_minutes=120   # a finished run: raise its budget
"""


def cmd_train(args: argparse.Namespace) -> int:
    from treelm.config import apply_overrides, load_config
    from treelm.rundir.files import RunFiles
    from treelm.train.distributed import launched_rank
    from treelm.train.trainer import resume, train

    if args.resume:
        if args.config:
            raise TreelmError("--resume takes the config from the run directory; drop --config")
        run = Path(args.resume)
        cfg = apply_overrides(load_config(RunFiles(run).config), args.overrides)
        summary = resume(run, cfg, quiet=args.quiet, started=args.started)
    else:
        if not args.config or not args.out:
            raise TreelmError("train needs --config FILE and --out RUN_DIR (or --resume RUN_DIR)")
        run = Path(args.out)
        if RunFiles(run).pointer.exists() and not args.force:
            raise TreelmError(f"{run} already holds a run; use --resume {run} or --force")
        cfg = apply_overrides(load_config(args.config), args.overrides)
        summary = train(cfg, run, quiet=args.quiet, started=args.started)
    if summary is not None and launched_rank() == 0:    # under torchrun: one result, rank 0's
        print(json.dumps(summary))
    return 130 if summary and summary.get("interrupted") else 0


def add_train(sub: Any) -> argparse.ArgumentParser:
    t = sub.add_parser("train", help="train a model from a YAML config (or resume a run)",
                       description="Train a model from a YAML config into a run directory. "
                       "Overrides are dotted key=value pairs, e.g. train.lr=0.002 "
                       "model.cell=lstm train.max_minutes=60. Under torchrun the same command "
                       "trains with DistributedDataParallel.",
                       epilog=TRAIN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--config", help="YAML config (see configs/)")
    t.add_argument("--out", help="run directory to create")
    t.add_argument("--resume", metavar="RUN_DIR", help="continue this run from its last checkpoint")
    t.add_argument("--force", action="store_true", help="overwrite an existing run in --out")
    t.add_argument("--quiet", action="store_true", help="no progress output (warnings, notes "
                   "and the result JSON on stdout remain)")
    t.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    t.set_defaults(func=cmd_train)
    return t


EVAL_EPILOG = """examples:
  treelm eval runs/onlstm --split test
  treelm eval runs/onlstm --split test --batch-size 1 --checkpoint last
  treelm eval runs/de-en --split test > test-bleu.json   # translation: sacreBLEU lines, JSON
"""


def cmd_eval(args: argparse.Namespace) -> int:
    from treelm.run import open_run

    if args.batch_size is not None and args.batch_size < 1:
        raise TreelmError(f"--batch-size must be >= 1, got {args.batch_size}")
    r = open_run(args)
    ev = r.task.evaluate(r.model, args.split, args.batch_size)
    scores = {k: round(v, 5 if k == "loss" else 4) for k, v in ev.scores.items()}
    for line in ev.lines:        # the task's own report (e.g. sacreBLEU's line and signature)
        print(line)
    print(json.dumps({"run": str(r.path), "split": args.split, "checkpoint": args.checkpoint,
                      ev.unit: ev.size, **scores, **ev.details}, ensure_ascii=False))
    return 0


def add_eval(sub: Any) -> argparse.ArgumentParser:
    from treelm.run import add_run_options

    e = sub.add_parser("eval", help="score a trained run on a split (perplexity, bits/char, ...)",
                       description="Evaluate a run's best checkpoint on a split and print JSON "
                       "with the task's scores: perplexity for word models, bits per character "
                       "for character models, chunk F1 for slot filling, BLEU and chrF for "
                       "translation (after sacreBLEU's lines with their signatures).",
                       epilog=EVAL_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("run_dir")
    e.add_argument("--split", choices=["valid", "test"], default="valid")
    e.add_argument("--batch-size", type=int, help="default: the config's eval/test batch size "
                   "(translation: sentences per decoding batch)")
    add_run_options(e)
    e.set_defaults(func=cmd_eval)
    return e
