"""``treelm <verb>``: the command line. ``treelm --help`` lists the verbs, ``treelm VERB --help``
explains each."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

from treelm import omp
from treelm.errors import TreelmError
from treelm.verb import TreelmParser

omp.configure()     # before anything loads torch (and with it libgomp): treelm/omp.py

EPILOG = """examples:
  treelm train --config configs/tiny-lm.yaml --out runs/tiny
  treelm train --config configs/ptb-onlstm-cpu.yaml --out runs/onlstm train.max_minutes=60
  treelm train --resume runs/onlstm            # continue a stopped or killed run
  treelm eval runs/onlstm --split test
  treelm train --config configs/atis-elman.yaml --out runs/atis-elman   # slot filling
  echo "show me flights from boston to denver tomorrow" | treelm tag runs/atis-elman
  treelm suite agreement runs/onlstm runs/lstm   # Marvin & Linzen minimal pairs
  treelm train --config configs/multi30k-rnn-attn.yaml --out runs/de-en   # translation
  echo "Ein Mann fährt Fahrrad." | treelm translate runs/de-en --beam 5
"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("treelm")
    except PackageNotFoundError:      # run from a source tree that was not installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    p = TreelmParser(    # intermixed flags, one-line usage errors, in every verb's parser too
        prog="treelm",
        description="Sequence models that learn structure: train recurrent language models "
        "(ON-LSTM, LSTM, GRU, Elman, Jordan, MRNN, Tensor RNN) and evaluate them; tag slots; "
        "translate.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"treelm {_version()}")
    sub = p.add_subparsers(dest="verb", metavar="VERB")

    from treelm.train.commands import add_eval, add_train
    add_train(sub)
    add_eval(sub)
    from treelm.generate.commands import add_generate, add_probe
    add_generate(sub)
    add_probe(sub)
    from treelm.analysis.commands import add_gradflow
    add_gradflow(sub)
    from treelm.parsing.commands import add_eval_parse, add_parse, add_plot, add_plot_tree
    add_parse(sub)
    add_eval_parse(sub)
    add_plot(sub)
    add_plot_tree(sub)
    from treelm.parsing.ensemble import add_ensemble
    add_ensemble(sub)
    from treelm.parsing.teacher import add_teacher_trees
    add_teacher_trees(sub)
    from treelm.tag.commands import add_tag
    add_tag(sub)
    from treelm.suite.commands import add_suite
    add_suite(sub)
    from treelm.translate.commands import add_translate
    add_translate(sub)
    from treelm.serve.commands import add_serve
    add_serve(sub)
    from treelm.study.commands import add_study
    add_study(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()     # a command's clock (train.max_minutes counts imports too)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.started = started
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        if args.verb != "train":  # the trainer sets it from its config
            import torch

            # denormal floats in saturated gates make CPU GEMMs several times slower
            torch.set_flush_denormal(True)
        with contextlib.ExitStack() as args.scope:   # what a verb holds until it returns
            return args.func(args)
    except TreelmError as e:
        print(f"treelm: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (`treelm study S.yaml --status | head -1`): stop quietly, as a
        # Unix tool does; stdout to /dev/null so that Python's own flush at exit cannot fail too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as e:
        if e.filename is None or isinstance(e, BlockingIOError):
            raise           # not about a file the user named: a bug to see whole
        # a file that became unreadable or unwritable after the verb's checks (a disk filling
        # up while a picture is saved, a file removed meanwhile): one line naming it
        print(f"treelm: error: {e.filename}: {e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        note = ""
        if args.verb == "train":  # a second Ctrl-C, or one before training started
            note = " (any checkpoint already written is intact; --resume continues from it)"
        print(f"treelm: interrupted{note}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
