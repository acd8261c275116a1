"""``treelm tag``: label the words of utterances with a trained slot-filling run, a thin wrapper
over :meth:`treelm.api.model.TreelmModel.tag` (one path with ``treelm.load``)."""

from __future__ import annotations

import argparse
from typing import Any

from treelm.run import add_run_options
from treelm.text.inputs import add_unk_option
from treelm.verb import Number, add_verb

TAG_EPILOG = """examples:
  echo "show me flights from boston to denver tomorrow" | treelm tag runs/atis-elman
  treelm tag runs/atis-elman --input questions.txt --format json
"""


def cmd_tag(args: argparse.Namespace) -> int:
    """label each word of utterances with its slot (slot filling)

    Read utterances (one a line, words separated by spaces) from --input or stdin and print each
    with its slots in brackets, or as JSON (words, tags, slots, intent); a blank line gives an empty
    line (an empty JSON result), input without any text is an error.
    """
    from treelm.api.model import TreelmModel
    from treelm.run import open_run
    from treelm.tag.slots import as_json, as_text
    from treelm.text.inputs import UnknownSymbols, input_lines, source_name

    lines = list(input_lines(args.input))
    model = TreelmModel(open_run(args, expect="tagging"))
    policy = UnknownSymbols(args.unk)
    fmt = as_json if args.format == "json" else as_text
    for t in model.tag(lines, batch_size=args.batch_size, unk=policy,
                       where=source_name(args.input)):
        print(fmt(t), flush=True)
    policy.report()
    return 0


def add_tag(sub: Any) -> argparse.ArgumentParser:
    p = add_verb(sub, "tag", cmd_tag, epilog=TAG_EPILOG)
    p.add_argument("run_dir")
    p.add_argument("--input", metavar="FILE", help="utterances, one a line (default: stdin)")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="text (default): the utterance with its slots in brackets, "
                   "[intent] first; json: one object per line (words, tags, slots, intent)")
    p.add_argument("--batch-size", type=Number(int, at_least=1),
                   help="utterances per batch (default: the config's)")
    add_unk_option(p, "word")
    add_run_options(p)
    return p
