"""``treelm parse``, ``eval-parse``, ``plot`` and ``plot-tree``: unsupervised syntax from ON-LSTM.

Trees are read off a trained ON-LSTM language model as in Shen et al., "Ordered Neurons"
(ICLR 2019), Sec. 5.2: per word the master-forget-gate level ``d_f`` of one layer
(:mod:`treelm.syntax.levels`, each sentence read alone as ``<eos> w_1 … w_n <eos>``), then the
greedy top-down split of :func:`treelm.syntax.trees.build_tree`. ``eval-parse`` prints the
numbers of the paper's Table 2 (unlabeled F1 per layer and for the trivial baselines, per-label
recall, tree depth) against a Penn-Treebank-style gold corpus.

Layers are numbered from 1 (the layer after the embedding). ``parse``, ``plot`` and
``plot-tree --run`` read the layer and tree rule the run chose on dev trees for the checkpoint
(``trees.json``, written by ``train.eval_parse`` or by ``eval-parse`` on ``nltk-dev`` or
``sinica-dev``), saying so on stderr; without such a choice, the last-but-one ON-LSTM layer
(layer 2 of the paper's 3-layer model, the one the official evaluation reads), or the only one
of a 1-layer model, and the official rule. ``--layer`` and ``--style`` given win
(:mod:`treelm.parsing.defaults`).

``parse``, ``plot`` and ``plot-tree --run`` also take a translation run whose encoder has ON-LSTM
layers: the source sentence is read by the run's source tokenizer and the encoder, and the tree
is over its source symbols (:mod:`treelm.syntax.source_levels`; ``--direction backward``: the
right-to-left stack of a bidirectional encoder). The levels come from
:func:`treelm.syntax.sources.level_source`, the one place that tells the two kinds of run apart.

The ``add_*`` functions register the sub-commands on ``treelm``'s argparse sub-parsers; each
``cmd_*`` checks its arguments, calls the library and prints: ``parse``, ``plot`` and ``plot-tree
--run`` read levels through the Python API (:meth:`treelm.api.model.TreelmModel.levels_stream`,
one path with ``treelm.load``); ``eval-parse`` scores a treebank, which the API does not offer,
with :mod:`treelm.syntax` (:mod:`treelm.syntax.report` for the report,
:mod:`treelm.syntax.render` for pictures, :mod:`treelm.syntax.trees` to read trees) and prints
it through :mod:`treelm.parsing.scoring`, as ``ensemble --treebank`` does; the options the
verbs share are :mod:`treelm.parsing.options`. Heavy modules (torch, matplotlib) are imported
only when a command runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from treelm.errors import IMAGE_SUFFIXES, TreelmError, check_output
from treelm.parsing.defaults import (
    LayerArg,
    parse_layer,
    record_choice,
    tree_defaults,
)
from treelm.parsing.options import (
    add_direction_option,
    add_model_options,
    add_run_and_sentence,
    add_text_options,
)
from treelm.parsing.scoring import (
    BASELINE_NAMES,
    DEFAULT_LABELS,
    add_match_option,
    baseline_names,
    label_list,
    print_report,
    tree_files,
)
from treelm.syntax.parse import input_lines
from treelm.syntax.report import SINICA_LABELS
from treelm.verb import Number, add_verb

FORMATS = ("brackets", "json", "ascii")

PARSE_EPILOG = """examples:
  treelm parse runs/onlstm "the cat sat on the mat"
  treelm parse runs/onlstm "the cat sat on the mat" --format ascii --layer all
  treelm parse runs/onlstm --input sentences.txt --format json > trees.jsonl
  echo "苹果 的 颜色 是 什么" | treelm parse runs/zh-onlstm
  treelm parse runs/zh-onlstm "苹果的颜色是什么" --segment jieba
  treelm parse runs/sinica "苹果的颜色是什么" --format ascii     # jieba + Simplified -> Traditional
  treelm parse runs/de-en-onlstm --input test.de        # a translation run: source-side trees
  treelm parse runs/de-en-onlstm "Ein Hund läuft." --direction backward --format ascii
