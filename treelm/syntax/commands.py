"""``treelm parse``, ``eval-parse``, ``plot`` and ``plot-tree``: unsupervised syntax from ON-LSTM.

Trees are read off a trained ON-LSTM language model as in Shen et al., "Ordered Neurons"
(ICLR 2019), Sec. 5.2: per word the master-forget-gate level ``d_f`` of one layer
(:mod:`treelm.syntax.levels`, each sentence read alone as ``<eos> w_1 … w_n <eos>``), then the
greedy top-down split of :func:`treelm.syntax.trees.build_tree`. ``eval-parse`` prints the
numbers of the paper's Table 2 (unlabeled F1 per layer and for the trivial baselines, per-label
recall, tree depth) against a Penn-Treebank-style gold corpus.

Layers are numbered from 1 (the layer after the embedding). The default layer is the last-but-one
ON-LSTM layer (layer 2 of the paper's 3-layer model, the one the official evaluation reads), or
the only one of a 1-layer model.

The ``add_*`` functions register the sub-commands on ``treelm``'s argparse sub-parsers; heavy
modules (torch, matplotlib) are imported only when a command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TextIO

from treelm.errors import TreelmError

STYLES = ("official", "split")
FORMATS = ("brackets", "json", "ascii")
BASELINE_NAMES = {"left": "left_branching", "right": "right_branching",
                  "balanced": "balanced", "random": "random"}
BASELINE_TITLES = {"random": "random trees", "balanced": "balanced trees",
                   "left_branching": "left branching", "right_branching": "right branching"}
DEFAULT_LABELS = "NP,VP,PP,ADJP,SBAR,ADVP"
_CHUNK = 2048   # sentences read (and parsed) at a time from a file or stdin

PARSE_EPILOG = """examples:
  treelm parse runs/onlstm "the cat sat on the mat"
  treelm parse runs/onlstm "the cat sat on the mat" --format ascii --layer all
  treelm parse runs/onlstm --file sentences.txt --format json > trees.jsonl
  echo "苹果 的 颜色 是 什么" | treelm parse runs/zh-onlstm
  treelm parse runs/zh-onlstm "苹果的颜色是什么" --segment jieba
"""

EVAL_EPILOG = """examples:
  treelm eval-parse runs/onlstm --treebank nltk --max-len 10           # WSJ10 of the NLTK sample
  treelm eval-parse runs/onlstm --treebank ptb/wsj/23 --json           # WSJ test, all lengths
  treelm eval-parse --baseline all --treebank nltk --max-len 10        # no model needed
"""

PLOT_EPILOG = """example:
  treelm plot runs/onlstm "the cat sat on the mat" -o levels.png --layer 2
"""

PLOT_TREE_EPILOG = """examples:
  treelm plot-tree "((the cat) (sat (on (the mat))))" -o tree.png
  treelm plot-tree --json '[["the","cat"],["sat",["on",["the","mat"]]]]' -o tree.png
  treelm parse runs/onlstm "the cat sat" --format brackets | treelm plot-tree - -o tree.png
  treelm plot-tree --run runs/onlstm "the cat sat on the mat" -o tree.png --layer 2
