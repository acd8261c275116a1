"""Tree ensembles (tree averaging): per sentence, the binary tree sharing the most spans with
K source trees.

Shayegh, Cao, Zhu, Cheung and Mou, "Ensemble Distillation for Unsupervised Constituency
Parsing" (ICLR 2024, arXiv:2310.01717) average the trees of several parsers ("teachers") this
way. For a sentence of ``n`` words, source trees ``T_1 … T_K`` and weights ``w_k >= 0`` (all 1
by default), the average is

    T* = argmax_{T binary over the n words}  sum_k w_k |S(T) ∩ S(T_k)|,

where ``S(T)`` is the set of spans ``(i, j)`` of ``T`` (words ``i .. j-1``, from 0) with
``2 <= j - i <= n - 1``: single words and the whole sentence are in every tree, so they are left
out, as the F1 of :mod:`treelm.syntax.metrics` leaves them out. Every binary tree has ``n - 2``
such spans, so with binary sources ``T*`` is also the binary tree of the highest summed F1
against them. A source tree may be n-ary or have unary nodes: only its spans count. The
objective is a sum over the spans of ``T`` of the vote ``v(i, j) = sum_k w_k [(i, j) ∈ S(T_k)]``
(:func:`span_votes`), so a CKY recursion over spans finds the maximum exactly:

    best(i, i+1) = 0,    best(i, j) = v(i, j) + max_{i<k<j} best(i, k) + best(k, j).

Cost per sentence: ``O(K·n)`` for the votes (a tree has at most ``n - 2`` spans in ``S``) and
``O(n^3)`` for the recursion, whose inner maximum over the split ``k`` is one numpy operation for
all spans of one length, of all sentences of the same length at once (:func:`best_splits`; no
Python recursion, so long sentences are fine).

**Ties** go to the smallest split point ``k`` at every span (the first maximum), so among the
trees of the highest objective the average is the one whose split points, read top-down and
left to right (pre-order), come first in lexicographic order; where nothing is voted for, this is
the right-branching tree ``[w_1, [w_2, [… w_n]]]``. With integer weights (the default) the votes
are exact and so are the ties; with fractional weights two sums that are equal on paper may
differ in the last bit.

:func:`ensemble_trees` makes the ensemble of whole corpora (K lists of trees, one per source, in
the same sentence order); ``treelm ensemble``, ``treelm.ensemble_trees`` and a study's ensembles
(:mod:`treelm.study.ensemble`) call it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from treelm.errors import TreelmError
from treelm.syntax.trees import Tree, leaves_and_spans

#: Entries of one batch's vote array in :func:`ensemble_trees` (float64: 32 MB per array).
_CHUNK = 1 << 22


def leaves_and_brackets(tree: Tree) -> tuple[list[object], set[tuple[int, int]]]:
    """The leaves of ``tree`` and its spans of ``2 .. n-1`` words (``S(T)`` of the module
    docstring), by the one span walk (:func:`treelm.syntax.trees.leaves_and_spans`)."""
    leaves, spans = leaves_and_spans(tree)
    spans.discard((0, len(leaves)))
    return leaves, spans


def check_weights(weights: Sequence[float] | None, k: int) -> list[float]:
    """``weights`` (one per source, finite and ``>= 0``; ``None``: all 1) as a list."""
    if weights is None:
        return [1.0] * k
    out = [float(w) for w in weights]
    if len(out) != k:
        raise TreelmError(f"{len(out)} weights for {k} sources; give one weight per source")
    bad = next((w for w in out if not math.isfinite(w) or w < 0), None)
    if bad is not None:
        raise TreelmError(f"weight {bad:g}: weights must be finite and >= 0")
    return out


def _votes(spans: Sequence[set[tuple[int, int]]], weights: Sequence[float], n: int
           ) -> np.ndarray:
    """The ``(n+1, n+1)`` vote matrix of span sets with their weights (a bincount)."""
    flat = [i * (n + 1) + j for sp in spans for i, j in sp]
    counts = [w for sp, w in zip(spans, weights) for _ in sp]
    size = (n + 1) * (n + 1)
    if not flat:
        return np.zeros((n + 1, n + 1))
    return np.bincount(np.asarray(flat, dtype=np.int64), np.asarray(counts, dtype=np.float64),
                       minlength=size).reshape(n + 1, n + 1)


def span_votes(trees: Sequence[Tree], weights: Sequence[float] | None = None) -> np.ndarray:
    """The votes of the source trees of one sentence: an ``(n+1, n+1)`` float64 matrix whose
    entry ``[i, j]`` is ``v(i, j) = sum_k w_k [(i, j) ∈ S(T_k)]`` for ``2 <= j - i <= n - 1``
    (0 elsewhere); ``n`` is the first tree's number of words, which every tree must have."""
    if not trees:
        raise TreelmError("no trees to count the spans of")
    w = check_weights(weights, len(trees))
    read = [leaves_and_brackets(t) for t in trees]
    n = len(read[0][0])
    for k, (leaves, _) in enumerate(read[1:], 2):
        if len(leaves) != n:
            raise TreelmError(f"tree {k} has {len(leaves)} words, tree 1 has {n}")
    return _votes([spans for _, spans in read], w, n)


