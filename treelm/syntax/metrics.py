"""Unlabeled bracketing metrics for unsupervised constituency parsing.

Follows the evaluation of PRPN (Shen et al., ICLR 2018), ON-LSTM (Shen et al., ICLR 2019,
``test_phrase_grammar.py``) and Compound PCFG (Kim et al., ACL 2019, ``compare_trees.py``):

* a tree's brackets are its spans ``(start, end_exclusive)`` over >= 2 words, taken as a set,
  with the trivial whole-sentence span removed (it is always right);
* **sentence F1** (the number ON-LSTM and PRPN report): per sentence
  ``P = |pred & gold| / |pred|``, ``R = |pred & gold| / |gold|``, ``F1 = 2PR / (P + R)``
  (0 when ``P + R == 0``), averaged over sentences. When ``gold`` is empty (sentences of
  <= 2 words, or flat gold trees) ``R = 1``, and ``P = 1`` if ``pred`` is empty too. The
  reference code divides by ``len + 1e-8``, so an empty ``pred`` against a non-empty
  ``gold`` gives ``P = 0``; we use the exact values the epsilons approximate (results agree
  to ~1e-8);
* **corpus F1** (Compound PCFG's "Corpus F1"): micro average, ``P = sum|pred & gold| /
  sum|pred|``, ``R = sum|pred & gold| / sum|gold|`` over all sentences (0 when a
  denominator is 0);
* **per-label recall**: for each gold label (``NP``, ``VP``, ``PP``, ``ADJP``, ``SBAR``, ...)
  the fraction of gold labeled constituents over >= 2 words whose span is predicted.
  ON-LSTM's ``corpus_stats_labeled`` also counts the whole-sentence span (trivially
  correct, so it inflates mostly ``S``); by default we exclude it like the unlabeled
  metrics do (``include_whole_sentence=True`` restores the reference behaviour). Every label
  of a unary chain counts separately (``S`` and ``VP`` over the same words);
* **depth**: mean over sentences of the tree height (:func:`~treelm.syntax.trees.tree_depth`)
  and of the mean leaf depth (``corpus_average_depth`` in ON-LSTM's ``parse_comparison.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from treelm.syntax.trees import Tree, leaf_depths, leaves_and_spans, tree_spans

Span = tuple[int, int]


class PRF(NamedTuple):
    """Precision, recall and F1 in [0, 1]."""

    precision: float
    recall: float
    f1: float


def f1_score(precision: float, recall: float) -> float:
    """Harmonic mean ``2PR / (P + R)``, 0 when ``P + R == 0``."""
    total = precision + recall
    return 2.0 * precision * recall / total if total > 0 else 0.0


def brackets(tree: Tree) -> set[Span]:
    """Evaluation brackets: spans over >= 2 leaves, without the whole-sentence span."""
    return _brackets_and_length(tree)[0]


def _brackets_and_length(tree: Tree) -> tuple[set[Span], int]:
    leaves, spans = leaves_and_spans(tree)
    spans.discard((0, len(leaves)))
    return spans, len(leaves)


def sentence_prf(pred: set[Span], gold: set[Span]) -> PRF:
    """Per-sentence P/R/F1 of bracket sets, with the PRPN / ON-LSTM empty-set conventions."""
    match = len(pred & gold)
    if gold:
        recall = match / len(gold)
        precision = match / len(pred) if pred else 0.0
    else:
        recall = 1.0
        precision = match / len(pred) if pred else 1.0
    return PRF(precision, recall, f1_score(precision, recall))


def _gold_tree(gold: Any) -> Tree:
    """Accept a :class:`~treelm.data.treebank.GoldTree` (``.tree``) or a plain tree."""
    return gold.tree if hasattr(gold, "labeled_spans") else gold


def _bracket_pairs(
    pred_trees: Sequence[Tree], golds: Sequence[Any]
) -> Iterable[tuple[set[Span], set[Span], int]]:
    if len(pred_trees) != len(golds):
        raise ValueError(f"{len(pred_trees)} predicted trees for {len(golds)} gold trees")
    for i, (pred, gold) in enumerate(zip(pred_trees, golds)):
        pred_spans, n_pred = _brackets_and_length(pred)
        gold_spans, n_gold = _brackets_and_length(_gold_tree(gold))
        if n_pred != n_gold:
            raise ValueError(f"sentence {i}: predicted tree has {n_pred} leaves, gold {n_gold}")
        yield pred_spans, gold_spans, n_gold


def span_prf(pairs: Iterable[tuple[set[Span], set[Span]]]) -> tuple[PRF, PRF]:
    """``(sentence, corpus)`` P/R/F1 of ``(pred, gold)`` bracket sets, one pair per sentence:
    the one F1 over span sets, which :func:`sentence_f1`, :func:`corpus_f1`, :func:`evaluate`,
    the training-time tracker and a study's ensembles all compute with (callers that keep the
    gold brackets between evaluations pass sets). Sentence: the mean over sentences of
    :func:`sentence_prf`; corpus: the micro average over all brackets (0 when a denominator is
    0).

    Raises:
        ValueError: no pair.
    """
    scores: list[PRF] = []
    match = n_pred = n_gold = 0
    for pred, gold in pairs:
        scores.append(sentence_prf(pred, gold))
        match += len(pred & gold)
        n_pred += len(pred)
        n_gold += len(gold)
    if not scores:
        raise ValueError("no sentences to evaluate")
    k = len(scores)
    sentence = PRF(sum(s.precision for s in scores) / k, sum(s.recall for s in scores) / k,
                   sum(s.f1 for s in scores) / k)
    precision = match / n_pred if n_pred else 0.0
    recall = match / n_gold if n_gold else 0.0
    return sentence, PRF(precision, recall, f1_score(precision, recall))


def mean_prf(pairs: Iterable[tuple[set[Span], set[Span]]]) -> PRF:
    """The sentence P/R/F1 of :func:`span_prf`."""
    return span_prf(pairs)[0]


def sentence_f1(pred_trees: Sequence[Tree], golds: Sequence[Any]) -> PRF:
    """Mean over sentences of per-sentence P, R and F1 (ON-LSTM / PRPN "F1")."""
    return span_prf((p, g) for p, g, _ in _bracket_pairs(pred_trees, golds))[0]


def corpus_f1(pred_trees: Sequence[Tree], golds: Sequence[Any]) -> PRF:
    """Micro-averaged P/R/F1 over all brackets of the corpus (Compound PCFG "Corpus F1")."""
    if not len(pred_trees) and not len(golds):
        return PRF(0.0, 0.0, 0.0)
    return span_prf((p, g) for p, g, _ in _bracket_pairs(pred_trees, golds))[1]


def label_recall(
    pred_trees: Sequence[Tree],
    golds: Sequence[Any],
    include_whole_sentence: bool = False,
) -> dict[str, tuple[int, int]]:
    """Per gold label, ``(matched, total)`` gold constituents whose span the prediction has.

    ``golds`` must provide ``labeled_spans`` (``(label, start, end_exclusive)``, e.g.
    :class:`~treelm.data.treebank.GoldTree`). Spans over < 2 words never count; the
    whole-sentence span counts only with ``include_whole_sentence=True``.
    """
    matched: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for pred, gold in zip(pred_trees, golds, strict=True):
        pred_spans = tree_spans(pred)
        n = len(gold.words) if hasattr(gold, "words") else len(leaf_depths(gold.tree))
        for label, start, end in gold.labeled_spans:
            if end - start < 2 or (not include_whole_sentence and (start, end) == (0, n)):
                continue
            total[label] += 1
            matched[label] += (start, end) in pred_spans
    return {label: (matched[label], total[label]) for label in sorted(total)}


def mean_depth(trees: Iterable[Tree]) -> tuple[float, float]:
    """``(mean tree height, mean of per-tree mean leaf depth)`` over ``trees``."""
    heights: list[int] = []
    leaf_means: list[float] = []
    for tree in trees:
        depths = leaf_depths(tree)
        heights.append(max(depths, default=0))
        leaf_means.append(sum(depths) / len(depths) if depths else 0.0)
    if not heights:
        return 0.0, 0.0
    return sum(heights) / len(heights), sum(leaf_means) / len(leaf_means)


def evaluate(
    pred_trees: Sequence[Tree],
    golds: Sequence[Any],
    include_whole_sentence_in_labels: bool = False,
) -> dict[str, Any]:
    """All metrics for predicted trees against gold trees (same order, same leaf counts).

    Args:
        pred_trees: nested-list trees, one per sentence.
        golds: :class:`~treelm.data.treebank.GoldTree` objects, or plain nested-list gold
            trees (then no per-label recall is reported).
        include_whole_sentence_in_labels: see :func:`label_recall`.

    Returns:
        ``{"n_sentences", "sentence_f1", "sentence_precision", "sentence_recall",
        "corpus_f1", "corpus_precision", "corpus_recall", "label_recall": {label: recall},
        "label_counts": {label: [matched, total]}, "mean_depth_pred", "mean_depth_gold",
        "mean_leaf_depth_pred", "mean_leaf_depth_gold"}``; scores are fractions in [0, 1].
    """
    sent, corp = span_prf((p, g) for p, g, _ in _bracket_pairs(pred_trees, golds))
    depth_pred, leaf_pred = mean_depth(pred_trees)
    depth_gold, leaf_gold = mean_depth(_gold_tree(g) for g in golds)
    result: dict[str, Any] = {
        "n_sentences": len(golds),
        "sentence_f1": sent.f1,
        "sentence_precision": sent.precision,
        "sentence_recall": sent.recall,
        "corpus_f1": corp.f1,
        "corpus_precision": corp.precision,
        "corpus_recall": corp.recall,
        "label_recall": {},
        "label_counts": {},
        "mean_depth_pred": depth_pred,
        "mean_depth_gold": depth_gold,
        "mean_leaf_depth_pred": leaf_pred,
        "mean_leaf_depth_gold": leaf_gold,
    }
    if golds and all(hasattr(g, "labeled_spans") for g in golds):
        counts = label_recall(pred_trees, golds, include_whole_sentence_in_labels)
        result["label_recall"] = {k: m / t for k, (m, t) in counts.items()}
        result["label_counts"] = {k: [m, t] for k, (m, t) in counts.items()}
    return result