"""


# ----------------------------------------------------------------------------- helpers
def _wrap(text: str) -> str:
    return textwrap.fill(text, 79)


def _open_run(args: argparse.Namespace) -> tuple[Any, tuple[int, ...]]:
    """Load ``args.run_dir`` (``--checkpoint``, ``--threads``) and check it has master gates."""
    from treelm.run import open_run
    from treelm.syntax.levels import onlstm_layers

    run = open_run(args, expect="lm")
    return run, onlstm_layers(run.model)


def parse_layer(text: str | None, layers: Sequence[int], allow_all: bool = True) -> list[int]:
    """``--layer`` value -> the 1-based layers to use (``None``: the default layer)."""
    from treelm.syntax.levels import default_layer

    if text is None:
        return [default_layer(layers)]
    if text == "all":
        if not allow_all:
            raise TreelmError("--layer all is not possible here; give one layer number")
        return list(layers)
    try:
        k = int(text)
    except ValueError:
        raise TreelmError(f"--layer must be a layer number or 'all', got {text!r}") from None
    if k not in layers:
        raise TreelmError(f"--layer {k}: this model's ON-LSTM layers are "
                          f"{', '.join(map(str, layers))}")
    return [k]


def tokenize(text: str, tokenizer: Any, segment: str = "none",
             normalize: bool = False) -> list[str]:
    """The tokens of one input line, read by the run's tokenizer (:mod:`treelm.text`).

    ``segment="jieba"`` reads a word-level run's input with the jieba tokenizer instead (Chinese
    text without spaces). ``normalize`` applies the PTB preprocessing of the treebank reader
    (lower-case, digit runs -> ``N``) to every token.
    """
    if segment == "jieba":
        from treelm.text import make_tokenizer

        if tokenizer.level != "word":
            raise TreelmError("--segment jieba makes words; this run's model reads characters")
        tokenizer = make_tokenizer("jieba")
    tokens = tokenizer.encode_line(text.strip("\r\n"))
    if normalize:
        from treelm.data.treebank import normalize_word

        tokens = [normalize_word(t) for t in tokens]
    return tokens


def _input_lines(sentence: str | None, file: str | None) -> Iterator[str]:
    if sentence is not None and sentence != "-":
        if file:
            raise TreelmError("give a sentence or --file, not both")
        yield sentence
        return
    if file:
        try:
            with open(file, encoding="utf-8") as f:
                yield from (line.rstrip("\r\n") for line in f)
        except OSError as e:
            raise TreelmError(f"{file}: cannot read ({e.strerror})") from None
        except UnicodeDecodeError as e:
            raise TreelmError(f"{file}: not UTF-8 text ({e.reason})") from None
        return
    yield from (line.rstrip("\r\n") for line in sys.stdin)


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _rounded(values: Any) -> list[float]:
    return [round(float(v), 6) for v in values]


def _check_positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise TreelmError(f"{name} must be >= 1, got {value}")


def _add_model_options(p: argparse.ArgumentParser, batch: bool = True) -> None:
    from treelm.run import add_run_options

    add_run_options(p)
    p.add_argument("--unk", choices=["map", "error"], default="map",
                   help="a word outside the vocabulary: read it as <unk> (map, default) or stop "
                   "with an error")
    p.add_argument("--style", choices=STYLES, default="official",
                   help="tree rule: official (default; the highest-level word opens a "
                   "constituent, ON-LSTM test_phrase_grammar.py) or split (span split before "
                   "the highest-level word)")
    if batch:
        p.add_argument("--batch-size", type=int, default=256,
                       help="sentences per forward pass (default 256)")


def _add_text_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--segment", choices=["none", "jieba"], default="none",
                   help="word segmentation of the input: none (default; whitespace-separated "
                   "words) or jieba for Chinese (needs pip install 'treelm[zh]')")
    p.add_argument("--normalize", action="store_true",
                   help="PTB preprocessing of every word: lower-case, digit runs -> N")


# ----------------------------------------------------------------------------- parse
def _format_parse(tokens: list[str], lv: Any, layers: list[int], fmt: str, style: str,
                  text: str) -> str:
    from treelm.syntax.trees import ascii_tree, tree_to_brackets, tree_to_json

    if not tokens:
        if fmt == "json":
            return json.dumps({"sentence": text, "tokens": [], "unknown": [], "parses": []},
                              ensure_ascii=False)
        return ""
    trees = {k: lv.tree(k, style) for k in layers}
    if fmt == "json":
        parses = []
        for k in layers:
            row = lv.row(k)
            parses.append(
                f'{{"layer": {k}, "tree": {tree_to_json(trees[k])}, '
                f'"df": {json.dumps(_rounded(lv.df[row]))}, '
                f'"di": {json.dumps(_rounded(lv.di[row]))}}}'
            )
        head = json.dumps({"sentence": text, "tokens": tokens, "unknown": lv.unknown},
                          ensure_ascii=False)
        return head[:-1] + ', "parses": [' + ", ".join(parses) + "]}"
    if fmt == "brackets":
        if len(layers) == 1:
            return tree_to_brackets(trees[layers[0]])
        return "\n".join(f"layer {k}\t{tree_to_brackets(trees[k])}" for k in layers)
    blocks = [ascii_tree(trees[k]) for k in layers]
    if len(layers) > 1:
        blocks = [f"layer {k}:\n{b}" for k, b in zip(layers, blocks)]
    return "\n".join(blocks) + "\n"


def cmd_parse(args: argparse.Namespace) -> int:
    from treelm.syntax.levels import sentence_levels

    _check_positive("--batch-size", args.batch_size)
    run, available = _open_run(args)
    layers = parse_layer(args.layer, available)
    tokenizer = run.tokenizer
    unknown: dict[str, int] = {}
    out: TextIO = sys.stdout
    try:
        for chunk in _chunks(_input_lines(args.sentence, args.file), _CHUNK):
            tokens = [tokenize(t, tokenizer, args.segment, args.normalize) for t in chunk]
            if args.sentence not in (None, "-") and not tokens[0]:
                raise TreelmError("the sentence is empty")
            levels = sentence_levels(run.model, run.vocab, tokens, args.batch_size, args.unk)
            for text, toks, lv in zip(chunk, tokens, levels):
                for i in lv.unknown:
                    unknown[toks[i]] = unknown.get(toks[i], 0) + 1
                out.write(_format_parse(toks, lv, layers, args.format, args.style, text) + "\n")
            out.flush()
    except BrokenPipeError:             # e.g. `treelm parse ... | head`: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    if unknown:
        shown = ", ".join(repr(w) for w in list(unknown)[:8])
        more = f" and {len(unknown) - 8} more" if len(unknown) > 8 else ""
        print(f"treelm: note: {sum(unknown.values())} word(s) outside the vocabulary were read as "
              f"<unk>: {shown}{more}", file=sys.stderr)
    return 0


def add_parse(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "parse", help="induce constituency trees with a trained ON-LSTM language model",
        description=_wrap(
        "Print the binary tree read off an ON-LSTM language model for each sentence "
        "(Shen et al. 2019, Sec. 5.2): every sentence is read alone as <eos> w1 .. wn <eos> and "
        "split top-down at the words with the highest master-forget-gate level d_f of one layer. "
        "Input: the SENTENCE argument, --file (one sentence per line), or stdin (SENTENCE "
        "absent or '-'); words are whitespace-separated unless --segment jieba. Output: one "
        "line per sentence (brackets, json) or one drawing per sentence (ascii); an empty input "
        "line gives an empty output line. json objects hold the tokens, the positions of "
        "out-of-vocabulary words and, per layer, the tree (nested lists) and the levels df, di."),
        epilog=PARSE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", metavar="RUN_DIR", help="a trained run with ON-LSTM layers")
    p.add_argument("sentence", nargs="?", metavar="SENTENCE",
                   help="the sentence (default, or '-': read sentences from stdin)")
    p.add_argument("--file", help="read sentences from this file, one per line")
    p.add_argument("--layer", metavar="K|all",
                   help="1-based layer whose levels make the tree, or 'all' (default: the "
                   "last-but-one ON-LSTM layer; the only one for a 1-layer model)")
    p.add_argument("--format", choices=FORMATS, default="brackets",
                   help="brackets (default): ((the cat) sat); json: one object per line; "
                   "ascii: a drawing")
    _add_text_options(p)
    _add_model_options(p)
    p.set_defaults(func=cmd_parse)
    return p


# ----------------------------------------------------------------------------- eval-parse
def _random_details(golds: Sequence[Any], seeds: Sequence[int]) -> dict[str, Any]:
    """Mean per-label recall and depths of random trees over ``seeds``.

    Same draws as :func:`treelm.syntax.baselines.evaluate_baselines` (one
    ``numpy.random.default_rng(seed)`` per run, consumed sentence by sentence).
    """
    import numpy as np

    from treelm.syntax.baselines import random_tree
    from treelm.syntax.metrics import evaluate

    runs = []
    for seed in seeds:
        gen = np.random.default_rng(seed)
        runs.append(evaluate([random_tree(g.words, gen) for g in golds], golds))
    labels = sorted({k for r in runs for k in r["label_recall"]})
    return {
        "label_recall": {k: float(np.mean([r["label_recall"].get(k, 0.0) for r in runs]))
                         for k in labels},
        "mean_depth_pred": float(np.mean([r["mean_depth_pred"] for r in runs])),
        "mean_leaf_depth_pred": float(np.mean([r["mean_leaf_depth_pred"] for r in runs])),
    }


def run_baselines(golds: Sequence[Any], names: Sequence[str], seeds: Sequence[int]
                  ) -> dict[str, Any]:
    """The requested baselines (long names), scored by :mod:`treelm.syntax.baselines`."""
    from treelm.syntax.baselines import BASELINES, evaluate_baselines
    from treelm.syntax.metrics import evaluate

    out: dict[str, Any] = {}
    if "random" in names:
        out["random"] = evaluate_baselines(golds, seeds)["random"]
        out["random"].update(_random_details(golds, seeds))
    for name in names:
        if name != "random":
            out[name] = evaluate([BASELINES[name](g.words) for g in golds], golds)
    return {name: out[name] for name in ("random", "balanced", "left_branching",
                                         "right_branching") if name in out}


def evaluate_run(run: Any, golds: Sequence[Any], layers: Sequence[int], style: str,
                 batch_size: int, unk: str) -> tuple[dict[int, dict[str, Any]], int]:
    """``({layer: evaluate(...)}, number of out-of-vocabulary words)`` for a run's model."""
    from treelm.syntax.levels import sentence_levels
    from treelm.syntax.metrics import evaluate
    from treelm.syntax.trees import build_tree

    levels = sentence_levels(run.model, run.vocab, [g.words for g in golds], batch_size, unk)
    results = {}
    for k in layers:
        row = levels[0].row(k)
        trees = [build_tree(lv.df[row], g.words, style) for lv, g in zip(levels, golds)]
        results[k] = evaluate(trees, golds)
    return results, sum(len(lv.unknown) for lv in levels)


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f}"


