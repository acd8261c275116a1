"""``treelm tag``: label the words of utterances with a trained slot-filling run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from treelm.errors import TreelmError
from treelm.run import add_run_options

TAG_EPILOG = """examples:
  echo "show me flights from boston to denver tomorrow" | treelm tag runs/atis-elman
  treelm tag runs/atis-elman --input questions.txt --format json
"""


def cmd_tag(args: argparse.Namespace) -> int:
    from treelm.run import open_run
    from treelm.tag.slots import as_json, as_text, read_utterances

    if args.input is not None and not Path(args.input).is_file():
        raise TreelmError(f"{args.input}: no such file")
    if args.batch_size is not None and args.batch_size < 1:
        raise TreelmError(f"--batch-size must be >= 1, got {args.batch_size}")
    src = (Path(args.input).read_text(encoding="utf-8").splitlines() if args.input
           else sys.stdin.read().splitlines())
    utterances = read_utterances(src, args.input or "stdin")
    r = open_run(args, expect="tagging")
    fmt = as_json if args.format == "json" else as_text
    for t in r.task.tag(r.model, utterances, args.batch_size):
        print(fmt(t), flush=True)
    return 0


def add_tag(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("tag", help="label each word of utterances with its slot (slot filling)",
                       description="Read utterances (one a line, words separated by spaces) "
                       "from --input or stdin and print each with its slots in brackets, or as "
                       "JSON (words, tags, slots, intent).", epilog=TAG_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir")
    p.add_argument("--input", metavar="FILE", help="utterances, one a line (default: stdin)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--batch-size", type=int, help="utterances per batch (default: the config's)")
    add_run_options(p)
    p.set_defaults(func=cmd_tag)
    return p
