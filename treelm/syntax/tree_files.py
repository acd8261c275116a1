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
with a label has more tokens than words. The leaves must then be the sentence's words, in order,
as written or as the treebank normalises them (a parser's released trees keep ``Stocks`` and
``1987``, which the protocol reads as ``stocks`` and ``N``: they match); with ``--match
position`` any words do, as many as the sentence's (the lines spelt otherwise are counted). A
line that differs is one :class:`~treelm.errors.TreelmError` naming the file, the line and the
first word that differs (in the reading that agrees with the sentence longer).

**Shape.** Trees may be n-ary, with unary nodes (a node with one child is that child): only the
spans count (:mod:`treelm.syntax.metrics`). A one-word sentence is its word, bare or bracketed.
A blank line stands for an empty sentence (``treelm ensemble --input`` keeps the blank lines of
its input); blank lines after the last tree are ignored.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from treelm.errors import TreelmError
from treelm.syntax.trees import MalformedTreeError, Tree, bracket_tokens, bracket_tree

#: How a file's leaves are matched with its sentence's words: as words (the default: equal, or
#: equal once normalised as the treebank is) or by position (any spelling, the same count).
MATCHES = ("words", "position")


class TreeLineError(MalformedTreeError):
    """A line that is not a tree of its sentence; the message does not name the line."""


def _same(word: str) -> str:
    return word


def _agree(leaves: Sequence[str], words: Sequence[str], normalize: Callable[[str], str]
           ) -> bool:
    """Whether a line's leaves are the sentence's words: equal, or equal once normalised (a
    parser's released trees keep the words as written: ``1987``, ``Stocks``)."""
    return len(leaves) == len(words) and all(
        a == b or normalize(a) == b for a, b in zip(leaves, words))


def _difference(leaves: Sequence[str], words: Sequence[str],
                normalize: Callable[[str], str] = _same) -> str:
    i = next((i for i, (a, b) in enumerate(zip(leaves, words))
              if a != b and normalize(a) != b), None)
    if i is not None:
        return f"word {i + 1} is {leaves[i]!r} where the sentence has {words[i]!r}"
    if len(leaves) < len(words):
        return (f"the tree ends after word {len(leaves)}; the sentence goes on with "
                f"{words[len(leaves)]!r} (word {len(leaves) + 1} of {len(words)})")
    return (f"the tree has {len(leaves)} words, the sentence {len(words)}: {leaves[len(words)]!r} "
            f"(word {len(words) + 1}) is one too many")


def _common_prefix(a: Sequence[str], b: Sequence[str], normalize: Callable[[str], str]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y and normalize(x) != y),
                min(len(a), len(b)))


def read_tree(text: str, words: Sequence[str], normalize: Callable[[str], str] = _same,
              match: str = "words") -> Tree:
    """The tree of one line over ``words`` (module docstring: labels are told from words by
    their number), as a nested-list tree whose leaves are ``words``' items. A leaf is its word
    when equal to it or once ``normalize`` (the treebank's own normalisation) maps it to it;
    ``match="position"``: any leaves, as many as the words.

    Raises:
        TreeLineError: a malformed line, or one whose leaves are not ``words`` (the first word
        that differs).
    """
    return _read_line(text, words, normalize, match)[0]


def _read_line(text: str, words: Sequence[str], normalize: Callable[[str], str], match: str
               ) -> tuple[Tree, bool]:
    """:func:`read_tree` and whether the line's leaves were spelt otherwise than ``words``."""
    tokens = bracket_tokens(text)
    if not tokens:
        raise TreeLineError("the line is empty; the sentence has words")
    n_words = len(tokens) - tokens.count("(") - tokens.count(")")
    labelled = n_words != len(words) and any(
        a == "(" and b not in "()" for a, b in zip(tokens, tokens[1:]))
    try:
        leaves = bracket_tree(tokens, labelled)[1]
        if labelled and not _fits(leaves, words, normalize, match):
            # the labelled reading, unless the plain one agrees longer
            plain = bracket_tree(tokens, False)[1]
            if _common_prefix(plain, words, normalize) > _common_prefix(leaves, words, normalize):
                labelled, leaves = False, plain
    except MalformedTreeError as e:
        if not labelled:
            raise TreeLineError(str(e)) from None
        labelled, leaves = False, _plain_leaves(tokens)
    if not _fits(leaves, words, normalize, match):
        raise TreeLineError(_difference(leaves, words, normalize))
    return bracket_tree(tokens, labelled, words)[0], leaves != list(words)


def _fits(leaves: Sequence[str], words: Sequence[str], normalize: Callable[[str], str],
          match: str) -> bool:
    if match == "position":
        return len(leaves) == len(words)
    return _agree(leaves, words, normalize)