def format_table(report: dict[str, Any], labels: Sequence[str]) -> str:
    """The eval-parse report as a text table in the shape of Table 2 of Shen et al. (2019)."""
    gold_counts = report.get("gold", {}).get("label_counts", {})
    labels = [k for k in labels if gold_counts.get(k, 0) > 0]
    header = ["", "sent F1", "corpus F1", "depth", "height", *labels]
    rows: list[list[str]] = []
    for name, res in report["baselines"].items():
        if name == "random":
            sf, cf = res["sentence_f1"], res["corpus_f1"]
            f1s = [f"{_pct(sf['mean'])}±{_pct(sf['std'])}", f"{_pct(cf['mean'])}±{_pct(cf['std'])}"]
            name = f"random trees ({len(res['seeds'])} seeds)"
        else:
            f1s = [_pct(res["sentence_f1"]), _pct(res["corpus_f1"])]
            name = BASELINE_TITLES[name]
        rows.append([name, *f1s, f"{res['mean_leaf_depth_pred']:.2f}",
                     f"{res['mean_depth_pred']:.2f}",
                     *(_pct(res["label_recall"].get(k, 0.0)) for k in labels)])
    best = report.get("best_layer")
    for k, res in report.get("layers", {}).items():
        mark = " *" if int(k) == best and len(report["layers"]) > 1 else ""
        rows.append([f"ON-LSTM layer {k}{mark}", _pct(res["sentence_f1"]), _pct(res["corpus_f1"]),
                     f"{res['mean_leaf_depth_pred']:.2f}", f"{res['mean_depth_pred']:.2f}",
                     *(_pct(res["label_recall"].get(k2, 0.0)) for k2 in labels)])
    gold = report["gold"]
    rows.append(["gold trees", "", "", f"{gold['mean_leaf_depth']:.2f}",
                 f"{gold['mean_depth']:.2f}", *(str(gold_counts[k]) for k in labels)])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:]))]).rstrip()

    limit = f" of <= {report['max_len']} words" if report["max_len"] is not None else ""
    title = [f"Unsupervised constituency parsing: {report['treebank']}, "
             f"{report['n_sentences']} sentences{limit}"]
    if report.get("run"):
        oov = report["oov_words"] / max(report["n_words"], 1)
        title.append(f"model: {report['run']} ({report['checkpoint']} checkpoint), tree style "
                     f"{report['style']}, {_pct(oov)}% of words read as <unk>")
    rule = "-" * len(line(header))
    notes = ["F1 (%): unlabeled, without the whole-sentence span; sent = mean over sentences "
             "(the paper's),",
             "corpus = micro-averaged. depth: mean word depth (the paper's Depth); height: mean "
             "tree height;",
             "label columns: % of gold constituents found (gold row: their number)."]
    if best is not None and len(report["layers"]) > 1:
        notes.append("* best layer by sentence F1.")
    return "\n".join([*title, rule, line(header), rule, *(line(r) for r in rows), rule, *notes])


