"""Readings: every tree a checkpoint reads, each ON-LSTM layer under each tree rule, over the
sentences of some parts, the levels read once per part.

A *reading* is one layer ``k`` of a language model's checkpoint under one tree rule ``r``
(:func:`treelm.syntax.trees.build_tree`): per sentence ``s`` the tree
``build_tree(d_f^k(s), r)`` of the master-forget-gate levels (:mod:`treelm.syntax.levels`).
Reading the levels is a forward pass over the sentences, the costly part; building a tree from
them is a linear walk. So every consumer asks here for all the trees it needs at once, and a
part's levels are read once, whatever the number of layers and rules:

* ``eval-parse`` (:func:`treelm.syntax.report.parsing_report`): its treebank's sentences, every
  layer scored, under its rule;
* ``parse`` (:func:`treelm.syntax.report.format_parse`): a chunk of input lines, its layers and
  rule (the levels it streams, :func:`level_trees`);
* ``ensemble`` over runs (:mod:`treelm.parsing.ensemble`): each run once, every reading asked of
  it;
* a study's scoring (:mod:`treelm.study.score`): per checkpoint, dev and test (a test part at
  ``<= n`` words is the subset of test's trees, read in the same pass) and the sentences it
  keeps, every layer under every rule: its figures, its kept trees and so its ensembles.

The training-time tracker (:class:`treelm.syntax.tracking.ParseTracker`) reads the same levels
(:func:`treelm.syntax.levels.sentence_levels`) but wants only the F1 of every layer under every
rule at each validation: it reads the brackets straight off the levels
(:mod:`treelm.syntax.level_brackets`), never building the trees.

A sentence read alone from the zero state gives the same levels in any batch up to float
rounding (:mod:`treelm.syntax.levels`), so a part's trees do not depend on what else is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from treelm.syntax.trees import TREE_STYLES, Tree

#: A reading: ``(layer, rule)``.
Reading = tuple[int, str]


@dataclass(frozen=True)
class PartReadings:
    """The readings of one part's sentences: ``trees[(layer, rule)]``, a tree per sentence
    (``None`` for an empty one), and ``unknown``, per sentence its number of words read as
    ``<unk>``."""

    trees: dict[Reading, list[Tree]]
    unknown: list[int]

    @property
    def oov(self) -> int:
        """The part's words read as ``<unk>``."""
        return sum(self.unknown)


def level_trees(levels: Sequence[Any], layers: Sequence[int], rules: Sequence[str]
                ) -> dict[Reading, list[Tree]]:
    """Every ``(layer, rule)`` tree of sentences whose levels were read
    (:class:`~treelm.syntax.levels.SentenceLevels`: a backward reading's tree is mirrored back
    into sentence order by its ``tree``), rule by rule, layer by layer; ``None`` for an empty
    sentence.

    Raises:
        TreelmError: a layer without master gates.
    """
    return {(k, r): [lv.tree(k, r) if len(lv.tokens) else None for lv in levels]
            for r in rules for k in layers}


def read_parts(model: Any, vocab: Any, parts: Mapping[str, Sequence[Sequence[str]]],
               layers: Sequence[int] | None = None, rules: Sequence[str] = TREE_STYLES,
               batch_size: int = 256, unk: str = "map") -> dict[str, PartReadings]:
    """Per part (``parts``: a name and its tokenised sentences), every ``(layer, rule)`` tree
    of a loaded checkpoint's language model (``model``, ``vocab``), the levels read in one
    batched pass per part (:func:`treelm.syntax.levels.sentence_levels`).

    Args:
        layers: 1-based ON-LSTM layers (default: all of them).
        rules: tree rules of :func:`~treelm.syntax.trees.build_tree`.
        batch_size, unk: sentences per forward pass; ``"map"`` or ``"error"`` for words
            outside ``vocab``.

    Raises:
        TreelmError: the model has no master gates, a layer has none, or (``unk="error"``) a
            word is unknown.
    """
    from treelm.syntax.levels import onlstm_layers, sentence_levels

    if layers is None:
        layers = onlstm_layers(model)
    out = {}
    for name, sentences in parts.items():
        levels = sentence_levels(model, vocab, sentences, batch_size, unk)
        out[name] = PartReadings(level_trees(levels, layers, rules),
                                 [len(lv.unknown) for lv in levels])
    return out


__all__ = ["PartReadings", "Reading", "level_trees", "read_parts"]