"""

EVAL_EPILOG = """examples:
  treelm eval-parse runs/onlstm --treebank nltk --max-len 10           # WSJ10 of the NLTK sample
  treelm eval-parse runs/onlstm --treebank nltk-dev --format json      # choose the layer here...
  treelm eval-parse runs/onlstm --treebank nltk-test --layer 2         # ...and report it here
  treelm eval-parse runs/onlstm --treebank ptb/wsj/23 --format json    # WSJ test, all lengths
  treelm eval-parse --baseline all --treebank nltk --max-len 10        # no model needed
  treelm eval-parse runs/sinica --treebank sinica-dev                  # Chinese: choose here...
  treelm eval-parse runs/sinica --treebank sinica-test --layer 2       # ...report here
  treelm eval-parse --baseline all --treebank sinica-test              # Chinese baselines
  treelm eval-parse --trees cpcfg-test.txt --treebank nltk-test        # another parser's trees
  treelm parse runs/onlstm --input nltk-test.txt > onlstm-test.txt     # a run's, as a file...
  treelm eval-parse --trees onlstm-test.txt --treebank nltk-test       # ...scores as the run
"""

PLOT_EPILOG = """examples:
  treelm plot runs/onlstm "the cat sat on the mat" -o levels.png --layer 2
  treelm plot runs/onlstm "the cat sat on the mat" -o levels.pdf --gate input --scale shared
  treelm plot runs/onlstm "the stock rose sharply" -o heat.png --no-tree --title ""
"""

PLOT_TREE_EPILOG = """examples:
  treelm plot-tree "((the cat) (sat (on (the mat))))" -o tree.png
  treelm plot-tree --format json '[["the","cat"],["sat",["on",["the","mat"]]]]' -o tree.png
  treelm parse runs/onlstm "the cat sat" --format brackets | treelm plot-tree - -o tree.png
  treelm plot-tree --run runs/onlstm "the cat sat on the mat" -o tree.png --layer 2