def cmd_eval_parse(args: argparse.Namespace) -> int:
    from treelm.data.treebank import TreebankError, load_treebank
    from treelm.syntax.metrics import label_recall, mean_depth

    _check_positive("--batch-size", args.batch_size)
    _check_positive("--seeds", args.seeds)
    if args.max_len is not None and args.max_len < 1:
        raise TreelmError(f"--max-len must be >= 1, got {args.max_len}")
    if args.run_dir is None and not args.baseline:
        raise TreelmError("eval-parse needs RUN_DIR, or --baseline to score baselines alone")
    if args.run_dir is None and args.layer is not None:
        raise TreelmError("--layer needs RUN_DIR")
    run = layers = None
    if args.run_dir is not None:
        run, available = _open_run(args)
        layers = parse_layer(args.layer or "all", available)
    try:
        golds = load_treebank(args.treebank, max_len=args.max_len)
    except TreebankError as e:
        raise TreelmError(str(e)) from None
    if not golds:
        limit = f" of <= {args.max_len} words" if args.max_len else ""
        raise TreelmError(f"{args.treebank}: no sentences{limit} to evaluate")
    if not args.baseline:
        names = list(BASELINE_NAMES.values())
    elif "all" in args.baseline:
        names = list(BASELINE_NAMES.values())
    else:
        names = [BASELINE_NAMES[b] for b in args.baseline]
    if args.no_baselines:
        names = []
    seeds = list(range(args.seeds))
    depth, leaf_depth = mean_depth(g.tree for g in golds)
    gold_counts = {k: t for k, (_, t) in label_recall([g.tree for g in golds], golds).items()}
    report: dict[str, Any] = {
        "treebank": args.treebank,
        "max_len": args.max_len,
        "n_sentences": len(golds),
        "n_words": sum(len(g.words) for g in golds),
        "style": args.style,
        "run": None,
        "checkpoint": None,
        "oov_words": 0,
        "layers": {},
        "best_layer": None,
        "baselines": run_baselines(golds, names, seeds),
        "gold": {"mean_depth": depth, "mean_leaf_depth": leaf_depth, "label_counts": gold_counts},
    }
    if run is not None:
        results, oov = evaluate_run(run, golds, layers, args.style, args.batch_size, args.unk)
        report.update(run=str(run.path), checkpoint=args.checkpoint, oov_words=oov,
                      layers={str(k): v for k, v in results.items()},
                      best_layer=max(results, key=lambda k: results[k]["sentence_f1"]))
    if args.json:
        print(json.dumps(report))
    else:
        print(format_table(report, [s for s in args.labels.split(",") if s]))
    return 0


