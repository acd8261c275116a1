"""Unlabeled binary trees induced from ON-LSTM levels, and helpers over nested-list trees.

A *tree* here is a nested Python ``list``/``tuple`` whose non-sequence items are the leaves
(tokens: ``str`` in practice, ``int`` in tests).  A bare leaf is a valid one-token tree.
``[["the", "cat"], ["sat", "down"]]`` is the tree ``((the cat) (sat down))``.

Every function in this module walks trees with an explicit stack, never with Python
recursion, so a left- or right-branching tree over 100,000 tokens works as well as a short
one (no ``RecursionError``; linear time in the size of the tree or of the output). Trees are
written as brackets or JSON (:func:`tree_to_brackets`, :func:`tree_to_json`) and read back from
them (:func:`read_bracket_tree`, :func:`read_json_tree`: trees a user hands to ``plot-tree``).

Parsing from levels follows the greedy top-down procedure of Shen et al., "Ordered Neurons:
Integrating Tree Structures into Recurrent Neural Networks" (ICLR 2019), Sec. 5.2 /
``build_tree`` in the official ``test_phrase_grammar.py``: the token whose level (the
master-forget-gate "split point" estimate ``d_t``) is highest opens a new constituent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np

from treelm.errors import TreelmError

T = TypeVar("T")

#: A nested-list tree; leaves are any non-list/tuple objects.
Tree = Any

_OPEN, _LEAF, _CLOSE = 0, 1, 2
_TOKEN_RE = re.compile(r"\(|\)|[^\s()]+")


def is_leaf(tree: Tree) -> bool:
    """True for a leaf (anything that is not a ``list`` or ``tuple``)."""
    return not isinstance(tree, (list, tuple))


TREE_STYLES = ("official", "split")


def _cartesian(values: list[float], first: int) -> tuple[list[int], list[int], int]:
    """Max-Cartesian tree over positions ``first..n-1`` with a monotone stack, O(n).

    Strict ``<`` keeps the leftmost of equal values as the ancestor, so ties go leftmost.
    Returns left-child and right-child arrays (-1 = none) and the root.
    """
    n = len(values)
    left, right = [-1] * n, [-1] * n
    stack: list[int] = []
    for i in range(first, n):
        last = -1
        while stack and values[stack[-1]] < values[i]:
            last = stack.pop()
        left[i] = last
        if stack:
            right[stack[-1]] = i
        stack.append(i)
    return left, right, stack[0]


def build_tree(levels: Sequence[float], tokens: Sequence[T], style: str = "official") -> Tree:
    """Greedy top-down binary tree from per-token levels (ON-LSTM, Shen et al. 2019, Sec. 5.2).

    ``style="official"`` (default) is the rule of the official evaluation
    (``build_tree`` in ON-LSTM's ``test_phrase_grammar.py``): in a span, the token ``x_k`` with the
    highest level (ties: leftmost) starts a new constituent that it opens,
    ``[tree(x_<k), [x_k, tree(x_>k)]]``; an empty side is left out, so ``k = 0`` gives
    ``[x_0, tree(x_>0)]`` and ``k = n-1`` gives ``[tree(x_<k), x_k]``.

    ``style="split"`` is the split-point variant (also in the official file, commented out, and in
    Su Jianlin's re-implementation): ``k = argmax_{i ≥ 1}`` and the span becomes
    ``[tree(x_<k), tree(x_≥k)]``.

    Both are max-Cartesian trees of the levels, built with a monotone stack in O(n) and unfolded
    with an explicit stack: no recursion, so 100,000-token inputs are fine.

    Args:
        levels: n real numbers (list, numpy array or 1-D CPU tensor).
        tokens: n leaves, returned unchanged at the bottom of the tree.

    Returns:
        A nested-list binary tree with n leaves (the bare token if n == 1).

    Raises:
        ValueError: if the lengths differ, n == 0, levels are not 1-D, a level is NaN, or the
        style is unknown.
    """
    if style not in TREE_STYLES:
        raise ValueError(f"unknown tree style {style!r}; choose one of {TREE_STYLES}")
    lv = np.asarray(levels, dtype=np.float64)
    if lv.ndim != 1:
        raise ValueError(f"levels must be 1-D, got shape {lv.shape}")
    n = len(tokens)
    if lv.shape[0] != n:
        raise ValueError(f"{lv.shape[0]} levels for {n} tokens")
    if n == 0:
        raise ValueError("cannot build a tree over zero tokens")
    if np.isnan(lv).any():
        raise ValueError("levels contain NaN")
    if n == 1:
        return tokens[0]
    values = lv.tolist()
    if style == "split":
        return _unfold_split(values, tokens)
    left, right, root = _cartesian(values, 0)
    # post-order over the Cartesian tree: node k -> [L, [x_k, R]] with empty sides dropped
    built: dict[int, Tree] = {}
    todo: list[tuple[int, bool]] = [(root, False)]
    while todo:
        k, ready = todo.pop()
        if not ready:
            todo.append((k, True))
            todo.extend((c, False) for c in (left[k], right[k]) if c >= 0)
            continue
        part: Tree = tokens[k] if right[k] < 0 else [tokens[k], built.pop(right[k])]
        built[k] = part if left[k] < 0 else [built.pop(left[k]), part]
    return built[root]


def _unfold_split(values: list[float], tokens: Sequence[T]) -> Tree:
    n = len(values)
    left, right, root = _cartesian(values, 1)
    # span [lo, hi) with split k -> [span(lo, k), span(k, hi)]; the split of [lo, k) is k's left
    # Cartesian child, that of [k, hi) its right child
    holder: list[Tree] = []
    todo: list[tuple[int, int, int, list[Tree]]] = [(0, n, root, holder)]
    while todo:
        lo, hi, k, out = todo.pop()
        if hi - lo == 1:
            out.append(tokens[lo])
            continue
        node: list[Tree] = []
        out.append(node)
        todo.append((k, hi, right[k], node))  # popped after the left part is complete
        todo.append((lo, k, left[k], node))
    return holder[0]


def mirror_tree(tree: Tree) -> Tree:
    """``tree`` read right to left: every node's children in reverse order (internal nodes come
    back as lists, leaves unchanged). ``build_tree`` of a right-to-left reading (levels and
    tokens reversed), mirrored, is that reading's tree in sentence order."""
    if is_leaf(tree):
        return tree
    root: list[Tree] = []
    todo: list[tuple[Tree, list[Tree]]] = [(tree, root)]
    while todo:
        node, out = todo.pop()
        for child in reversed(node):
            if is_leaf(child):
                out.append(child)
            else:
                new: list[Tree] = []
                out.append(new)
                todo.append((child, new))
    return root


def _events(tree: Tree) -> Iterator[tuple[int, Tree]]:
    """Pre-order walk yielding ``(_OPEN, node)``, ``(_LEAF, leaf)``, ``(_CLOSE, node)``."""
    stack: list[tuple[int, Tree]] = [(_OPEN, tree)]
    while stack:
        kind, item = stack.pop()
        if kind == _CLOSE:
            yield _CLOSE, item
        elif is_leaf(item):
            yield _LEAF, item
        else:
            yield _OPEN, item
            stack.append((_CLOSE, item))
            stack.extend((_OPEN, child) for child in reversed(item))


def tree_leaves(tree: Tree) -> list[Any]:
    """The leaves of ``tree`` from left to right (``[tree]`` for a bare leaf)."""
    return [item for kind, item in _events(tree) if kind == _LEAF]


def leaves_and_spans(tree: Tree) -> tuple[list[Any], set[tuple[int, int]]]:
    """The leaves of ``tree`` and all its spans ``(start, end_exclusive)`` over at least two
    leaves, the whole sentence's included, in one walk: the one span walk of the metrics
    (:mod:`treelm.syntax.metrics`) and of tree ensembles (:mod:`treelm.syntax.ensemble`), which
    read thousands of trees at each validation. A unary chain's span counts once. The walk keeps
    a stack of the open nodes' child iterators, so a node's run of leaves is read in one loop."""
    if is_leaf(tree):
        return [tree], set()
    leaves: list[Any] = []
    spans: set[tuple[int, int]] = set()
    stack: list[tuple[Iterator[Tree], int]] = [(iter(tree), 0)]
    while stack:
        children, start = stack[-1]
        for child in children:
            if isinstance(child, (list, tuple)):
                stack.append((iter(child), len(leaves)))
                break
            leaves.append(child)
        else:                           # the node is complete: its words are start..len-1
            stack.pop()
            if len(leaves) - start >= 2:
                spans.add((start, len(leaves)))
    return leaves, spans


def tree_spans(tree: Tree) -> set[tuple[int, int]]:
    """All constituent spans ``(start, end_exclusive)`` covering at least two leaves.

    Leaf positions are counted from 0. The whole-sentence span ``(0, n)`` is included
    (metrics drop it themselves); a unary node contributes the same span as its child.
    """
    return leaves_and_spans(tree)[1]


def leaf_depths(tree: Tree) -> list[int]:
    """For each leaf, the number of internal nodes above it (0 for a bare-leaf tree)."""
    depths: list[int] = []
    depth = 0
    for kind, _ in _events(tree):
        if kind == _OPEN:
            depth += 1
        elif kind == _CLOSE:
            depth -= 1
        else:
            depths.append(depth)
    return depths


def tree_depth(tree: Tree) -> int:
    """Height of the tree in edges: 0 for a bare leaf, 1 for ``[a, b]``, n-1 for a chain."""
    return max(leaf_depths(tree), default=0)


def mean_leaf_depth(tree: Tree) -> float:
    """Mean over leaves of :func:`leaf_depths`.

    This is ``average_depth`` of the ON-LSTM/PRPN ``parse_comparison.py`` (number of
    brackets enclosing each word in the bracketed string, averaged over words).
    """
    depths = leaf_depths(tree)
    return sum(depths) / len(depths) if depths else 0.0


def _write(tree: Tree, brackets: str, sep: str, leaf: Callable[[Any], str]) -> str:
    """``tree`` as text: each node's children between ``brackets[0]`` and ``brackets[1]``,
    siblings separated by ``sep``, each leaf as ``leaf(it)``. Iterative (no recursion limit)."""
    parts: list[str] = []
    prev = None
    for kind, item in _events(tree):
        if kind == _CLOSE:
            parts.append(brackets[1])
        else:
            if prev is not None and prev != _OPEN:
                parts.append(sep)
            parts.append(brackets[0] if kind == _OPEN else leaf(item))
        prev = kind
    return "".join(parts)


def tree_to_brackets(tree: Tree) -> str:
    """Bracketed string, e.g. ``((the cat) (sat down))``; leaves are rendered with ``str``."""
    return _write(tree, "()", " ", str)


def tree_to_json(tree: Tree) -> str:
    """Compact JSON of nested lists with non-ASCII text kept, e.g. ``[["苹果","的"],"什么"]``.

    Leaves are encoded with ``json.dumps`` (so they must be JSON-serialisable); tuples become
    lists. The encoder is iterative, unlike ``json.dumps`` on a deeply nested list.
    """
    return _write(tree, "[]", ",", lambda leaf: json.dumps(leaf, ensure_ascii=False))


def ascii_tree(tree: Tree) -> str:
    """Multi-line drawing of ``tree`` with box-drawing characters, one leaf per line.

    The root is on the left, leaves on the right; each internal node is a ``┬`` whose first
    child continues on the same line and whose other children hang below it::

        ┬─┬─ the
        │ └─ cat
        └─┬─ sat
          └─ down

    Cost is linear in the size of the drawing (which is O(n * depth) characters).
    """
    lines: list[str] = []
    # (node, prefix for its first line, prefix for the lines below it)
    stack: list[tuple[Tree, str, str]] = [(tree, "", "")]
    while stack:
        node, first, rest = stack.pop()
        if is_leaf(node):
            lines.append(f"{first} {node}" if first else str(node))
            continue
        children = list(node)
        if not children:
            lines.append(f"{first} ∅")
            continue
        jobs = []
        for i, child in enumerate(children):
            last = i == len(children) - 1
            if i == 0:
                head = first + ("─" if last else "┬")
            else:
                head = rest + ("└" if last else "├")
            below = rest + (" " if last else "│")
            jobs.append((child, head + "─", below + " "))
        stack.extend(reversed(jobs))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- reading trees
class MalformedTreeError(TreelmError):
    """Brackets that are not one tree (unbalanced, empty, several side by side, no leaf)."""


def bracket_tokens(text: str) -> list[str]:
    """The tokens of a bracketed tree: ``(``, ``)`` and the maximal runs of other characters
    than whitespace and brackets."""
    return _TOKEN_RE.findall(text)


def bracket_tree(tokens: Sequence[str], labelled: bool = False,
                 words: Sequence[Any] | None = None) -> tuple[Tree, list[str]]:
    """The tree of :func:`bracket_tokens` and its leaves as written, iteratively: the one
    bracket reader (of :func:`read_bracket_tree` and :mod:`treelm.syntax.tree_files`). A bracket
    with one child is that child; ``labelled``: the token after each ``(``, where not a bracket,
    is a label, dropped; ``words``: leaf ``i`` is ``words[i]`` (where there is one), not the
    token as written. Raises :class:`MalformedTreeError` (unbalanced or empty brackets, several
    trees, no leaf)."""
    if not tokens:
        raise MalformedTreeError("the tree is empty")
    stack: list[list[Any]] = [[]]
    leaves: list[str] = []
    skip = False
    for tok in tokens:
        if tok == "(":
            stack.append([])
            skip = labelled
            continue
        if tok == ")":
            if len(stack) == 1:
                raise MalformedTreeError("malformed tree: more ')' than '('")
            node = stack.pop()
            if not node:
                raise MalformedTreeError("malformed tree: empty brackets ()")
            stack[-1].append(node[0] if len(node) == 1 else node)
        elif not skip:
            k = len(leaves)
            stack[-1].append(tok if words is None or k >= len(words) else words[k])
            leaves.append(tok)
        skip = False
    if len(stack) > 1:
        raise MalformedTreeError(f"malformed tree: {len(stack) - 1} unclosed '('")
    if len(stack[0]) != 1:
        raise MalformedTreeError(f"malformed tree: {len(stack[0])} trees side by side; wrap "
                                 "them in one pair of brackets")
    return stack[0][0], leaves


def read_bracket_tree(text: str, labelled: bool = False) -> Tree:
    """``"((the cat) (sat down))"`` -> ``[["the", "cat"], ["sat", "down"]]`` (iterative): the
    inverse of :func:`tree_to_brackets`, for trees a user types or pipes in; ``labelled``:
    ``(S (NP the cat) sat)`` (:func:`bracket_tree`). A bare word is a one-leaf tree. Raises
    :class:`MalformedTreeError` (a ``TreelmError``, a ``ValueError``)."""
    return bracket_tree(bracket_tokens(text), labelled)[0]


def read_json_tree(text: str) -> Tree:
    """A tree given as JSON nested lists, ``[["the","cat"],["sat","down"]]``, checked.

    The inverse of :func:`tree_to_json`. The check walks the tree with a stack, so a deep tree
    is fine once ``json`` has read it.

    Raises:
        TreelmError: (a ``ValueError``) not JSON, an empty list, or a leaf that is not a string
        or number.
    """
    try:
        tree = json.loads(text)
    except json.JSONDecodeError as e:
        raise TreelmError(f"malformed JSON tree: {e}") from None
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