"""


# ----------------------------------------------------------------------------- helpers
def _open_run(args: argparse.Namespace) -> tuple[Any, tuple[int, ...]]:
    """Load ``args.run_dir`` (``--checkpoint``, ``--threads``), a language model, and check it
    has master gates."""
    from treelm.run import open_run
    from treelm.syntax.levels import onlstm_layers

    run = open_run(args, expect="lm")
    return run, onlstm_layers(run.model)


# ----------------------------------------------------------------------------- parse
def cmd_parse(args: argparse.Namespace) -> int:
    """induce constituency trees with a trained ON-LSTM language model

    Print the binary tree read off an ON-LSTM language model for each sentence (Shen et al. 2019,
    Sec. 5.2): every sentence is read alone as <eos> w1 .. wn <eos> and split top-down at the words
    with the highest master-forget-gate level d_f of one layer. Input: the SENTENCE argument,
    --input (one sentence per line), or stdin (SENTENCE absent or '-'); words are
    whitespace-separated unless --segment jieba, and a run trained on Chinese text cuts what its
    vocabulary lacks with jieba and converts it to its script (--segment). Output: one line per
    sentence (brackets, json) or one drawing per sentence (ascii); an empty input line gives an
    empty output line. json objects hold the tokens, the positions of out-of-vocabulary words and,
    per layer, the tree (nested lists) and the levels df, di. A translation run whose encoder has
    ON-LSTM layers gives source-side trees: each source sentence is read by the run's source
    tokenizer (BPE pieces, or words) and by the encoder as the model reads sources (x1 .. xn
    <eos>), and the tree is over its pieces; layers are the encoder's.
    """
    from treelm.api.model import TreelmModel
    from treelm.run import open_run
    from treelm.syntax.report import format_parse
    from treelm.text.inputs import UnknownSymbols, source_name

    lines = input_lines(args.sentence, args.input)        # a missing file fails before the run
    model = TreelmModel(open_run(args, expect=("lm", "translation")))
    layers, style = tree_defaults("parse", model, args)
    policy = UnknownSymbols(args.unk)
    out: TextIO = sys.stdout
    try:
        for text, lv in model.levels_stream(lines, direction=args.direction, unk=policy,
                                            where=source_name(args.input),
                                            batch_size=args.batch_size, segment=args.segment,
                                            normalize=args.normalize,
                                            single=args.sentence not in (None, "-")):
            out.write(format_parse(lv.tokens, lv, layers, args.format, style, text) + "\n")
            out.flush()
    except BrokenPipeError:             # e.g. `treelm parse ... | head`: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    policy.report()
    return 0


def add_parse(sub: Any) -> argparse.ArgumentParser:
    p = add_verb(sub, "parse", cmd_parse, epilog=PARSE_EPILOG)
    add_run_and_sentence(p, "read sentences from stdin")
    p.add_argument("--input", metavar="FILE",
                   help="read sentences from this file, one per line")
    p.add_argument("--layer", metavar="K|all", type=LayerArg(),
                   help="1-based layer whose levels make the tree, or 'all' (default: the "
                   "layer the run chose on dev trees, else the last-but-one ON-LSTM layer; the "
                   "only one for a 1-layer model)")
    p.add_argument("--format", choices=FORMATS, default="brackets",
                   help="brackets (default): ((the cat) sat); json: one object per line; "
                   "ascii: a drawing")
    add_direction_option(p)
    add_text_options(p)
    add_model_options(p)
    return p


# ----------------------------------------------------------------------------- eval-parse
def cmd_eval_parse(args: argparse.Namespace) -> int:
    """unlabeled parsing F1 of a run's ON-LSTM layers, or of a file of trees, against a treebank

    Score the trees read off every ON-LSTM layer (or --layer K) against gold Penn-Treebank trees,
    next to the trivial baselines, as in Table 2 of Shen et al. (2019): sentence-level F1 (the
    paper's number) and corpus-level F1, per-label recall, mean word depth and tree height. Gold
    trees get the ON-LSTM/PRPN preprocessing (punctuation and empty elements removed, lower-case,
    digits -> N); --max-len 10 on the whole WSJ gives WSJ10. The Sinica treebanks (Chinese) get
    the same without case or digit mapping. --trees FILE scores any parser's trees the same way
    (with or without RUN_DIR; repeatable): one bracketed tree a line, in the treebank's order,
    with or without labels, whose leaves are the sentence's words as preprocessed (a line that
    differs is an error naming it and the first differing word; see docs/syntax.md); 'treelm
    parse RUN --input SENTENCES' writes such a file. Without RUN_DIR or --trees, --baseline
    scores baselines alone.
    On a dev treebank (nltk-dev, sinica-dev) the run keeps the layer of the highest sentence F1
    (with an earlier run of the other --style: the rule too) as the default of parse, plot and
    serve for the checkpoint scored (trees.json; said on stderr); a test treebank or a file
    never chooses.
    """
    from treelm.syntax.report import parsing_report

    if args.run_dir is None and not args.baseline and not args.trees:
        raise TreelmError("eval-parse needs RUN_DIR, --trees FILE, or --baseline to score "
                          "baselines alone")
    if args.run_dir is None and args.layer is not None:
        raise TreelmError("--layer needs RUN_DIR")
    golds = trees = None
    if args.trees:          # read and checked before a run is loaded
        golds, trees = tree_files(args.trees, args.treebank, args.max_len, args.match,
                                  "eval-parse")
    run = layers = None
    if args.run_dir is not None:
        run, available = _open_run(args)
        layers = parse_layer(args.layer or "all", available)
    # labels asked for are checked against the gold trees before any tree is scored; the
    # defaults are not (the table leaves out a column the treebank lacks)
    report = parsing_report(args.treebank, args.max_len, run=run, layers=layers,
                            checkpoint=args.checkpoint, style=args.style,
                            baselines=baseline_names(args.baseline, args.no_baselines,
                                                     args.style),
                            seeds=range(args.seeds), batch_size=args.batch_size, unk=args.unk,
                            labels=args.labels, trees=trees, golds=golds)
    print_report(report, args.format, args.labels)
    if run is not None:
        record_choice(run, report, args.checkpoint)
    return 0


def add_eval_parse(sub: Any) -> argparse.ArgumentParser:
    p = add_verb(sub, "eval-parse", cmd_eval_parse, epilog=EVAL_EPILOG)
    p.add_argument("run_dir", nargs="?", metavar="RUN_DIR",
                   help="a trained run with ON-LSTM layers (optional with --trees or --baseline)")
    p.add_argument("--trees", action="append", metavar="FILE",
                   help="score the trees of FILE (repeatable): one bracketed tree a line, for "
                   "every sentence of the treebank in its order (or for those of <= --max-len "
                   "words), leaves the preprocessed words, labels or none: ((the cat) sat), "
                   "(S (NP the cat) (VP sat))")
    p.add_argument("--treebank", required=True,
                   metavar="nltk-dev|nltk-test|nltk|sinica-dev|sinica-test|sinica|PATH",
                   help="'nltk' (the NLTK WSJ sample found through NLTK_DATA; nothing is "
                   "downloaded), 'nltk-dev' or 'nltk-test' (its files wsj_0001-0099, to choose "
                   "a layer on, or wsj_0100-0199, to report on), 'sinica', 'sinica-dev' or "
                   "'sinica-test' (the Sinica Treebank sample of Chinese, through NLTK_DATA, and "
                   "its fixed dev and test parts: docs/syntax-zh.md), or a .mrg file, directory "
                   "of .mrg files or glob")
    p.add_argument("--max-len", type=Number(int, at_least=1),
                   help="keep sentences of at most this many words after preprocessing "
                   "(default: all)")
    p.add_argument("--layer", metavar="K|all", type=LayerArg(),
                   help="layer(s) to score (default all)")
    p.add_argument("--baseline", action="append", choices=[*BASELINE_NAMES, "control", "all"],
                   help="baseline(s) to score (repeatable; default with RUN_DIR: all): left-, "
                   "right-branching, balanced, random trees, and control: random levels "
                   "through the --style rule, what the rule gives by itself")
    p.add_argument("--no-baselines", action="store_true", help="score the model only")
    p.add_argument("--seeds", type=Number(int, at_least=1), default=5,
                   help="random-tree runs, seeds 0..N-1 (default 5): mean±std")
    p.add_argument("--labels", type=label_list,
                   help=f"label recall columns of the table (default {DEFAULT_LABELS}; for the "
                   f"Sinica treebanks {','.join(SINICA_LABELS)}); --format json has every label")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table (default) or one JSON object (scores as fractions)")
    add_match_option(p)
    add_model_options(p, run_style=False)
    return p


# ----------------------------------------------------------------------------- plot
def _levels_of(args: argparse.Namespace, verb: str) -> tuple[Any, int, str, Any]:
    """The run, the layer, the rule and the levels of the one sentence ``args.sentence`` (or a
    line of stdin), read by :meth:`~treelm.api.model.TreelmModel.levels_stream` as ``treelm
    parse`` reads it; unknown words follow --unk (:mod:`treelm.text.inputs`)."""
    from treelm.api.model import TreelmModel
    from treelm.run import open_run
    from treelm.text.inputs import UnknownSymbols

    model = TreelmModel(open_run(args, expect=("lm", "translation")))
    (layer,), style = tree_defaults(verb, model, args, allow_all=False)
    lines = [t for t in input_lines(args.sentence, None) if t.strip()]
    if len(lines) != 1:
        raise TreelmError(f"give exactly one sentence (got {len(lines)})")
    policy = UnknownSymbols(args.unk)
    _, lv = next(model.levels_stream(lines, direction=args.direction, unk=policy,
                                     segment=args.segment, normalize=args.normalize,
                                     single=True))
    policy.report()
    return model.run, layer, style, lv


def cmd_plot(args: argparse.Namespace) -> int:
    """heat map of a sentence's ON-LSTM levels with the induced tree

    Draw the master-forget-gate levels d_f of every ON-LSTM layer for one sentence (or d_i with
    --gate input) as a heat map (rows: layers from 1 at the top; columns: words), with the tree
    induced from one layer drawn above (cf. Shen et al. 2019, Fig. 3). Words outside the vocabulary
    are marked with *. The format follows the file extension (PNG, SVG, PDF). A translation run
    draws its encoder's levels over the source pieces.
    """
    from treelm.syntax.render import plot_sentence_levels

    check_output(args.output, IMAGE_SUFFIXES, "plot")
    run, layer, style, lv = _levels_of(args, "plot")
    plot_sentence_levels(lv, args.output, layer, gate=args.gate, scale=args.scale,
                         style=style, with_tree=not args.no_tree, title=args.title,
                         run_name=run.path.name)
    print(args.output)
    return 0


def add_plot(sub: Any) -> argparse.ArgumentParser:
    p = add_verb(sub, "plot", cmd_plot, epilog=PLOT_EPILOG)
    add_run_and_sentence(p, "one line from stdin")
    p.add_argument("-o", "--output", required=True, metavar="FILE.png", help="image to write")
    p.add_argument("--layer", metavar="K", type=LayerArg(allow_all=False),
                   help="layer whose d_f makes the tree (default: the run's choice on dev "
                   "trees, else the last-but-one)")
    p.add_argument("--gate", choices=["forget", "input"], default="forget",
                   help="heat map of d_f (forget, default) or of d_i (input)")
    p.add_argument("--scale", choices=["layer", "shared"], default="layer",
                   help="colours: min-max scaled per layer (layer, default: what each layer's "
                   "tree reads; the rows are labelled with their [min, max]) or one scale for "
                   "all layers (shared)")
    p.add_argument("--no-tree", action="store_true", help="draw the heat map only")
    p.add_argument("--title", help="figure title ('' for none)")
    add_direction_option(p)
    add_text_options(p)
    add_model_options(p, batch=False)
    return p


def cmd_plot_tree(args: argparse.Namespace) -> int:
    """draw a tree (given, or induced from a sentence) as an image

    Draw one binary or n-ary tree as a dendrogram image. The tree is given in brackets, ((the cat)
    (sat down)), as printed by 'treelm parse --format brackets', or with --format json as nested
    lists, [["the","cat"],["sat","down"]]; TREE absent or '-' reads it from stdin. With --run
    RUN_DIR the argument is a sentence instead, parsed by the run's model as in 'treelm parse'. The
    image format follows the file extension.
    """
    from treelm.syntax.render import plot_tree
    from treelm.syntax.trees import read_bracket_tree, read_json_tree

    check_output(args.output, IMAGE_SUFFIXES, "plot")
    if args.run:
        if args.format != "brackets":
            raise TreelmError("--format is the given tree's; with --run the argument is a "
                              "sentence")
        args.run_dir, args.sentence = args.run, args.tree
        _, layer, style, lv = _levels_of(args, "plot-tree")
        tree = lv.tree(layer, style)
    else:
        if args.layer is not None or args.direction != "forward":
            raise TreelmError(f"{'--layer' if args.layer is not None else '--direction'} "
                              "needs --run RUN_DIR")
        text = "\n".join(input_lines(args.tree, None, "the tree"))
        tree = read_json_tree(text) if args.format == "json" else read_bracket_tree(text)
    plot_tree(tree, args.output, title=args.title or None)
    print(args.output)
    return 0


def add_plot_tree(sub: Any) -> argparse.ArgumentParser:
    p = add_verb(sub, "plot-tree", cmd_plot_tree, epilog=PLOT_TREE_EPILOG)
    p.add_argument("tree", nargs="?", metavar="TREE|SENTENCE",
                   help="the tree (or, with --run, the sentence); default or '-': stdin")
    p.add_argument("-o", "--output", required=True, metavar="FILE.png", help="image to write")
    p.add_argument("--format", choices=FORMATS[:2], default="brackets",
                   help="the format of TREE, as 'treelm parse --format' prints it: brackets "
                   "(default) or json (nested lists)")
    p.add_argument("--run", metavar="RUN_DIR",
                   help="induce the tree of the sentence with this run's ON-LSTM")
    p.add_argument("--layer", metavar="K", type=LayerArg(allow_all=False),
                   help="with --run: the layer (default: the run's choice on dev trees, else "
                   "the last-but-one)")
    p.add_argument("--title", help="figure title")
    add_direction_option(p)
    add_text_options(p)
    add_model_options(p, batch=False)
    p.set_defaults(sentence=None)
    return p


__all__ = ["LayerArg", "add_eval_parse", "add_parse", "add_plot", "add_plot_tree", "label_list",
           "parse_layer"]
