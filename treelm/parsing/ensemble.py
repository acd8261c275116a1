"""``treelm ensemble``: the tree average of runs and tree files, per sentence.

Shayegh et al., "Ensemble Distillation for Unsupervised Constituency Parsing" (ICLR 2024): for
each sentence, the binary tree ``T* = argmax_T sum_k w_k |spans(T) ∩ spans(T_k)|`` over spans of
2 to n-1 words (:mod:`treelm.syntax.ensemble`, through the API's ``treelm.ensemble_trees``).

A source is read over the sentences (a treebank's, as ``eval-parse`` reads them, or the
whitespace-separated words of ``--input``'s lines):

* a run directory: a language model with ON-LSTM layers, at the layer and rule it chose on dev
  trees for ``--checkpoint`` (``TreelmModel.choice``, as ``treelm parse`` reads it by default),
  its trees those ``eval-parse`` scores (:func:`treelm.syntax.readings.read_parts`: each run is
  loaded once and its levels read once, whatever the number of its readings);
* ``RUN:LAYER:RULE``: that run at that layer and rule;
* a tree file (:mod:`treelm.syntax.tree_files`: a tree a line, any labels).

The trees go to stdout or ``-o``, one a line, as ``treelm parse --format brackets`` writes them
(so that ``eval-parse --trees`` scores them, and they can be a source again). With
``--treebank``, the scores are printed too, as ``eval-parse`` prints them
(:mod:`treelm.parsing.scoring`: :func:`treelm.syntax.report.parsing_report` with every source
and the ensemble as named tree sets, and the baselines; the treebank's label columns): on stdout
when the trees go to a file, else on stderr. A tree file's leaves are read as ``eval-parse
--trees`` reads them (as written or normalised as the treebank's words; ``--match position``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass
from typing import Any

from treelm.errors import TreelmError, check_output
from treelm.parsing.defaults import STYLES
from treelm.verb import Number, add_verb

ENSEMBLE_EPILOG = """examples:
  treelm ensemble runs/seed1 runs/seed2 runs/seed3 --treebank nltk-test -o average.txt
  treelm ensemble runs/seed1:2:official runs/seed1:2:split runs/seed1:3:official \\
      --treebank nltk-dev                       # three readings of one run; scores on stderr
  treelm ensemble cpcfg.txt diora.txt runs/onlstm --treebank nltk-test --source-weights 2,1,1
  treelm ensemble runs/a runs/b --input sentences.txt > trees.txt
  treelm eval-parse --trees average.txt --treebank nltk-test     # the average scored again
