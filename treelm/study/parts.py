"""The parts of a treebank a study scores trees on, and the baselines on each.

``score.trees`` names a dev and a test treebank; the parts are

    dev         every dev sentence
    test        every test sentence            (``test_max_len: null``)
    test_<n>    the test sentences of at most n words (``test_max_len: n``; WSJ10: ``test_10``)

in this order, each scored at the end of every run (:mod:`treelm.study.score`) and, once per
study, by the trivial trees and the rule control (:func:`tree_baselines`, the record's
``baselines``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from treelm.study.spec import Trees


def test_part(max_len: int | None) -> str:
    """The record's name of the test part at <= ``max_len`` words: ``test`` (all), ``test_10``."""
    return "test" if max_len is None else f"test_{max_len}"


def tree_parts(trees: Mapping[str, Any]) -> list[tuple[str, str, int | None]]:
    """The parts a study scores trees on, named as its record names them: ``(name, treebank,
    max_len)`` for dev, then for test once per ``test_max_len`` (:func:`test_part`).
    ``trees``: ``score.trees`` as the record keeps it."""
    parts: list[tuple[str, str, int | None]] = [("dev", trees.get("dev"), None)]
    if trees.get("test"):
        parts += [(test_part(n), trees["test"], n) for n in trees["test_max_len"]]
    return parts


def tree_baselines(trees: Trees) -> dict[str, Any]:
    """The trivial trees and the rule control on the study's dev and test sentences."""
    from treelm.syntax.baselines import DEFAULT_BASELINES, RULE_CONTROLS
    from treelm.syntax.report import parsing_report

    out = {}
    for name, treebank, max_len in tree_parts(dataclasses.asdict(trees)):
        # the trivial trees and the rule control (random levels through each tree rule)
        rep = parsing_report(treebank, max_len, baselines=(*DEFAULT_BASELINES, *RULE_CONTROLS))
        out[name] = {"n_sentences": rep["n_sentences"], "n_words": rep["n_words"],
                     "baselines": {k: {m: v[m] for m in ("sentence_f1", "corpus_f1")}
                                   for k, v in rep["baselines"].items()}}
    return out