def best_splits(votes: np.ndarray) -> np.ndarray:
    """The dynamic programme of a batch of ``B`` sentences of ``n`` words each: ``votes`` of
    shape ``(B, n+1, n+1)`` (entries ``[b, i, j]`` for ``2 <= j - i <= n - 1`` are read) ->
    ``split`` of the same shape, ``split[b, i, L]`` the length of the left part of the best
    split of the span of ``L`` words from ``i`` (ties: the shortest left part, i.e. the smallest
    split point).

    The table is kept twice, by start and by end (``by_start[b, i, L]`` and ``by_end[b, j, L]``
    hold ``best`` of the span of length ``L`` starting at ``i`` / ending at ``j``), so that for
    one length ``L`` the candidates ``best(i, i+m) + best(i+m, i+L)`` of every sentence, start
    ``i`` and left length ``m`` are two slices added: ``n - 1`` numpy steps for the batch."""
    v = np.asarray(votes, dtype=np.float64)
    size, n = v.shape[0], v.shape[1] - 1
    by_start = np.zeros((size, n + 1, n + 1))
    by_end = np.zeros((size, n + 1, n + 1))
    split = np.zeros((size, n + 1, n + 1), dtype=np.int64)
    for length in range(2, n + 1):
        c = n - length + 1                                   # spans of this length: i < c
        # [b, i, m-1] (m = 1 .. L-1): best(i, i+m) + best(i+m, i+L)
        total = by_start[:, :c, 1:length] + by_end[:, length:, length - 1:0:-1]
        m = total.argmax(axis=2)                             # the first maximum: smallest k
        best = np.take_along_axis(total, m[:, :, None], axis=2)[:, :, 0]
        if length < n:
            best += np.diagonal(v, offset=length, axis1=1, axis2=2)
        by_start[:, :c, length] = best
        by_end[:, length:, length] = best
        split[:, :c, length] = m + 1
    return split


def _unfold(split: list[list[int]], leaves: Sequence[object]) -> Tree:
    """The tree of one sentence's ``split`` table (as lists), built top-down with a stack."""
    holder: list[Tree] = []
    todo: list[tuple[int, int, list[Tree]]] = [(0, len(leaves), holder)]
    while todo:
        i, length, out = todo.pop()
        if length == 1:
            out.append(leaves[i])
            continue
        node: list[Tree] = []
        out.append(node)
        m = split[i][length]
        todo.append((i + m, length - m, node))              # popped after the left part
        todo.append((i, m, node))
    return holder[0]


