"""``treelm translate``: translate sentences with a trained translation run, through the Python
API (:meth:`treelm.api.model.TreelmModel.translate_batches`; :mod:`treelm.translate.stream`)."""

from __future__ import annotations

import argparse
from typing import Any

from treelm.errors import IMAGE_SUFFIXES, check_output
from treelm.run import add_run_options
from treelm.text.inputs import add_unk_option
from treelm.verb import Number, add_verb

TRANSLATE_EPILOG = """examples:
  echo "Ein Mann fährt Fahrrad." | treelm translate runs/multi30k-rnn-attn
  treelm translate runs/multi30k-rnn-attn --input test.de --beam 5 > test.hyp.en
  treelm translate runs/reverse --input in.txt --beam 1 -o att.png
"""


def cmd_translate(args: argparse.Namespace) -> int:
    """translate sentences with a trained translation run

    Read sentences (one a line, plain text) from --input or stdin and print one translation a line,
    in the input's order (an empty line gives an empty line; input without any text is an error);
    progress on stderr for a file.
    """
    from treelm.api.model import TreelmModel
    from treelm.run import open_run
    from treelm.text.inputs import input_lines, source_name
    from treelm.translate.stream import translate_stream

    if args.output:
        check_output(args.output, IMAGE_SUFFIXES, "attention plot")
    lines = input_lines(args.input)          # a file whole; stdin as it comes
    model = TreelmModel(open_run(args, expect="translation"))
    translate_stream(model, lines, args.beam, args.length_penalty, args.batch_size,
                     args.output, args.unk, source_name(args.input))
    return 0


def add_translate(sub: Any) -> argparse.ArgumentParser:
    p = add_verb(sub, "translate", cmd_translate, epilog=TRANSLATE_EPILOG)
    p.add_argument("run_dir")
    p.add_argument("--input", metavar="FILE", help="sentences, one a line (default: stdin)")
    p.add_argument("--beam", type=Number(int, at_least=1), default=5,
                   help="beam size; 1 = greedy (default 5)")
    p.add_argument("--length-penalty", type=Number(float, at_least=0), metavar="α",
                   help="beam search length penalty α (default: the config's "
                   "train.length_penalty)")
    p.add_argument("--batch-size", type=Number(int, at_least=1),
                   help="sentences per batch (default: the config's)")
    p.add_argument("-o", "--output", metavar="FILE.png",
                   help="draw the first sentence's attention there (one panel per decoder "
                   "layer); the translations go to stdout")
    add_unk_option(p, "source symbol (a character the piece model never saw, or a word)")
    add_run_options(p)
    return p