def _plain_leaves(tokens: list[str]) -> list[str]:
    """The leaves of the reading without labels (its errors as :class:`TreeLineError`)."""
    try:
        return bracket_tree(tokens, False)[1]
    except MalformedTreeError as e:
        raise TreeLineError(str(e)) from None


class Respelt(list):
    """The numbers of the lines of a file whose leaves are spelt otherwise than their
    sentence's words (read with ``match="position"``), of its ``total`` lines read; ``where``:
    the file."""

    def __init__(self, where: str = "") -> None:
        super().__init__()
        self.where, self.total = where, 0

    def note(self, verb: str) -> str:
        """The line a verb says on stderr: how many lines differed in spelling."""
        return (f"treelm {verb}: {self.where}: {len(self)} of {self.total} lines spell words "
                f"otherwise than the sentences; scored by position (--match position)")


def read_tree_lines(lines: Sequence[str], sentences: Sequence[Sequence[str]], where: str,
                    against: str | None = None, normalize: Callable[[str], str] = _same,
                    match: str = "words", respelt: Respelt | None = None) -> list[Tree]:
    """One tree per sentence from ``lines`` (``where``: the file's name in messages; ``against``:
    what the sentences are, e.g. ``the 1,993 sentences of nltk-test``). An empty sentence takes a
    blank line and gives ``None``; blank lines after the last sentence's are dropped. Leaves
    match words as :func:`read_tree` says (``normalize``, ``match``); the numbers of the lines
    whose leaves were spelt otherwise go to ``respelt``.

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
    if respelt is not None:
        respelt.total = len(lines)
    for k, (line, words) in enumerate(zip(lines, sentences), 1):
        if not words:
            if line.strip():
                raise TreelmError(f"{where}:{k}: a tree for an empty sentence; leave the line "
                                  "blank")
            trees.append(None)
            continue
        try:
            tree, other = _read_line(line, words, normalize, match)
        except MalformedTreeError as e:
            raise TreelmError(f"{where}:{k}: {e}") from None
        trees.append(tree)
        if other and match == "position" and respelt is not None:
            respelt.append(k)
    return trees


def read_tree_file(path: str | os.PathLike[str], sentences: Sequence[Sequence[str]],
                   against: str | None = None, match: str = "words",
                   respelt: Respelt | None = None) -> list[Tree]:
    """:func:`read_tree_lines` of a UTF-8 file (one-line errors for a missing, unreadable or
    binary file)."""
    from treelm.text.inputs import file_lines

    return read_tree_lines(file_lines(os.fspath(path)), sentences, os.fspath(path), against,
                           match=match, respelt=respelt)


def treebank_tree_file(path: str | os.PathLike[str], golds: Sequence[Any], treebank: str,
                       max_len: int | None = None, normalize: Callable[[str], str] = _same,
                       match: str = "words", respelt: Respelt | None = None
                       ) -> tuple[list[Any], list[Tree]]:
    """The trees of a file for a treebank's gold sentences (``golds``: all of them, as
    :func:`~treelm.syntax.report.load_golds` reads them without a length limit), and the golds
    they go with: those of at most ``max_len`` words. The file holds a tree for every sentence
    (those over ``max_len`` words are checked, then left out), or for the kept ones alone. Its
    leaves are the words as written or as the treebank normalises them (``normalize``:
    :func:`~treelm.syntax.report.word_normalizer`), or any words by position (``match``).

    Raises:
        TreelmError: the file does not fit either count, or a line is not its sentence's tree.
    """
    from treelm.text.inputs import file_lines

    lines = file_lines(os.fspath(path))
    kept = [g for g in golds if max_len is None or len(g.words) <= max_len]
    while lines and not lines[-1].strip():      # (no gold sentence is empty)
        lines.pop()
    against = f"the {len(golds)} sentences of {treebank}"
    how = {"normalize": normalize, "match": match, "respelt": respelt}
    if len(kept) < len(golds):
        against += f" ({len(kept)} of <= {max_len} words)"
        if len(lines) == len(kept):
            return kept, read_tree_lines(lines, [g.words for g in kept], os.fspath(path),
                                         against, **how)
    trees = read_tree_lines(lines, [g.words for g in golds], os.fspath(path), against, **how)
    pairs = [(g, t) for g, t in zip(golds, trees) if max_len is None or len(g.words) <= max_len]
    return [g for g, _ in pairs], [t for _, t in pairs]


__all__ = ["MATCHES", "Respelt", "TreeLineError", "read_tree", "read_tree_file",
           "read_tree_lines", "treebank_tree_file"]
