"""Trivial binary-tree baselines for unsupervised parsing (all iterative, any length).

The standard reference points of PRPN / ON-LSTM / Compound-PCFG tables: left-branching,
right-branching (strong for English), balanced and random binary trees, and
:func:`evaluate_baselines`, which scores them against gold trees the way ``treelm eval-parse``
reports them.

The rule control (:func:`random_levels`; baselines ``random_levels_official`` and
``random_levels_split``): i.i.d. uniform levels passed through a tree rule of
:func:`~treelm.syntax.trees.build_tree`, scored like a model's levels. Dyer, Melis & Blunsom
(2019) point out that the ``official`` rule favours right-branching trees by itself: the word
with the highest level opens a constituent that runs to the end of its span, so on English
(which branches to the right) levels that know nothing already score above random trees under
it. What a rule gives on random levels is the figure a model's levels must beat under that rule
to have learned anything. Under the ``split`` rule random levels give exactly
:func:`random_tree` (the same draws, the same trees).

The balanced tree is the one behind the ON-LSTM paper's Table 2 figure (24.5 sentence F1 on the
WSJ test set): every span of m words is split at ``floor(m / 2)``, so the right half takes the
extra word. The mirror construction (left half larger, SPINN's ``balanced_transitions``) is kept
as :func:`balanced_left`; on the NLTK WSJ sample it scores about 3 points (7 on WSJ10) lower,
because English constituents lean to the right.
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


def _halves(words: Sequence[Any], extra_right: bool) -> Tree:
    """Split every span in two halves; the odd word goes right (``extra_right``) or left."""
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
        mid = lo + (hi - lo) // 2 if extra_right else lo + (hi - lo + 1) // 2
        todo.append((mid, hi, node))  # popped after the left half is complete
        todo.append((lo, mid, node))
    return holder[0]


def balanced(words: Sequence[Any]) -> Tree:
    """Split every span of m words at ``floor(m / 2)``: the right half gets the extra word.

    ``[[w1, w2], [w3, [w4, w5]]]`` for five words. This is the construction that reproduces the
    balanced-tree figure of the ON-LSTM paper (Table 2).
    """
    return _halves(words, extra_right=True)


def balanced_left(words: Sequence[Any]) -> Tree:
    """Split every span of m words at ``ceil(m / 2)``: the left half gets the extra word.

    ``[[[w1, w2], w3], [w4, w5]]`` for five words (SPINN's ``balanced_transitions``; treelm's
    ``balanced`` before it was aligned with the ON-LSTM paper).
    """
    return _halves(words, extra_right=False)


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


def random_levels(words: Sequence[Any], rng: np.random.Generator | int,
                  rule: str = "official") -> Tree:
    """The tree that ``rule`` (a style of :func:`~treelm.syntax.trees.build_tree`) makes of
    i.i.d. uniform levels: the rule control. ``random_levels(w, g, "split")`` is
    ``random_tree(w, g)``.

    Args:
        words: n >= 1 leaves.
        rng: a ``numpy.random.Generator`` (advanced in place) or an integer seed.
        rule: ``"official"`` or ``"split"``.
    """
    _check(words)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return build_tree(gen.random(len(words)), words, style=rule)


#: The deterministic baselines by name.
BASELINES: dict[str, Callable[[Sequence[Any]], Tree]] = {
    "left_branching": left_branching,
    "right_branching": right_branching,
    "balanced": balanced,
    "balanced_left": balanced_left,
}

#: What :func:`evaluate_baselines` scores by default, in the order of the paper's Table 2 (and of
#: its result). ``balanced_left`` is only scored on request.
DEFAULT_BASELINES = ("random", "balanced", "left_branching", "right_branching")
#: The rule controls by name: random levels through each tree rule.
RULE_CONTROLS = {"random_levels_official": "official", "random_levels_split": "split"}
_ORDER = ("random", *RULE_CONTROLS, "balanced", "balanced_left", "left_branching",
          "right_branching")


def random_baseline(golds: Sequence[Any], seeds: Sequence[int] = range(5),
                    rule: str | None = None) -> dict[str, Any]:
    """Random trees (or, with ``rule``, the rule control :func:`random_levels`) scored over
    ``seeds``: one ``evaluate`` per seed, summarised.

    Each seed's run draws from its own ``numpy.random.default_rng(seed)``, consumed sentence by
    sentence in order. Returns ``{"seeds", "sentence_f1", "corpus_f1", "label_recall",
    "mean_depth_pred", "mean_leaf_depth_pred"}``: the two F1 as ``{"mean", "std", "runs"}``
    (sample standard deviation), the rest as means over the seeds (a label a run never scored
    counts as recall 0).
    """
    runs = []
    for seed in seeds:
        gen = np.random.default_rng(seed)
        if rule is None:
            trees = [random_tree(g.words, gen) for g in golds]
        else:
            trees = [random_levels(g.words, gen, rule) for g in golds]
        runs.append(evaluate(trees, golds))
    summary: dict[str, Any] = {"seeds": list(seeds)}
    for key in ("sentence_f1", "corpus_f1"):
        values = [run[key] for run in runs]
        summary[key] = {
            "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "runs": values,
        }
    labels = sorted({k for run in runs for k in run["label_recall"]})
    summary["label_recall"] = {k: float(np.mean([run["label_recall"].get(k, 0.0) for run in runs]))
                               for k in labels}
    for key in ("mean_depth_pred", "mean_leaf_depth_pred"):
        summary[key] = float(np.mean([run[key] for run in runs]))
    return summary


def evaluate_baselines(golds: Sequence[Any], seeds: Sequence[int] = range(5),
                       names: Sequence[str] = DEFAULT_BASELINES) -> dict[str, Any]:
    """Score the baselines ``names`` on ``golds`` (:class:`~treelm.data.treebank.GoldTree`\\ s).

    Returns ``{name: result}`` in Table 2 order (random, random_levels_official,
    random_levels_split, balanced, balanced_left, left_branching, right_branching; only those
    asked for): an ``evaluate(...)`` dict for each deterministic baseline,
    :func:`random_baseline` over ``seeds`` for ``"random"`` and the rule controls.

    Raises:
        ValueError: an unknown baseline name.
    """
    unknown = sorted(set(names) - set(_ORDER))
    if unknown:
        raise ValueError(f"unknown baseline(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(_ORDER)}")
    results: dict[str, Any] = {}
    for name in _ORDER:
        if name not in names:
            continue
        if name == "random":
            results[name] = random_baseline(golds, seeds)
        elif name in RULE_CONTROLS:
            results[name] = random_baseline(golds, seeds, RULE_CONTROLS[name])
        else:
            results[name] = evaluate([BASELINES[name](g.words) for g in golds], golds)
    return results