def best_binary_tree(votes: np.ndarray, leaves: Sequence[object]) -> Tree:
    """The binary tree over ``leaves`` (``n`` of them) whose spans of ``2 .. n-1`` words have
    the highest summed ``votes[i, j]`` (an ``(n+1, n+1)`` array; other entries are not read),
    ties to the smallest split point (module docstring; :func:`best_splits`). A bare leaf for
    ``n == 1``."""
    n = len(leaves)
    if n == 0:
        raise TreelmError("cannot build a tree over zero words")
    v = np.asarray(votes, dtype=np.float64)
    if v.shape != (n + 1, n + 1):
        raise TreelmError(f"votes of shape {v.shape} for {n} words; expected {(n + 1, n + 1)}")
    if n == 1:
        return leaves[0]
    return _unfold(best_splits(v[None])[0].tolist(), leaves)


def tree_votes(tree: Tree, votes: np.ndarray) -> float:
    """The objective of ``tree`` under ``votes``: the sum of ``votes[i, j]`` over its spans of
    ``2 .. n-1`` words (what :func:`best_binary_tree` maximises)."""
    v = np.asarray(votes, dtype=np.float64)
    return float(sum(v[i, j] for i, j in leaves_and_brackets(tree)[1]))


def ensemble_tree(trees: Sequence[Tree], weights: Sequence[float] | None = None) -> Tree:
    """The average of one sentence's source trees (module docstring), over the leaves of the
    first; every tree must have the same leaves."""
    return ensemble_trees([[t] for t in trees], weights)[0]


def _first_difference(first: list[object], other: list[object], who: str) -> TreelmError:
    i = next((i for i, (a, b) in enumerate(zip(first, other)) if a != b), None)
    if i is None:
        return TreelmError(f"{who} has {len(other)} words, source 1 has {len(first)}")
    return TreelmError(f"{who}: word {i + 1} is {other[i]!r} where source 1 has {first[i]!r}")


def ensemble_trees(sources: Sequence[Sequence[Tree]],
                  weights: Sequence[float] | None = None) -> list[Tree]:
    """Per sentence, the tree average of the sources (module docstring).

    Args:
        sources: ``K >= 1`` lists of trees, one list per source (a parser, a run's reading),
            each with one tree per sentence in the same order, over the same words (nested-list
            trees of :mod:`treelm.syntax.trees`, or ``nltk.Tree``\\ s, which are lists too).
        weights: one per source, finite and ``>= 0`` (default: all 1).

    Returns:
        One binary nested-list tree per sentence, over the first source's leaves.

    Raises:
        TreelmError: no source, sources of different lengths, a sentence whose trees have
        different words (naming the source, the sentence and the word), bad weights.
    """
    if not sources:
        raise TreelmError("no sources to average")
    w = check_weights(weights, len(sources))
    sizes = [len(s) for s in sources]
    if len(set(sizes)) > 1:
        k = next(k for k, size in enumerate(sizes) if size != sizes[0])
        raise TreelmError(f"source {k + 1} has {sizes[k]} trees, source 1 has {sizes[0]}")
    read: list[list[object]] = []               # per sentence: its words
    spans: list[list[set[tuple[int, int]]]] = []    # per sentence: each source's spans
    for s, trees in enumerate(zip(*sources), 1):
        walked = [leaves_and_brackets(t) for t in trees]
        leaves = walked[0][0]
        for k, (words, _) in enumerate(walked[1:], 2):
            if words != leaves:
                raise _first_difference(leaves, words, f"sentence {s}, source {k}")
        read.append(leaves)
        spans.append([sp for _, sp in walked])
    # sentences of one length go through the programme together, in chunks of bounded memory
    by_length: dict[int, list[int]] = {}
    for s, leaves in enumerate(read):
        by_length.setdefault(len(leaves), []).append(s)
    out: list[Tree] = [None] * len(read)
    for n, group in by_length.items():
        if n == 1:
            for s in group:
                out[s] = read[s][0]
            continue
        step = max(1, _CHUNK // (n + 1) ** 2)
        for at in range(0, len(group), step):
            part = group[at:at + step]
            votes = np.stack([_votes(spans[s], w, n) for s in part])
            for s, split in zip(part, best_splits(votes).tolist()):
                out[s] = _unfold(split, read[s])
    return out


__all__ = ["best_binary_tree", "best_splits", "check_weights", "ensemble_tree", "ensemble_trees",
           "leaves_and_brackets", "span_votes", "tree_votes"]