def add_eval_parse(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "eval-parse", help="unlabeled parsing F1 of a run's ON-LSTM layers against a treebank",
        description=_wrap(
        "Score the trees read off every ON-LSTM layer (or --layer K) against gold "
        "Penn-Treebank trees, next to the trivial baselines, as in Table 2 of Shen et al. "
        "(2019): sentence-level F1 (the paper's number) and corpus-level F1, per-label recall, "
        "mean word depth and tree height. Gold trees get the ON-LSTM/PRPN preprocessing "
        "(punctuation and empty elements removed, lower-case, digits -> N); --max-len 10 on "
        "the whole WSJ gives WSJ10. Without RUN_DIR, --baseline scores baselines alone."),
        epilog=EVAL_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", nargs="?", metavar="RUN_DIR",
                   help="a trained run with ON-LSTM layers (optional with --baseline)")
    p.add_argument("--treebank", required=True, metavar="PATH|nltk",
                   help=".mrg file, directory of .mrg files, glob, or 'nltk' (the NLTK WSJ "
                   "sample found through NLTK_DATA; nothing is downloaded)")
    p.add_argument("--max-len", type=int,
                   help="keep sentences of at most this many words after preprocessing "
                   "(default: all)")
    p.add_argument("--layer", metavar="K|all", help="layer(s) to score (default all)")
    p.add_argument("--baseline", action="append", choices=[*BASELINE_NAMES, "all"],
                   help="baseline(s) to score (repeatable; default with RUN_DIR: all)")
    p.add_argument("--no-baselines", action="store_true", help="score the model only")
    p.add_argument("--seeds", type=int, default=5,
                   help="random-tree runs, seeds 0..N-1 (default 5): mean±std")
    p.add_argument("--labels", default=DEFAULT_LABELS,
                   help=f"label recall columns of the table (default {DEFAULT_LABELS}); "
                   "--json has every label")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (scores as fractions) instead of the table")
    _add_model_options(p)
    p.set_defaults(func=cmd_eval_parse)
    return p


