"""What the syntax verbs report: the parsing-F1 report of ``eval-parse`` and its table, and the
line ``parse`` prints per sentence.

:func:`parsing_report` gathers the numbers of Table 2 of Shen et al., "Ordered Neurons" (ICLR
2019) for one treebank: the unlabeled F1, per-label recall and depths of the trees read off a
run's ON-LSTM layers (Sec. 5.2: master-forget-gate levels of each sentence read alone, then the
greedy top-down split of :func:`treelm.syntax.trees.build_tree`) and of the trivial baselines
(:mod:`treelm.syntax.baselines`), with the gold trees' depths and label counts. ``treelm
eval-parse`` prints that dict (``--format json``) or :func:`format_table` of it; the benchmarks
call the same function, so a recorded figure is the one the command prints.

torch is imported only when a run is scored, so baselines-only reports stay light.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from treelm.data.treebank import (
    SINICA_NAMES,
    GoldTree,
    TreebankError,
    TreebankNotFound,
    load_treebank,
    normalize_word,
)
from treelm.errors import TreelmError
from treelm.syntax.baselines import DEFAULT_BASELINES, evaluate_baselines
from treelm.syntax.metrics import evaluate, label_recall, mean_depth
from treelm.syntax.readings import level_trees, read_parts
from treelm.syntax.tree_files import Respelt, treebank_tree_file
from treelm.syntax.trees import Tree, ascii_tree, tree_to_brackets, tree_to_json

#: Label-recall columns of the table by default (the paper's Table 2 shows these six).
TABLE_LABELS = ("NP", "VP", "PP", "ADJP", "SBAR", "ADVP")
#: The Sinica Treebank's most frequent phrase categories (GP: a phrase headed by a localiser).
SINICA_LABELS = ("S", "NP", "VP", "PP", "GP")
#: Row titles of the baselines in the table.
BASELINE_TITLES = {"random": "random trees", "balanced": "balanced trees",
                   "balanced_left": "balanced trees (left-heavy)",
                   "left_branching": "left branching", "right_branching": "right branching",
                   "random_levels_official": "random levels, official rule",
                   "random_levels_split": "random levels, split rule"}


class MissingTreebankError(TreelmError):
    """The treebank is not there (no such path, the NLTK sample not found), not malformed."""


# ----------------------------------------------------------------------------- the report
def load_golds(treebank: str | os.PathLike[str], max_len: int | None = None) -> list[GoldTree]:
    """The gold trees to score, with every problem as a one-line :class:`TreelmError`: what
    :func:`~treelm.data.treebank.load_treebank` reads, or ``sinica``, ``sinica-dev`` and
    ``sinica-test`` (:func:`treelm.data.sinica.load_sinica`).

    Raises:
        MissingTreebankError: the treebank is not there.
        TreelmError: the treebank is malformed, or no sentence (of at most ``max_len`` words)
        is left to evaluate.
    """
    try:
        if os.fspath(treebank) in SINICA_NAMES:
            from treelm.data.sinica import load_sinica

            golds = [g for g in load_sinica(os.fspath(treebank))
                     if max_len is None or len(g.words) <= max_len]
        else:
            golds = load_treebank(treebank, max_len=max_len)
    except TreebankError as e:
        missing = isinstance(e, TreebankNotFound)
        raise (MissingTreebankError if missing else TreelmError)(str(e)) from None
    if not golds:
        limit = f" of <= {max_len} words" if max_len else ""
        raise TreelmError(f"{os.fspath(treebank)}: no sentences{limit} to evaluate")
    return golds


def word_normalizer(treebank: str | os.PathLike[str]) -> Callable[[str], str]:
    """How :func:`load_golds` normalises ``treebank``'s words, so that another parser's leaves
    can be read as it reads its own: the PTB protocol's lower case and digit runs -> ``N``
    (:func:`treelm.data.treebank.normalize_word`), none for the Sinica treebanks."""
    if os.fspath(treebank) in SINICA_NAMES:
        return str
    return normalize_word


def table_labels(treebank: str | os.PathLike[str], labels: Sequence[str] | None = None
                 ) -> Sequence[str]:
    """The label columns of :func:`format_table` for ``treebank``: ``labels`` where given, else
    the Sinica treebanks' most frequent categories or the paper's six."""
    if labels is not None:
        return labels
    return SINICA_LABELS if os.fspath(treebank).startswith("sinica") else TABLE_LABELS


def tree_file_golds(paths: Sequence[str | os.PathLike[str]], treebank: str | os.PathLike[str],
                    max_len: int | None = None, match: str = "words",
                    respelt: list[Respelt] | None = None
                    ) -> tuple[list[GoldTree], dict[str, list[Tree]]]:
    """The gold trees of ``treebank`` (of at most ``max_len`` words) and, for each tree file of
    ``paths`` (:mod:`treelm.syntax.tree_files`: a tree a line, for every sentence of the
    treebank or for those of at most ``max_len`` words), its trees of those sentences, by path
    as given: what ``eval-parse --trees`` scores. Leaves are read as words written or
    normalised as the treebank's are (:func:`word_normalizer`), or by position (``match``);
    a :class:`~treelm.syntax.tree_files.Respelt` per file goes to ``respelt``.

    Raises:
        TreelmError: see :func:`load_golds`; a file with a wrong number of lines, or a line that
        is not its sentence's tree (the file, the line and the first word that differs).
    """
    every = load_golds(treebank)
    golds = [g for g in every if max_len is None or len(g.words) <= max_len]
    if not golds:
        raise TreelmError(f"{os.fspath(treebank)}: no sentences of <= {max_len} words to "
                          "evaluate")
    trees: dict[str, list[Tree]] = {}
    for path in paths:    # (the golds each file goes with are these, in this order)
        lines = Respelt(os.fspath(path))
        _, trees[os.fspath(path)] = treebank_tree_file(
            path, every, os.fspath(treebank), max_len, word_normalizer(treebank), match, lines)
        if respelt is not None:
            respelt.append(lines)
    return golds, trees


def parsing_report(treebank: str | os.PathLike[str], max_len: int | None = None, *,
                   run: Any = None, layers: Sequence[int] | None = None,
                   checkpoint: str = "best", style: str = "official",
                   baselines: Sequence[str] = DEFAULT_BASELINES, seeds: Sequence[int] = range(5),
                   batch_size: int = 256, unk: str = "map",
                   labels: Sequence[str] | None = None,
                   trees: Mapping[str, Sequence[Tree]] | None = None,
                   golds: Sequence[GoldTree] | None = None) -> dict[str, Any]:
    """Parsing F1 of a run's ON-LSTM layers and of the baselines against a treebank (Table 2).

    Args:
        treebank: what :func:`treelm.data.treebank.load_treebank` reads (``"nltk"``, a file, a
            directory, a glob); recorded as given.
        max_len: keep sentences of at most this many words (10: WSJ10); ``None`` keeps all.
        run: a loaded run (:func:`treelm.run.load_run`) whose layers are scored, or ``None`` for
            the baselines alone.
        layers: 1-based ON-LSTM layers of ``run`` to score (default: all of them).
        checkpoint: the run's checkpoint name, recorded with it.
        style: tree rule of :func:`~treelm.syntax.trees.build_tree`.
        baselines: baseline names for :func:`~treelm.syntax.baselines.evaluate_baselines`.
        seeds: random-tree seeds.
        batch_size, unk: sentences per forward pass; ``"map"`` or ``"error"`` for words outside
            the run's vocabulary.
        labels: label columns a user asked for (``eval-parse --labels``): each must label a
            scored gold constituent, checked before any tree is scored (a misspelt label would
            otherwise be a column the table leaves out without a word).
        trees: named sets of predicted trees, one tree per gold sentence (a tree file's, a tree
            average's: :func:`tree_file_golds`), each scored as a layer is.
        golds: the gold trees, already read (by :func:`tree_file_golds`); default: read from
            ``treebank`` and ``max_len`` by :func:`load_golds`.

    Returns:
        ``{"treebank", "max_len", "n_sentences", "n_words", "style", "run", "checkpoint",
        "oov_words", "layers": {"k": evaluate(...)}, "best_layer", "trees": {name:
        evaluate(...)}, "baselines", "gold": {"mean_depth", "mean_leaf_depth",
        "label_counts"}}``; scores are fractions, JSON-ready.

    Raises:
        TreelmError: see :func:`load_golds`; a label of ``labels`` no gold constituent has;
        an unknown layer or word (``unk="error"``).
    """
    if golds is None:
        golds = load_golds(treebank, max_len)
    depth, leaf_depth = mean_depth(g.tree for g in golds)
    gold_counts = {k: t for k, (_, t) in label_recall([g.tree for g in golds], golds).items()}
    lacking = [k for k in labels or () if not gold_counts.get(k)]
    if lacking:
        raise TreelmError(f"{os.fspath(treebank)}: no scored gold constituent (of 2 words or "
                          f"more, not a whole sentence) is labelled {', '.join(lacking)}; its "
                          f"labels are {', '.join(gold_counts) or 'none'}")
    report: dict[str, Any] = {
        "treebank": os.fspath(treebank),
        "max_len": max_len,
        "n_sentences": len(golds),
        "n_words": sum(len(g.words) for g in golds),
        "style": style,
        "run": None,
        "checkpoint": None,
        "oov_words": 0,
        "layers": {},
        "best_layer": None,
        "trees": {name: evaluate(t, golds) for name, t in (trees or {}).items()},
        "baselines": evaluate_baselines(golds, seeds, baselines),
        "gold": {"mean_depth": depth, "mean_leaf_depth": leaf_depth, "label_counts": gold_counts},
    }
    if run is not None:
        if layers is None:
            from treelm.syntax.levels import onlstm_layers

            layers = onlstm_layers(run.model)
        read = read_parts(run.model, run.vocab, {"": [g.words for g in golds]}, layers,
                          [style], batch_size, unk)[""]
        results = {k: evaluate(read.trees[k, style], golds) for k in layers}
        report.update(run=str(run.path), checkpoint=checkpoint, oov_words=read.oov,
                      layers={str(k): v for k, v in results.items()},
                      best_layer=max(results, key=lambda k: results[k]["sentence_f1"]))
    return report


# ----------------------------------------------------------------------------- printing
def _pct(x: float) -> str:
    return f"{100.0 * x:.1f}"


def format_table(report: dict[str, Any], labels: Sequence[str] = TABLE_LABELS) -> str:
    """A :func:`parsing_report` as a text table in the shape of Table 2 of Shen et al. (2019).

    Label columns the gold trees lack are left out.
    """
    gold_counts = report.get("gold", {}).get("label_counts", {})
    labels = [k for k in labels if gold_counts.get(k, 0) > 0]
    header = ["", "sent F1", "corpus F1", "depth", "height", *labels]
    rows: list[list[str]] = []
    for name, res in report["baselines"].items():
        if "seeds" in res:      # random trees, rule controls: mean ± std over seeds
            sf, cf = res["sentence_f1"], res["corpus_f1"]
            f1s = [f"{_pct(sf['mean'])}±{_pct(sf['std'])}", f"{_pct(cf['mean'])}±{_pct(cf['std'])}"]
            name = f"{BASELINE_TITLES[name]} ({len(res['seeds'])} seeds)"
        else:
            f1s = [_pct(res["sentence_f1"]), _pct(res["corpus_f1"])]
            name = BASELINE_TITLES[name]
        rows.append([name, *f1s, f"{res['mean_leaf_depth_pred']:.2f}",
                     f"{res['mean_depth_pred']:.2f}",
                     *(_pct(res["label_recall"].get(k, 0.0)) for k in labels)])

    def scored(name: str, res: dict[str, Any]) -> list[str]:
        return [name, _pct(res["sentence_f1"]), _pct(res["corpus_f1"]),
                f"{res['mean_leaf_depth_pred']:.2f}", f"{res['mean_depth_pred']:.2f}",
                *(_pct(res["label_recall"].get(k, 0.0)) for k in labels)]

    best = report.get("best_layer")
    for k, res in report.get("layers", {}).items():
        mark = " *" if int(k) == best and len(report["layers"]) > 1 else ""
        rows.append(scored(f"ON-LSTM layer {k}{mark}", res))
    rows += [scored(name, res) for name, res in report.get("trees", {}).items()]
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


def _rounded(values: Any) -> list[float]:
    return [round(float(v), 6) for v in values]


def format_parse(tokens: list[str], lv: Any, layers: Sequence[int], fmt: str, style: str,
                 text: str) -> str:
    """What ``treelm parse`` prints for one sentence (without the final newline).

    ``lv`` is the sentence's :class:`~treelm.syntax.levels.SentenceLevels`; ``fmt`` is
    ``brackets`` (one line; ``layer k<TAB>`` before each tree when several layers are shown),
    ``json`` (one object: tokens, unknown positions, per layer the tree and the levels rounded
    to 6 decimals) or ``ascii`` (a drawing per layer). An empty sentence gives an empty line,
    or a JSON object without parses, so outputs stay aligned with inputs.
    """
    if not tokens:
        if fmt == "json":
            return json.dumps({"sentence": text, "tokens": [], "unknown": [], "parses": []},
                              ensure_ascii=False)
        return ""
    trees = {k: t[0] for (k, _), t in level_trees([lv], layers, [style]).items()}
    if fmt == "json":
        parses = []
        for k in layers:
            row = lv.row(k)
            # the tree is spliced in as text: tree_to_json is iterative, json.dumps is not
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
