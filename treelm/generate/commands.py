"""``treelm generate`` and ``treelm probe``: text from a trained language model.

Both are thin wrappers over the Python API (:class:`treelm.api.model.TreelmModel`:
``generate_stream`` and ``probe``), so that the command line and ``treelm.load`` take one path.
The prompt / prefix is read with the run's tokenizer (:mod:`treelm.text`: characters for a
character model, spaces included; whitespace-separated words for a word model; a newline is
``<eos>``) and primed by running ``<eos>`` + prompt through the model from the zero state, so
that the prompt is read as the start of a line, as every training line starts after an
``<eos>``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from treelm.errors import TreelmError
from treelm.run import add_run_options
from treelm.text import Tokenizer
from treelm.text.inputs import UnknownSymbols, add_unk_option
from treelm.verb import SEED, Number, add_verb

if TYPE_CHECKING:   # torch and the run load only when a command runs
    from treelm.api.model import TreelmModel

GENERATE_EPILOG = """examples:
  treelm generate runs/char-lstm --prompt "the company " --length 300 --seed 1
  treelm generate runs/char-lstm --prompt "the " --length 200 --temperature 0.7 --top-p 0.9
  treelm generate runs/word-onlstm --prompt "the market" --length 30 --beam 5
"""

PROBE_EPILOG = """examples (Sutskever, Martens & Hinton 2011: "fixi" -> "n"):
  treelm probe runs/char-mrnn --prompt fixi --prompt breaki --top-k 5
  treelm probe runs/onlstm --prompt "the company said" --top-k 10
  treelm probe runs/char-lstm --prompt "the " --format json > next.json
