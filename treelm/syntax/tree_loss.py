"""A ranking loss that makes a layer's levels split a teacher's tree where the teacher does.

``parse`` reads a tree off the master-forget-gate levels ``d_1 … d_n`` of a sentence by a greedy
top-down rule (:func:`treelm.syntax.trees.build_tree`): every span is cut at its highest level.
So a tree is reproduced exactly when, at each of its nodes, the level that the rule reads as the
node's cut stands above every other level the rule looks at there. Shen et al. (2018, "Straight
to the Tree", Sec. 3.2) train such "syntactic distances" with a pairwise hinge; here, for a
teacher tree and a tree rule, every node ``ν`` gives its cut ``k_ν`` and the positions ``I_ν``
the rule compares it with, and

    L = mean_ν  mean_{i ∈ I_ν}  max(0, m − (d_{k_ν} − d_i))

with a margin ``m > 0`` (in level units: ``d`` lies in [0, 1]; one of a layer's L levels is
``1 / L``). Each split decision of the teacher counts once, whatever its width. ``L = 0``
exactly when every node's cut is at least ``m`` above the rest of its span, and then the rule's
reading of ``d`` is the tree (:func:`tree_targets`'s nodes are the rule's own recursion); any
``d`` that reads as another tree leaves some cut not above a rival, so ``L > 0``.

The two rules (docs/syntax.md):

* ``split``: span ``[lo, hi)`` is cut at ``k = argmax_{lo < i < hi} d_i`` into ``[lo, k)`` and
  ``[k, hi)``. Every binary tree has exactly one such reading: its node's cut is the start of
  its right child; ``I_ν = (lo, hi) \\ {k}``. An n-ary node is read right-branching.
* ``official`` (the ON-LSTM paper's): ``k = argmax_{lo ≤ i < hi} d_i`` and the span becomes
  ``[tree(lo..k-1), [x_k, tree(k+1..hi-1)]]``; ``I_ν = [lo, hi) \\ {k}``. It reaches only trees
  whose every right child made this way starts with a single word, so a teacher tree is first
  projected: each interval is cut where the teacher's first split is (``k = lo`` where that
  first child is one word, else the cut word is the one after the first child, which then
  opens ``[x_k, tree(k+1..)]``). A tree the rule can reach is kept whole; another keeps every
  first split and loses the spans the rule cannot make (:func:`reachable_tree` gives the tree a
  run can learn under each rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from treelm.syntax.trees import TREE_STYLES, Tree, build_tree, leaves_and_spans


@dataclass(frozen=True)
class TreeTargets:
    """One sentence's nodes under a rule: node ``j`` cuts at ``cuts[j]``, and pair ``p``
    compares ``cuts[node[p]]`` with position ``rivals[p]`` (positions from 0)."""

    n: int
    cuts: np.ndarray        # (N,) int64
    node: np.ndarray        # (P,) int64: the node of each pair
    rivals: np.ndarray      # (P,) int64


def _first_child_end(spans: set[tuple[int, int]], lo: int, hi: int) -> int:
    """Where the first child of interval ``[lo, hi)`` ends: the widest teacher span that starts
    at ``lo`` inside it, or ``lo + 1`` (a single word)."""
    for end in range(hi - 1, lo + 1, -1):
        if (lo, end) in spans:
            return end
    return lo + 1


def _official_cut(spans: set[tuple[int, int]], lo: int, hi: int) -> int:
    """The official rule's cut of ``[lo, hi)`` that keeps the teacher's first split there: a
    single first word is cut off by its own level (``k = lo``), a longer first child ends where
    the cut word opens the rest (``k`` = its end)."""
    m = _first_child_end(spans, lo, hi)
    return lo if m == lo + 1 else m


def tree_targets(tree: Tree, rule: str = "official") -> TreeTargets:
    """The nodes and pairs of ``tree`` (nested lists, any arity) under ``rule``."""
    if rule not in TREE_STYLES:
        raise ValueError(f"unknown tree rule {rule!r}; choose one of {TREE_STYLES}")
    leaves, spans = leaves_and_spans(tree)
    n = len(leaves)
    cuts: list[int] = []
    node: list[int] = []
    rivals: list[int] = []
    todo = [(0, n)]
    while todo:
        lo, hi = todo.pop()
        if hi - lo < 2 or (rule == "official" and hi - lo == 2):
            continue        # (two words read as one tree by either cut of the official rule)
        if rule == "split":
            k = _first_child_end(spans, lo, hi)
            others = [i for i in range(lo + 1, hi) if i != k]
            todo += [(k, hi), (lo, k)]
        else:
            k = _official_cut(spans, lo, hi)
            others = [i for i in range(lo, hi) if i != k]
            todo += [(k + 1, hi), (lo, k)]
        if others:
            node += [len(cuts)] * len(others)
            rivals += others
            cuts.append(k)
    return TreeTargets(n, np.asarray(cuts, np.int64), np.asarray(node, np.int64),
                       np.asarray(rivals, np.int64))


def reachable_tree(tree: Tree, leaves: Sequence[object], rule: str = "official") -> Tree:
    """The tree a run learns from ``tree`` under ``rule``: levels that satisfy every target,
    read by ``build_tree`` (``tree`` itself where the rule can reach it)."""
    return build_tree(target_levels(tree_targets(tree, rule)), list(leaves), rule)


def kept_spans(trees: Sequence[Tree], rule: str = "official") -> float:
    """The share of the trees' spans (of 2 to n-1 words) that :func:`reachable_tree` keeps
    under ``rule``: what a student can learn of them, 1.0 for the split rule."""
    kept = total = 0
    for tree in trees:
        leaves, spans = leaves_and_spans(tree)
        n = len(leaves)
        if n < 3:
            continue
        want = {s for s in spans if s[1] - s[0] < n}
        got = leaves_and_spans(reachable_tree(tree, list(range(n)), rule))[1]
        kept += len(want & got)
        total += len(want)
    return kept / max(1, total)


def target_levels(t: TreeTargets) -> np.ndarray:
    """Levels that meet every pair of ``t`` (each node's cut above its interval): a node's cut
    gets its depth's height, nodes nearer the root higher."""
    depth = np.zeros(t.n)
    levels = np.zeros(t.n)
    # pairs are listed node by node, parents first: a cut's level is set before its children's
    for j, k in enumerate(t.cuts):
        inside = t.rivals[t.node == j]
        levels[k] = 1.0 / (2.0 + depth[k])
        depth[inside] = depth[k] + 1
    return levels


def batch_targets(targets: Sequence[TreeTargets], device: torch.device | str = "cpu"
                  ) -> tuple[Tensor, Tensor, Tensor, int]:
    """The pairs of a batch of equal-length sentences, as flat indices into levels ``(n, B)``
    (row-major: position ``t`` of sentence ``b`` is ``t * B + b``): ``(cut, rival, node,
    nodes)``."""
    B = len(targets)
    cut, rival, node = [], [], []
    offset = 0
    for b, t in enumerate(targets):
        cut.append(t.cuts[t.node] * B + b)
        rival.append(t.rivals * B + b)
        node.append(t.node + offset)
        offset += len(t.cuts)

    def flat(parts: list[np.ndarray]) -> Tensor:
        return torch.from_numpy(np.concatenate(parts)).to(device)

    return flat(cut), flat(rival), flat(node), offset


def tree_hinge(levels: Tensor, cut: Tensor, rival: Tensor, node: Tensor, nodes: int,
               margin: float) -> Tensor:
    """``L`` of the module docstring for levels ``(n, B)`` and a batch's pairs
    (:func:`batch_targets`); 0 for a batch without nodes."""
    if nodes == 0:
        return levels.sum() * 0.0
    d = levels.reshape(-1)
    d = d.to(torch.promote_types(d.dtype, torch.float32))     # bf16 levels: compared in fp32
    hinge = torch.relu(margin - (d[cut] - d[rival]))
    per_node = torch.zeros(nodes, dtype=hinge.dtype, device=hinge.device)
    per_node.index_add_(0, node, hinge)
    count = torch.zeros_like(per_node).index_add_(0, node, torch.ones_like(hinge))
    return (per_node / count).mean()


__all__ = ["TreeTargets", "batch_targets", "kept_spans", "reachable_tree", "target_levels",
           "tree_hinge", "tree_targets"]