# ----------------------------------------------------------------------------- plot
def _one_sentence(args: argparse.Namespace, tokenizer: Any) -> tuple[str, list[str]]:
    lines = [t for t in _input_lines(args.sentence, None) if t.strip()]
    if len(lines) != 1:
        raise TreelmError(f"give exactly one sentence (got {len(lines)})")
    tokens = tokenize(lines[0], tokenizer, args.segment, args.normalize)
    if not tokens:
        raise TreelmError("the sentence is empty")
    return lines[0], tokens


def _levels_of(args: argparse.Namespace) -> tuple[Any, list[str], int, Any]:
    from treelm.syntax.levels import sentence_levels

    run, available = _open_run(args)
    layer = parse_layer(args.layer, available, allow_all=False)[0]
    _, tokens = _one_sentence(args, run.tokenizer)
    lv = sentence_levels(run.model, run.vocab, [tokens], unk=args.unk)[0]
    return run, tokens, layer, lv


def scale_rows(data: Any) -> Any:
    """Min-max scale every row to [0, 1] (a constant row becomes 0.5).

    A tree reads only the order of the levels within its layer, so this shows what each layer's
    parse sees even when layers live on different ranges.
    """
    import numpy as np

    data = np.asarray(data, dtype=np.float64)
    lo, hi = data.min(axis=1, keepdims=True), data.max(axis=1, keepdims=True)
    span = hi - lo
    return np.where(span > 0, (data - lo) / np.where(span > 0, span, 1.0), 0.5)


def cmd_plot(args: argparse.Namespace) -> int:
    from treelm.syntax.render import plot_levels

    run, tokens, layer, lv = _levels_of(args)
    symbol = "d_f" if args.gate == "forget" else "d_i"
    data = lv.df if args.gate == "forget" else lv.di
    rows = [f"layer {k}" for k in lv.layers]
    caption = f"${symbol}$"
    if args.scale == "layer":
        rows = [f"{name}  [{lo:.3f}, {hi:.3f}]"
                for name, lo, hi in zip(rows, data.min(axis=1), data.max(axis=1))]
        caption = f"${symbol}$, min-max scaled per layer"
        data = scale_rows(data)
    tree = None if args.no_tree else lv.tree(layer, args.style)
    title = args.title
    if title is None:
        gate = "master-forget-gate" if args.gate == "forget" else "master-input-gate"
        name = run.path.name.replace("$", r"\$")
        title = f"{name}: {gate} levels ${symbol}$" + ("" if args.no_tree else
                                                       f"; tree from layer {layer}")
    labels = [t if i not in lv.unknown else f"{t}*" for i, t in enumerate(tokens)]
    plot_levels(labels, data, tree, args.output, title=title or None, row_labels=rows,
                colorbar_label=caption)
    print(args.output)
    return 0


