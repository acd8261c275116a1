"""Trivial binary-tree baselines for unsupervised parsing (all iterative, any length).

The standard reference points of PRPN / ON-LSTM / Compound-PCFG tables: left-branching,
right-branching (strong for English), balanced and random binary trees.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from treelm.syntax.metrics import evaluate
from treelm.syntax.trees import Tree, build_tree


def _check(words: Sequence[Any]) -> None:
    if len(words) == 0:
        raise ValueError("cannot build a tree over zero words")


def left_branching(words: Sequence[Any]) -> Tree:
    """``[[[w0, w1], w2], w3]``: brackets ``(0, j)`` for j = 2..n."""
    _check(words)
    tree: Tree = words[0]
    for word in words[1:]:
        tree = [tree, word]
    return tree


def right_branching(words: Sequence[Any]) -> Tree:
    """``[w0, [w1, [w2, w3]]]``: brackets ``(i, n)`` for i = 0..n-2."""
    _check(words)
    tree: Tree = words[-1]
    for word in reversed(words[:-1]):
        tree = [word, tree]
    return tree


def balanced(words: Sequence[Any]) -> Tree:
    """Split every span of length m at ``ceil(m / 2)``: the left half gets the extra word."""
    _check(words)
    holder: list[Tree] = []
    todo: list[tuple[int, int, list[Tree]]] = [(0, len(words), holder)]
    while todo:
        lo, hi, out = todo.pop()
        if hi - lo == 1:
            out.append(words[lo])
            continue
        node: list[Tree] = []
        out.append(node)
        mid = lo + (hi - lo + 1) // 2
        todo.append((mid, hi, node))
        todo.append((lo, mid, node))
    return holder[0]


def random_tree(words: Sequence[Any], rng: np.random.Generator | int) -> Tree:
    """Random binary tree: every span is split at a uniformly random point.

    Implemented as i.i.d. uniform levels fed to :func:`~treelm.syntax.trees.build_tree` with
    ``style="split"`` (the arg-max of i.i.d. levels over positions 1..m-1 of a span is uniform
    and independent between spans, so this *is* the recursive uniform-split distribution). The
    ``official`` rule on random levels would give another, more right-branching distribution.

    Args:
        words: n >= 1 leaves.
        rng: a ``numpy.random.Generator`` (advanced in place) or an integer seed.
    """
    _check(words)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return build_tree(gen.random(len(words)), words, style="split")


BASELINES: dict[str, Callable[[Sequence[Any]], Tree]] = {
    "left_branching": left_branching,
    "right_branching": right_branching,
    "balanced": balanced,
}


def evaluate_baselines(golds: Sequence[Any], seeds: Sequence[int] = range(5)) -> dict[str, Any]:
    """Score every baseline on ``golds`` (:class:`~treelm.data.treebank.GoldTree` objects).

    Returns ``{name: evaluate(...) dict}`` for the deterministic baselines, and for
    ``"random"`` a dict with ``sentence_f1`` / ``corpus_f1`` as ``{"mean", "std", "runs"}``
    over ``seeds`` (sample standard deviation; one ``default_rng(seed)`` per run, consumed
    sentence by sentence in order).
    """
    results: dict[str, Any] = {}
    for name, make in BASELINES.items():
        results[name] = evaluate([make(g.words) for g in golds], golds)
    runs = []
    for seed in seeds:
        gen = np.random.default_rng(seed)
        runs.append(evaluate([random_tree(g.words, gen) for g in golds], golds))
    random_summary: dict[str, Any] = {"seeds": list(seeds)}
    for key in ("sentence_f1", "corpus_f1"):
        values = [run[key] for run in runs]
        random_summary[key] = {
            "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "runs": values,
        }
    results["random"] = random_summary
    return results
