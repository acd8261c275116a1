"""``treelm <verb>``: the command line. ``treelm --help`` lists the verbs, ``treelm VERB --help``
explains each."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from treelm.errors import TreelmError

EPILOG = """examples:
  treelm train --config configs/tiny-lm.yaml --out runs/tiny
  treelm train --config configs/ptb-onlstm-cpu.yaml --out runs/onlstm train.max_minutes=60
  treelm train --resume runs/onlstm            # continue a stopped or killed run
  treelm eval runs/onlstm --split test
"""


def cmd_train(args: argparse.Namespace) -> int:
    from treelm.config import apply_overrides, load_config
    from treelm.train.trainer import resume, train

    if args.resume:
        run = Path(args.resume)
        cfg = apply_overrides(load_config(run / "config.yaml"), args.overrides)
        if args.config:
            raise TreelmError("--resume takes the config from the run directory; drop --config")
        summary = resume(run, cfg, quiet=args.quiet)
    else:
        if not args.config or not args.out:
            raise TreelmError("train needs --config FILE and --out RUN_DIR (or --resume RUN_DIR)")
        run = Path(args.out)
        if (run / "checkpoint.json").exists() and not args.force:
            raise TreelmError(f"{run} already holds a run; use --resume {run} or --force")
        cfg = apply_overrides(load_config(args.config), args.overrides)
        summary = train(cfg, run, quiet=args.quiet)
    if summary is not None and not args.quiet:
        print(json.dumps(summary))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    import torch

    from treelm.data.corpus import load_corpus
    from treelm.run import load_run
    from treelm.train.lm_task import evaluate_lm, metric
    from treelm.train.trainer import TrainConfig

    if args.threads:
        torch.set_num_threads(args.threads)
    r = load_run(args.run_dir, args.checkpoint, expect="lm")
    tc = TrainConfig.from_dict(r.cfg.get("train"))
    corpus = load_corpus(r.cfg.get("data", {}), r.vocab)
    data = getattr(corpus, args.split)
    bs = args.batch_size or (tc.test_batch_size if args.split == "test" else tc.eval_batch_size)
    loss = evaluate_lm(r.model, data, bs, tc.bptt)
    name, value = metric(loss, r.vocab.level)
    print(json.dumps({"run": str(r.path), "split": args.split, "checkpoint": args.checkpoint,
                      "tokens": data.numel(), "loss": round(loss, 5), name: round(value, 4)}))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="treelm",
        description="Sequence models that learn structure: train recurrent language models "
        "(ON-LSTM, LSTM, GRU, Elman, Jordan, MRNN, Tensor RNN) and evaluate them.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", metavar="VERB")

    t = sub.add_parser("train", help="train a model from a YAML config (or resume a run)",
                       description="Train a model from a YAML config into a run directory. "
                       "Overrides are dotted key=value pairs, e.g. train.lr=0.002 "
                       "model.cell=lstm train.max_minutes=60. Under torchrun the same command "
                       "trains with DistributedDataParallel.")
    t.add_argument("--config", help="YAML config (see configs/)")
    t.add_argument("--out", help="run directory to create")
    t.add_argument("--resume", metavar="RUN_DIR", help="continue this run from its last checkpoint")
    t.add_argument("--force", action="store_true", help="overwrite an existing run in --out")
    t.add_argument("--quiet", action="store_true", help="no progress output")
    t.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("eval", help="perplexity / bits per character of a trained run",
                       description="Evaluate a run's best checkpoint on a split and print JSON: "
                       "perplexity for word models, bits per character for character models.")
    e.add_argument("run_dir")
    e.add_argument("--split", choices=["valid", "test"], default="valid")
    e.add_argument("--checkpoint", choices=["best", "last"], default="best")
    e.add_argument("--batch-size", type=int, help="default: the config's eval/test batch size")
    e.add_argument("--threads", type=int, help="torch threads")
    e.set_defaults(func=cmd_eval)
    from treelm.decode.commands import add_generate, add_probe
    add_generate(sub)
    add_probe(sub)
    from treelm.analysis.commands import add_gradflow
    add_gradflow(sub)
    from treelm.syntax.commands import add_eval_parse, add_parse, add_plot, add_plot_tree
    add_parse(sub)
    add_eval_parse(sub)
    add_plot(sub)
    add_plot_tree(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        if args.verb != "train":  # the trainer sets it from its config
            import torch

            # denormal floats in saturated gates make CPU GEMMs several times slower
            torch.set_flush_denormal(True)
        return args.func(args)
    except TreelmError as e:
        print(f"treelm: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("treelm: interrupted (the last checkpoint is intact; --resume continues)",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