def add_plot(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "plot", help="heat map of a sentence's ON-LSTM levels with the induced tree",
        description=_wrap("Draw the master-forget-gate levels d_f of every ON-LSTM layer for one "
        "sentence (or d_i with --gate input) as a heat map (rows: layers from 1 at the top; "
        "columns: words), with the "
        "tree induced from one layer drawn above (cf. Shen et al. 2019, Fig. 3). Words outside "
        "the vocabulary are marked with *. The format follows the file extension (PNG, SVG, "
        "PDF)."),
        epilog=PLOT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", metavar="RUN_DIR", help="a trained run with ON-LSTM layers")
    p.add_argument("sentence", nargs="?", metavar="SENTENCE",
                   help="the sentence (default, or '-': one line from stdin)")
    p.add_argument("-o", "--output", required=True, metavar="FILE.png", help="image to write")
    p.add_argument("--layer", metavar="K",
                   help="layer whose d_f makes the tree (default: the last-but-one)")
    p.add_argument("--gate", choices=["forget", "input"], default="forget",
                   help="heat map of d_f (forget, default) or of d_i (input)")
    p.add_argument("--scale", choices=["layer", "shared"], default="layer",
                   help="colours: min-max scaled per layer (layer, default: what each layer's "
                   "tree reads; the rows are labelled with their [min, max]) or one scale for "
                   "all layers (shared)")
    p.add_argument("--no-tree", action="store_true", help="draw the heat map only")
    p.add_argument("--title", help="figure title ('' for none)")
    _add_text_options(p)
    _add_model_options(p, batch=False)
    p.set_defaults(func=cmd_plot)
    return p


def read_bracket_tree(text: str) -> Any:
    """``"((the cat) (sat down))"`` -> ``[["the", "cat"], ["sat", "down"]]`` (iterative).

    Leaves are maximal runs of characters other than whitespace and brackets; a bracket with a
    single child is that child; a bare word is a one-leaf tree.

    Raises:
        TreelmError: unbalanced or empty brackets, several trees, or no leaf at all.
    """
    import re

    tokens = re.findall(r"\(|\)|[^\s()]+", text)
    if not tokens:
        raise TreelmError("the tree is empty")
    stack: list[list[Any]] = [[]]
    for tok in tokens:
        if tok == "(":
            stack.append([])
        elif tok == ")":
            if len(stack) == 1:
                raise TreelmError("malformed tree: more ')' than '('")
            node = stack.pop()
            if not node:
                raise TreelmError("malformed tree: empty brackets ()")
            stack[-1].append(node[0] if len(node) == 1 else node)
        else:
            stack[-1].append(tok)
    if len(stack) > 1:
        raise TreelmError(f"malformed tree: {len(stack) - 1} unclosed '('")
    if len(stack[0]) != 1:
        raise TreelmError(f"malformed tree: {len(stack[0])} trees side by side; wrap them in "
                          "one pair of brackets")
    return stack[0][0]


def _check_json_tree(tree: Any) -> Any:
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            if not node:
                raise TreelmError("malformed JSON tree: empty list")
            todo.extend(node)
        elif not isinstance(node, (str, int, float)) or isinstance(node, bool):
            raise TreelmError(f"malformed JSON tree: leaf {node!r} is not a string or number")
    return tree


def cmd_plot_tree(args: argparse.Namespace) -> int:
    from treelm.syntax.render import plot_tree

    if args.run:
        if args.json:
            raise TreelmError("--json reads a tree; with --run the argument is a sentence")
        args.run_dir, args.sentence = args.run, args.tree
        _, _, layer, lv = _levels_of(args)
        tree = lv.tree(layer, args.style)
    else:
        if args.layer is not None:
            raise TreelmError("--layer needs --run RUN_DIR")
        text = "\n".join(_input_lines(args.tree, None))
        if args.json:
            try:
                tree = _check_json_tree(json.loads(text))
            except json.JSONDecodeError as e:
                raise TreelmError(f"malformed JSON tree: {e}") from None
        else:
            tree = read_bracket_tree(text)
    plot_tree(tree, args.output, title=args.title or None)
    print(args.output)
    return 0


def add_plot_tree(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "plot-tree", help="draw a tree (given, or induced from a sentence) as an image",
        description=_wrap("Draw one binary or n-ary tree as a dendrogram image. The tree is given "
        "in brackets, ((the cat) (sat down)), as printed by 'treelm parse --format brackets', "
        "or with --json as nested lists, [[\"the\",\"cat\"],[\"sat\",\"down\"]]; TREE absent or "
        "'-' reads it from stdin. With --run RUN_DIR the argument is a sentence instead, parsed "
        "by the run's model as in 'treelm parse'. The format follows the file extension."),
        epilog=PLOT_TREE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tree", nargs="?", metavar="TREE|SENTENCE",
                   help="the tree (or, with --run, the sentence); default or '-': stdin")
    p.add_argument("-o", "--output", required=True, metavar="FILE.png", help="image to write")
    p.add_argument("--json", action="store_true", help="TREE is JSON nested lists")
    p.add_argument("--run", metavar="RUN_DIR",
                   help="induce the tree of the sentence with this run's ON-LSTM")
    p.add_argument("--layer", metavar="K", help="with --run: the layer (default last-but-one)")
    p.add_argument("--title", help="figure title")
    _add_text_options(p)
    _add_model_options(p, batch=False)
    p.set_defaults(func=cmd_plot_tree, sentence=None)
    return p


__all__ = ["add_eval_parse", "add_parse", "add_plot", "add_plot_tree", "format_table",
           "parse_layer", "read_bracket_tree", "run_baselines", "tokenize"]
