"""Binary trees as bits: a corpus of trees small enough to keep in a study's record.

A binary tree over n words has 2n - 1 nodes. Walked in pre-order, each node is one bit,

    b(node) = 1 if the node is internal (two children follow), 0 if it is a word,

so a tree costs 2n - 1 bits, and the sentence lengths (the treebank's) are all a reader needs to
cut a corpus' bit string back into trees. A study keeps every reading (checkpoint x rule x layer)
of every run on dev and test this way: ~10 KB per reading of nltk-dev's 40k words, against ~1 MB
as bracketed text, so that ensembles of its runs (:mod:`treelm.syntax.average`) are computed
from the record, with no retraining. The bits are packed 8 to a byte (``numpy.packbits``) and
written as base64 text (JSON keeps it as a string).

Only the shape is kept: leaves come back as the word positions 0..n-1. Trees of one word are the
bare word (one bit, 0). Walks use an explicit stack, as everywhere in :mod:`treelm.syntax.trees`.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import numpy as np

from treelm.errors import TreelmError
from treelm.syntax.trees import Tree, is_leaf


def tree_bits(tree: Tree) -> list[int]:
    """The pre-order bits of a binary tree (1: internal node, 0: leaf)."""
    bits: list[int] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if is_leaf(node):
            bits.append(0)
            continue
        if len(node) != 2:
            raise ValueError(f"a binary tree's node has two children, not {len(node)}")
        bits.append(1)
        todo.append(node[1])
        todo.append(node[0])
    return bits


def encode_trees(trees: Sequence[Tree]) -> str:
    """A corpus of binary trees as one base64 string of packed pre-order bits."""
    bits = [b for t in trees for b in tree_bits(t)]
    return base64.b64encode(np.packbits(np.asarray(bits, dtype=np.uint8)).tobytes()).decode()


def decode_trees(code: str, lengths: Sequence[int]) -> list[Tree]:
    """The trees of :func:`encode_trees`, given each sentence's length; leaves are 0..n-1."""
    need = sum(2 * n - 1 for n in lengths)
    bits = np.unpackbits(np.frombuffer(base64.b64decode(code), dtype=np.uint8))
    if len(bits) < need or len(bits) - need >= 8:
        raise TreelmError(f"a tree code of {len(bits)} bits does not fit {len(lengths)} "
                          f"sentences of {sum(lengths)} words ({need} bits)")
    flat = bits[:need].tolist()
    out: list[Tree] = []
    at = 0
    for n in lengths:
        # rebuild from pre-order: a stack of open nodes, each waiting for its children
        word = 0
        root: list[Tree] = []
        stack: list[list[Tree]] = [root]
        for _ in range(2 * n - 1):
            bit = flat[at]
            at += 1
            parent = stack[-1]
            if bit:
                node: list[Tree] = []
                parent.append(node)
                stack.append(node)
            else:
                parent.append(word)
                word += 1
            while len(stack) > 1 and len(stack[-1]) == 2:
                stack.pop()
        if word != n or len(root) != 1:
            raise TreelmError(f"a tree code does not hold a binary tree of {n} words")
        out.append(root[0])
    return out