"""


# ----------------------------------------------------------------------------- helpers
class SymbolWriter:
    """Writes symbols as they come (the tokenizer's spacing, ``<eos>`` as a newline), or text
    pieces already spaced (:class:`treelm.api.values.Generation`); flushes after each."""

    def __init__(self, tokenizer: Tokenizer, out: TextIO) -> None:
        self.tokenizer, self.out = tokenizer, out
        self.line_start = True

    def write(self, symbol: str) -> None:
        self.text(self.tokenizer.piece_text(symbol, self.line_start))

    def text(self, piece: str) -> None:
        self.out.write(piece)
        self.out.flush()
        self.line_start = piece.endswith("\n")

    def write_all(self, symbols: list[str]) -> None:
        for s in symbols:
            self.write(s)

    def end(self) -> None:
        if not self.line_start:
            self.out.write("\n")
            self.out.flush()


# ----------------------------------------------------------------------------- generate
def cmd_generate(args: argparse.Namespace) -> int:
    """generate text from a trained language model

    Prime a trained language model with a prompt and print what follows, symbol by symbol as it is
    produced (words joined by spaces, characters as they are, <eos> as a newline). Sampling
    (default) draws from softmax(logits / T), optionally truncated to the top-k symbols and/or the
    top-p nucleus (Holtzman et al. 2020); --temperature 0 is greedy. --beam B runs beam search
    instead and prints the most probable continuation, ending at <eos> or after --length symbols.
    """
    from treelm.api.model import TreelmModel
    from treelm.run import open_run

    if args.beam is not None and (args.temperature is not None or args.top_k is not None
                                  or args.top_p is not None):
        raise TreelmError("--beam searches deterministically; drop --temperature, --top-k and "
                          "--top-p")
    model = TreelmModel(open_run(args, expect="lm"))
    policy = UnknownSymbols(args.unk)
    text = model.generate_stream(
        args.prompt, args.length, seed=args.seed, top_k=args.top_k, top_p=args.top_p,
        temperature=1.0 if args.temperature is None else args.temperature, beam=args.beam,
        alpha=args.length_penalty, unk=policy, where="--prompt")
    policy.report()
    out = SymbolWriter(model.run.tokenizer, sys.stdout)
    out.write_all(model.run.tokenizer.encode(args.prompt))
    for piece in text:
        out.text(piece)
    out.end()
    if args.beam is not None:
        print(f"treelm: beam {args.beam}: {text.symbols} symbols, log-prob "
              f"{text.logprob:.3f} nats", file=sys.stderr)
    return 0


def add_generate(sub: Any) -> argparse.ArgumentParser:
    g = add_verb(sub, "generate", cmd_generate, epilog=GENERATE_EPILOG)
    g.add_argument("run_dir")
    g.add_argument("--prompt", default="", help="text to start from (default: empty = a new "
                   "line)")
    g.add_argument("--length", type=Number(int, at_least=0), default=200,
                   help="symbols to generate (default 200)")
    g.add_argument("--temperature", type=Number(float, at_least=0),
                   help="softmax temperature (default 1; 0 = greedy)")
    g.add_argument("--top-k", type=Number(int, at_least=1),
                   help="sample among the K most likely symbols")
    g.add_argument("--top-p", type=Number(float, above=0, at_most=1),
                   help="sample from the smallest set of symbols whose probability reaches P "
                   "(nucleus sampling)")
    g.add_argument("--seed", type=SEED, default=0, help="random seed (default 0)")
    g.add_argument("--beam", type=Number(int, at_least=1),
                   help="beam search with B beams instead of sampling")
    g.add_argument("--length-penalty", type=Number(float, at_least=0), default=0.0,
                   metavar="ALPHA",
                   help="beam search: rank by log p / ((5+n)/6)^ALPHA (default 0: plain log p)")
    add_unk_option(g, "prompt symbol")
    add_run_options(g)
    return g


# ----------------------------------------------------------------------------- probe
def next_symbol_table(model: TreelmModel, prefixes: list[str], top: int,
                      policy: UnknownSymbols | None = None) -> list[dict[str, Any]]:
    """For each prefix the ``top`` most likely next symbols with their probabilities
    (:meth:`treelm.api.model.TreelmModel.probe`); symbols outside the vocabulary follow
    ``policy`` (default: read as ``<unk>``), the prefixes named ``--prompt K``."""
    policy = policy or UnknownSymbols("map")
    return [{"prefix": prefix,
             "next": [{"symbol": s, "prob": round(p, 6)}
                      for s, p in model.probe(prefix, top, unk=policy, where=f"--prompt {k}")]}
            for k, prefix in enumerate(prefixes, 1)]


def show_symbol(s: str) -> str:
    """A symbol made visible in a table: quotes around characters (so a space shows)."""
    return s if s.startswith("<") and s.endswith(">") else json.dumps(s, ensure_ascii=False)


def format_table(rows: list[dict[str, Any]]) -> str:
    width = max([len(show_symbol(r["prefix"])) for r in rows] + [6])
    sym_w = max([len(show_symbol(n["symbol"])) for r in rows for n in r["next"]] + [4])
    lines = [f"{'prefix':<{width}}  rank  {'next':<{sym_w}}  prob"]
    for r in rows:
        for k, n in enumerate(r["next"], 1):
            pre = show_symbol(r["prefix"]) if k == 1 else ""
            lines.append(f"{pre:<{width}}  {k:>4}  {show_symbol(n['symbol']):<{sym_w}}  "
                         f"{n['prob']:.4f}")
    return "\n".join(lines)


def cmd_probe(args: argparse.Namespace) -> int:
    """the most likely next symbols after given prefixes

    Print, for each --prompt, the K most likely next symbols and their probabilities under a trained
    language model (the prefix is read as the start of a line). Sutskever, Martens & Hinton (2011)
    show a character MRNN predicting 'n' after 'fixi'.
    """
    from treelm.api.model import TreelmModel
    from treelm.run import open_run

    model = TreelmModel(open_run(args, expect="lm"))
    policy = UnknownSymbols(args.unk)
    rows = next_symbol_table(model, args.prompt, args.top_k, policy)
    policy.report()
    if args.format == "json":
        print(json.dumps({"run": str(model.path), "level": model.run.tokenizer.level,
                          "prefixes": rows}, ensure_ascii=False))
    else:
        print(format_table(rows))
    return 0


def add_probe(sub: Any) -> argparse.ArgumentParser:
    p = add_verb(sub, "probe", cmd_probe, epilog=PROBE_EPILOG)
    p.add_argument("run_dir")
    p.add_argument("--prompt", action="append", required=True, metavar="TEXT",
                   help="a prefix to continue (repeat for several)")
    p.add_argument("--top-k", type=Number(int, at_least=1), default=5, metavar="K",
                   help="symbols per prompt (default 5)")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table (default) or one JSON object")
    add_unk_option(p, "prefix symbol")
    add_run_options(p)
    return p
