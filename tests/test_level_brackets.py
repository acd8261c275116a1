"""The tracker's brackets straight from levels (treelm/syntax/level_brackets.py) against the
trees themselves: every bracket set equals ``brackets(build_tree(...))`` under both rules, ties
included, and the sentence F1 equals ``span_prf``'s."""

import numpy as np
import pytest

from treelm.syntax.level_brackets import bracket_masks, sentence_f1s, spans_of
from treelm.syntax.metrics import brackets, span_prf
from treelm.syntax.trees import TREE_STYLES, build_tree


def _sentences(rng: np.random.Generator, count: int, ties: bool) -> list[np.ndarray]:
    out = []
    for _ in range(count):
        n = int(rng.integers(1, 40))
        # few distinct values: many ties, which the leftmost-ancestor rule must break alike
        out.append(rng.integers(0, 4, n).astype(np.float32) if ties
                   else rng.random(n).astype(np.float32))
    return out


@pytest.mark.parametrize("rule", TREE_STYLES)
@pytest.mark.parametrize("ties", [False, True])
def test_brackets_equal_the_trees(rule: str, ties: bool) -> None:
    rng = np.random.default_rng(7 + ties)
    levels = _sentences(rng, 300, ties)
    masks = bracket_masks(levels, rule)
    for s, lv in enumerate(levels):
        tree = build_tree(lv, list(range(len(lv))), rule)
        assert spans_of(masks[s]) == brackets(tree), (rule, lv.tolist())


@pytest.mark.parametrize("rule", TREE_STYLES)
def test_sentence_f1_equals_span_prf(rule: str) -> None:
    rng = np.random.default_rng(3)
    levels = _sentences(rng, 700, ties=True)    # more than one chunk of 256
    # gold: another sentence's tree of the same length (some gold sets empty: n <= 2)
    gold = [brackets(build_tree(rng.random(len(lv)), list(range(len(lv))), "official"))
            for lv in levels]
    f1 = sentence_f1s(levels, rule, gold)
    pred = [brackets(build_tree(lv, list(range(len(lv))), rule)) for lv in levels]
    assert sum(f1.tolist()) / len(f1) == pytest.approx(span_prf(zip(pred, gold))[0].f1,
                                                       abs=1e-12)
    assert not np.allclose(f1, f1[0])     # the F1s differ from sentence to sentence


def test_bad_levels_are_refused_as_build_tree_refuses_them() -> None:
    with pytest.raises(ValueError, match="NaN"):
        bracket_masks([np.array([0.1, np.nan, 0.3])], "official")
    with pytest.raises(ValueError, match="zero tokens"):
        bracket_masks([np.array([0.1]), np.array([])], "split")
    with pytest.raises(ValueError, match="unknown tree style"):
        bracket_masks([np.array([0.1])], "balanced")
    with pytest.raises(ValueError, match="2 sentences"):
        sentence_f1s([np.array([0.1]), np.array([0.2])], "official", [set()])
