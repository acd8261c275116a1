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

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from treelm.study.spec import Trees


def part_name(max_len: int | None, base: str = "test") -> str:
    """``test`` for every sentence of ``base``, ``test_<max_len>`` for its short ones."""
    return base if max_len is None else f"{base}_{max_len}"


def tree_parts(dev: str, test: str | None,
               test_max_len: list[int | None]) -> list[tuple[str, str, int | None]]:
    """Each part scored, as ``(name, treebank, max_len)``: dev, then test once per
    ``test_max_len`` (none where there is no test treebank)."""
    parts: list[tuple[str, str, int | None]] = [("dev", dev, None)]
    if test:
        parts += [(part_name(n), test, n) for n in test_max_len]
    return parts


def tree_baselines(trees: Trees) -> dict[str, Any]:
    """The trivial trees and the rule control on the study's dev and test sentences."""
    from treelm.syntax.baselines import DEFAULT_BASELINES, RULE_CONTROLS
    from treelm.syntax.report import parsing_report

    out = {}
    for name, treebank, max_len in tree_parts(trees.dev, trees.test, trees.test_max_len):
        # the trivial trees and the rule control (random levels through each tree rule)
        rep = parsing_report(treebank, max_len, baselines=(*DEFAULT_BASELINES, *RULE_CONTROLS))
        out[name] = {"n_sentences": rep["n_sentences"], "n_words": rep["n_words"],
                     "baselines": {k: {m: v[m] for m in ("sentence_f1", "corpus_f1")}
                                   for k, v in rep["baselines"].items()}}
    return out
