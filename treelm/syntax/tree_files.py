"""Tree files: one bracketed tree per line, written by treelm (``treelm parse --format brackets``,
``treelm ensemble``) or by any other parser, read against the sentences they parse.

**The format.** Line ``k`` holds the tree of sentence ``k``. Its leaves are the sentence's words
exactly; for a treebank, its words as the protocol reads them (:func:`treelm.syntax.report.
load_golds`: the treebank's order, punctuation and empty elements removed, lower case, digit
runs -> ``N``). Any labels, or none::

    ((the cat) sat)                       no labels (what treelm writes)
    (S (NP the cat) (VP sat))             a label after every "("
    (S (NP (DT the) (NN cat)) (VP (VBD sat)))   part-of-speech nodes too
    (. (. the cat) (. sat))               a "." label everywhere
    ( (S (NP the cat) (VP sat)) )         a bracket without a label (PTB's outer one)

**Labels or words.** A line is read without labels when its words (the tokens other than
brackets) are as many as the sentence's; otherwise the token right after each ``(``, where it
is not a bracket, is that node's label and is dropped. The two readings never both fit: a line
with a label has more tokens than words. The leaves must then be the sentence's words, in order;
a line that differs is one :class:`~treelm.errors.TreelmError` naming the file, the line and the
first word that differs (in the reading that agrees with the sentence longer).

**Shape.** Trees may be n-ary, with unary nodes (a node with one child is that child): only the
spans count (:mod:`treelm.syntax.metrics`). A one-word sentence is its word, bare or bracketed.
A blank line stands for an empty sentence (``treelm ensemble --input`` keeps the blank lines of
its input); blank lines after the last tree are ignored.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from treelm.errors import TreelmError
from treelm.syntax.trees import Tree

_TOKEN_RE = re.compile(r"\(|\)|[^\s()]+")


class TreeLineError(TreelmError):
    """A line that is not a tree of its sentence; the message does not name the line."""


def _build(tokens: list[str], labelled: bool) -> tuple[Tree, list[str]]:
    """The tree of a line's tokens and its leaves (``labelled``: the word after each ``(`` is a
    label). Iterative; a node with one child is that child."""
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
                raise TreeLineError("malformed tree: more ')' than '('")
            node = stack.pop()
            if not node:
                raise TreeLineError("malformed tree: a bracket without words")
            stack[-1].append(node[0] if len(node) == 1 else node)
        elif not skip:
            stack[-1].append(tok)
            leaves.append(tok)
        skip = False
    if len(stack) > 1:
        raise TreeLineError(f"malformed tree: {len(stack) - 1} unclosed '('")
    if len(stack[0]) != 1:
        raise TreeLineError(f"malformed tree: {len(stack[0])} trees side by side; wrap them in "
                            "one pair of brackets")
    return stack[0][0], leaves


def _difference(leaves: Sequence[str], words: Sequence[str]) -> str:
    i = next((i for i, (a, b) in enumerate(zip(leaves, words)) if a != b), None)
    if i is not None:
        return f"word {i + 1} is {leaves[i]!r} where the sentence has {words[i]!r}"
    if len(leaves) < len(words):
        return (f"the tree ends after word {len(leaves)}; the sentence goes on with "
                f"{words[len(leaves)]!r} (word {len(leaves) + 1} of {len(words)})")
    return (f"the tree has {len(leaves)} words, the sentence {len(words)}: {leaves[len(words)]!r} "
            f"(word {len(words) + 1}) is one too many")


def _common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def read_tree(text: str, words: Sequence[str]) -> Tree:
    """The tree of one line over ``words`` (module docstring: labels are told from words by
    their number), as a nested-list tree whose leaves are ``words``' items.

    Raises:
        TreeLineError: a malformed line, or one whose leaves are not ``words`` (the first word
        that differs).
    """
    tokens = _TOKEN_RE.findall(text)
    if not tokens:
        raise TreeLineError("the line is empty; the sentence has words")
    opens = tokens.count("(")
    n_words = len(tokens) - opens - tokens.count(")")
    labelled = n_words != len(words) and any(
        a == "(" and b not in "()" for a, b in zip(tokens, tokens[1:]))
    if labelled:                    # the labelled reading, unless the plain one agrees longer
        try:
            tree, leaves = _build(tokens, True)
        except TreeLineError:
            tree, leaves = None, []
        if leaves != list(words):
            plain = _build(tokens, False)
            if tree is None or _common_prefix(plain[1], words) > _common_prefix(leaves, words):
                tree, leaves = plain
    else:
        tree, leaves = _build(tokens, False)
    if leaves != list(words):
        raise TreeLineError(_difference(leaves, words))
    return tree


def read_tree_lines(lines: Sequence[str], sentences: Sequence[Sequence[str]], where: str,
                    against: str | None = None) -> list[Tree]:
    """One tree per sentence from ``lines`` (``where``: the file's name in messages; ``against``:
    what the sentences are, e.g. ``the 1,993 sentences of nltk-test``). An empty sentence takes a
    blank line and gives ``None``; blank lines after the last sentence's are dropped.

    Raises:
        TreelmError: more or fewer lines than sentences, or a line that is not its sentence's
        tree (``where:LINE: ...``, the first word that differs).
    """
    lines = list(lines)
    while len(lines) > len(sentences) and not lines[-1].strip():
        lines.pop()
    if len(lines) != len(sentences):
        against = against or f"the {len(sentences)} sentences"
        raise TreelmError(f"{where}: {len(lines)} lines (one tree a line) for {against}")
    trees: list[Tree] = []
    for k, (line, words) in enumerate(zip(lines, sentences), 1):
        if not words:
            if line.strip():
                raise TreelmError(f"{where}:{k}: a tree for an empty sentence; leave the line "
                                  "blank")
            trees.append(None)
            continue
        try:
            trees.append(read_tree(line, words))
        except TreeLineError as e:
            raise TreelmError(f"{where}:{k}: {e}") from None
    return trees


def read_tree_file(path: str | os.PathLike[str], sentences: Sequence[Sequence[str]],
                   against: str | None = None) -> list[Tree]:
    """:func:`read_tree_lines` of a UTF-8 file (one-line errors for a missing, unreadable or
    binary file)."""
    from treelm.text.inputs import file_lines

    return read_tree_lines(file_lines(os.fspath(path)), sentences, os.fspath(path), against)


def treebank_tree_file(path: str | os.PathLike[str], golds: Sequence[Any], treebank: str,
                       max_len: int | None = None) -> tuple[list[Any], list[Tree]]:
    """The trees of a file for a treebank's gold sentences (``golds``: all of them, as
    :func:`~treelm.syntax.report.load_golds` reads them without a length limit), and the golds
    they go with: those of at most ``max_len`` words. The file holds a tree for every sentence
    (those over ``max_len`` words are checked, then left out), or for the kept ones alone.

    Raises:
        TreelmError: the file does not fit either count, or a line is not its sentence's tree.
    """
    from treelm.text.inputs import file_lines

    lines = file_lines(os.fspath(path))
    kept = [g for g in golds if max_len is None or len(g.words) <= max_len]
    while lines and not lines[-1].strip():      # (no gold sentence is empty)
        lines.pop()
    against = f"the {len(golds)} sentences of {treebank}"
    if len(kept) < len(golds):
        against += f" ({len(kept)} of <= {max_len} words)"
        if len(lines) == len(kept):
            return kept, read_tree_lines(lines, [g.words for g in kept], os.fspath(path),
                                         against)
    trees = read_tree_lines(lines, [g.words for g in golds], os.fspath(path), against)
    pairs = [(g, t) for g, t in zip(golds, trees) if max_len is None or len(g.words) <= max_len]
    return [g for g, _ in pairs], [t for _, t in pairs]


__all__ = ["TreeLineError", "read_tree", "read_tree_file", "read_tree_lines",
           "treebank_tree_file"]