"""

_READING_RE = re.compile(rf"^(.+):(\d+):({'|'.join(STYLES)})$")


@dataclass(frozen=True)
class Source:
    """One SOURCE argument: a run (``layer``, ``rule``: given, or ``None`` for its dev choice)
    or a tree file."""

    text: str
    path: str
    is_run: bool
    layer: int | None = None
    rule: str | None = None


def read_source(text: str) -> Source:
    """A SOURCE argument: an existing directory (a run), ``RUN:LAYER:RULE``, or a file."""
    if os.path.isdir(text):
        return Source(text, text, True)
    found = _READING_RE.match(text)
    if found and os.path.isdir(found.group(1)) and not os.path.exists(text):
        layer = int(found.group(2))
        if layer < 1:
            raise TreelmError(f"{text}: layers are numbered from 1")
        return Source(text, found.group(1), True, layer, found.group(3))
    if os.path.isfile(text):
        return Source(text, text, False)
    raise TreelmError(f"{text}: no such run directory, RUN:LAYER:RULE (rule "
                      f"{' or '.join(STYLES)}) or tree file")


def weight_list(text: str) -> list[float]:
    """The ``type=`` of ``--source-weights``: comma-separated numbers, finite and ``>= 0``."""
    check = Number(float, at_least=0)
    try:
        return [check(part.strip()) for part in text.split(",")]
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"give one number >= 0 per source, comma-separated "
                                         f"(e.g. 2,1,1), got {text!r}") from None


def _run_trees(args: argparse.Namespace, sources: list[Source], sentences: list[list[str]]
               ) -> dict[int, tuple[str, list[Any]]]:
    """Per run source (by its index in ``sources``): its name in the table and its trees of
    ``sentences``, a run read at its dev choice or at the reading given, said on stderr with
    its share of unknown words. Each run is loaded once and its levels read once
    (:func:`treelm.syntax.readings.read_parts`), whatever the number of its readings."""
    from treelm.api.model import TreelmModel
    from treelm.run import open_run
    from treelm.syntax.readings import read_parts

    out: dict[int, tuple[str, list[Any]]] = {}
    paths = list(dict.fromkeys(s.path for s in sources if s.is_run))
    words = max(sum(len(s) for s in sentences), 1)
    for path in paths:
        args.source_run = path
        run = open_run(args, expect="lm", attr="source_run")
        model = TreelmModel(run)
        mine = {k: s for k, s in enumerate(sources) if s.is_run and s.path == path}
        readings = {}
        for k, source in mine.items():
            if not model.layers:
                raise TreelmError(f"{source.text}: the model has no ON-LSTM layers to read "
                                  "trees from")
            choice = model.choice
            assert choice is not None
            layer = choice.layer if source.layer is None else source.layer
            if layer not in model.layers:
                raise TreelmError(f"{source.text}: layer {layer}: this model's ON-LSTM layers "
                                  f"are {', '.join(map(str, model.layers))}")
            why = "given" if source.layer is not None else choice.why
            readings[k] = (layer, source.rule or choice.rule, why)
        read = read_parts(run.model, run.vocab, {"": sentences},
                          sorted({x[0] for x in readings.values()}),
                          list(dict.fromkeys(x[1] for x in readings.values())),
                          args.batch_size, args.unk)[""]
        for k, (layer, rule, why) in readings.items():
            print(f"treelm ensemble: {mine[k].text}: layer {layer}, {rule} rule ({why}); "
                  f"{100.0 * read.oov / words:.1f}% of words read as <unk>", file=sys.stderr,
                  flush=True)
            out[k] = (f"{path} (layer {layer}, {rule})", read.trees[layer, rule])
    return out


def _sentences(args: argparse.Namespace) -> tuple[list[Any] | None, list[Any] | None,
                                                  list[list[str]]]:
    """(every gold tree of --treebank, those of at most --max-len words, their words), or
    (None, None, the words of --input's lines: a blank line none)."""
    if args.treebank is None:
        from treelm.text.inputs import input_lines

        return None, None, [line.split() for line in input_lines(args.input)]
    from treelm.syntax.report import load_golds

    every = load_golds(args.treebank)
    golds = [g for g in every if args.max_len is None or len(g.words) <= args.max_len]
    if not golds:
        raise TreelmError(f"{args.treebank}: no sentences of <= {args.max_len} words to "
                          "evaluate")
    return every, golds, [list(g.words) for g in golds]


def source_trees(args: argparse.Namespace, sources: list[Source], sentences: list[list[str]],
                  full: list[int], every: list[Any] | None) -> list[tuple[str, list[Any]]]:
    """(name, trees of the sentences ``full`` indexes) of each source, in order; the tree files
    are read first, so that one that does not fit fails before any run is loaded. ``args``:
    the verb's (``--treebank``, ``--input``, ``--match`` and the run options); ``ensemble`` and
    ``teacher-trees`` read their sources through it."""
    from treelm.parsing.scoring import tree_files
    from treelm.syntax.tree_files import Respelt, read_tree_file

    read: list[tuple[str, list[Any]]] = [("", [])] * len(sources)
    for k, source in enumerate(sources):
        if source.is_run:
            continue
        if every is not None:
            trees = tree_files([source.path], args.treebank, args.max_len, args.match,
                               "ensemble")[1][source.path]
        else:
            where = "stdin" if args.input in (None, "-") else args.input
            respelt = Respelt(source.path)
            trees = read_tree_file(source.path, sentences,
                                   f"the {len(sentences)} lines of {where}", args.match, respelt)
            trees = [trees[i] for i in full]
            if args.match == "position":
                print(respelt.note("ensemble"), file=sys.stderr, flush=True)
        read[k] = (source.path, trees)
    for k, named in _run_trees(args, sources, [sentences[i] for i in full]).items():
        read[k] = named
    return read


def cmd_ensemble(args: argparse.Namespace) -> int:
    """average the trees of runs and tree files, sentence by sentence

    For each sentence, the binary tree that shares the most spans with the sources' trees (tree
    averaging, Shayegh et al., "Ensemble Distillation for Unsupervised Constituency Parsing",
    ICLR 2024): T maximising the sum over sources k of w_k |spans(T) & spans(T_k)|, spans of 2 to
    n-1 words, found by dynamic programming over spans; ties go to the smallest split point. A
    SOURCE is a language-model run with ON-LSTM layers, read at the layer and rule it chose on
    dev trees for --checkpoint (as parse reads it; else its last-but-one layer and the official
    rule), RUN:LAYER:RULE for a reading of your own, or a file of trees (one bracketed tree a
    line, any labels, leaves the sentence's words: docs/syntax.md). The sentences are a
    treebank's, preprocessed as eval-parse reads them (--treebank, --max-len), or the
    whitespace-separated words of --input's lines (a blank line gives a blank line). Output: a
    tree a line, in brackets as parse writes them, on stdout or -o FILE; with --treebank also
    the scores, the average's F1 beside each source's and the baselines (on stdout with -o, else
    on stderr).
    """
    from treelm.api.ensemble import ensemble_trees
    from treelm.syntax.trees import tree_to_brackets

    if args.input is None and args.treebank is None:
        raise TreelmError("ensemble needs the sentences: --input FILE ('-': stdin) or "
                          "--treebank TB")
    sources = [read_source(s) for s in args.sources]
    if args.source_weights is not None and len(args.source_weights) != len(sources):
        raise TreelmError(f"--source-weights: {len(args.source_weights)} weights for "
                          f"{len(sources)} sources; give one per source")
    if args.max_len is not None and args.treebank is None:
        raise TreelmError("--max-len needs --treebank")
    if args.output:
        check_output(args.output, what="trees")
    every, golds, sentences = _sentences(args)
    full = [i for i, words in enumerate(sentences) if words]
    read = source_trees(args, sources, sentences, full, every)
    named = {f"[{k}] {name}": trees for k, (name, trees) in enumerate(read, 1)}
    average = ensemble_trees(list(named.values()), args.source_weights)
    out_lines = [""] * len(sentences)
    for i, tree in zip(full, average):
        out_lines[i] = tree_to_brackets(tree)
    text = "".join(line + "\n" for line in out_lines)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if golds is not None:
        from treelm.parsing.scoring import print_report
        from treelm.syntax.baselines import DEFAULT_BASELINES
        from treelm.syntax.report import parsing_report

        weighted = "" if args.source_weights is None else ", weighted"
        named[f"tree average of {len(sources)} sources{weighted}"] = average
        report = parsing_report(args.treebank, args.max_len, golds=golds, trees=named,
                                baselines=DEFAULT_BASELINES, seeds=range(5))
        report["weights"] = args.source_weights
        print_report(report, args.format, file=sys.stdout if args.output else sys.stderr)
    return 0


def add_ensemble(sub: Any) -> argparse.ArgumentParser:
    p = add_verb(sub, "ensemble", cmd_ensemble, epilog=ENSEMBLE_EPILOG)
    add_source_options(p, "+", "a file of trees (one bracketed tree a line)")
    where = p.add_mutually_exclusive_group()      # one of them: checked by the verb
    where.add_argument("--input", metavar="FILE",
                       help="the sentences, one a line, words separated by spaces ('-': stdin)")
    where.add_argument("--treebank",
                       metavar="nltk-dev|nltk-test|nltk|sinica-dev|sinica-test|sinica|PATH",
                       help="the sentences of a treebank, as eval-parse reads them; the scores "
                       "are printed too")
    p.add_argument("--max-len", type=Number(int, at_least=1),
                   help="with --treebank: its sentences of at most this many words")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the trees here (default: stdout)")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="the scores (--treebank): a table (default) or one JSON object")
    return p


def add_source_options(p: argparse.ArgumentParser, nargs: str, files: str) -> None:
    """The SOURCEs (``nargs`` of them; ``files``: what a tree file holds) and how they are read
    and weighed: the arguments of ``ensemble`` and ``teacher-trees``."""
    from treelm.parsing.scoring import add_match_option
    from treelm.run import add_run_options
    from treelm.text.inputs import add_unk_option

    p.add_argument("sources", nargs=nargs, metavar="SOURCE",
                   help=f"a run directory (its dev-chosen layer and rule), RUN:LAYER:RULE, or "
                   f"{files}")

    p.add_argument("--source-weights", type=weight_list, metavar="W1,W2,...",
                   help="one weight >= 0 per source, in order: its votes count that many times "
                   "(default: all 1)")
    add_match_option(p)
    add_run_options(p)
    add_unk_option(p, "word")
    p.add_argument("--batch-size", type=Number(int, at_least=1), default=256,
                   help="sentences per forward pass of a run (default 256)")


__all__ = ["Source", "add_ensemble", "add_source_options", "cmd_ensemble", "read_source",
           "source_trees", "weight_list"]
