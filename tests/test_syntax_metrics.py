"""Tests for treelm.syntax.metrics with hand-computed sentence- and corpus-level F1."""

import pytest

from treelm.data.treebank import GoldTree
from treelm.syntax.metrics import (
    brackets,
    corpus_f1,
    evaluate,
    label_recall,
    sentence_f1,
    sentence_prf,
)


def gold(words, tree, spans):
    return GoldTree(words=list(words), tree=tree, labeled_spans=spans)


# Sentence 1: gold ((a b) (c (d e)))  brackets {(0,2) (2,5) (3,5)}
#             pred right-branching     brackets {(1,5) (2,5) (3,5)}
#             match 2 -> P = 2/3, R = 2/3, F1 = 2/3
# Sentence 2: gold flat (w x y z)      brackets {}
#             pred left-branching      brackets {(0,2) (0,3)}
#             gold empty -> R = 1; P = 0/2 = 0; F1 = 0
# Sentence 3: gold (p q), pred (p q)   brackets {} and {} -> P = R = F1 = 1
# Sentence 4: gold ((a b c) (d (e f))) brackets {(0,3) (3,6) (4,6)}
#             pred ((a (b c)) ((d e) f)) brackets {(0,3) (1,3) (3,6) (3,5)}
#             match 2 -> P = 2/4, R = 2/3, F1 = 2*(1/2)*(2/3)/(1/2+2/3) = (2/3)/(7/6) = 4/7
GOLDS = [
    gold("abcde", [["a", "b"], ["c", ["d", "e"]]],
         [("S", 0, 5), ("NP", 0, 2), ("VP", 2, 5), ("NP", 3, 5)]),
    gold("wxyz", ["w", "x", "y", "z"], [("FRAG", 0, 4)]),
    gold("pq", ["p", "q"], [("NP", 0, 2)]),
    gold("abcdef", [["a", "b", "c"], ["d", ["e", "f"]]],
         [("S", 0, 6), ("NP", 0, 3), ("VP", 3, 6), ("PP", 4, 6), ("ADJP", 0, 1)]),
]
PREDS = [
    ["a", ["b", ["c", ["d", "e"]]]],
    [[["w", "x"], "y"], "z"],
    ["p", "q"],
    [["a", ["b", "c"]], [["d", "e"], "f"]],
]


def test_brackets_drop_whole_sentence_and_single_words():
    assert brackets(PREDS[0]) == {(1, 5), (2, 5), (3, 5)}
    assert brackets(GOLDS[1].tree) == set()
    assert brackets("solo") == set()


def test_sentence_prf_conventions():
    assert sentence_prf({(0, 2)}, {(0, 2), (1, 3)}) == pytest.approx((1.0, 0.5, 2 / 3))
    assert sentence_prf(set(), set()) == (1.0, 1.0, 1.0)  # both empty
    assert sentence_prf({(0, 2)}, set()) == (0.0, 1.0, 0.0)  # gold empty: R = 1
    assert sentence_prf(set(), {(0, 2)}) == (0.0, 0.0, 0.0)  # pred empty: P = 0 (ref: 0/1e-8)


def test_sentence_level_f1_by_hand():
    result = sentence_f1(PREDS, GOLDS)
    # F1: (2/3 + 0 + 1 + 4/7) / 4 = (14/21 + 21/21 + 12/21) / 4 = 47/84
    assert result.f1 == pytest.approx(47 / 84)
    # P: (2/3 + 0 + 1 + 1/2) / 4 = 13/24 ; R: (2/3 + 1 + 1 + 2/3) / 4 = 5/6
    assert result.precision == pytest.approx(13 / 24)
    assert result.recall == pytest.approx(5 / 6)


def test_corpus_level_f1_by_hand():
    result = corpus_f1(PREDS, GOLDS)
    # matches 2+0+0+2 = 4, predicted 3+2+0+4 = 9, gold 3+0+0+3 = 6
    # P = 4/9, R = 4/6 = 2/3, F1 = 2*(4/9)*(2/3) / (4/9 + 2/3) = (16/27) / (10/9) = 8/15
    assert result.precision == pytest.approx(4 / 9)
    assert result.recall == pytest.approx(2 / 3)
    assert result.f1 == pytest.approx(8 / 15)


def test_label_recall_by_hand():
    # whole-sentence spans excluded; ("ADJP", 0, 1) has one word and never counts.
    # NP: (0,2) miss, (3,5) hit, (0,3) hit -> 2/3 ; VP: (2,5) hit, (3,6) hit -> 2/2 ;
    # PP: (4,6) miss -> 0/1 ; S, FRAG and sentence 3's NP are whole sentences.
    assert label_recall(PREDS, GOLDS) == {"NP": (2, 3), "PP": (0, 1), "VP": (2, 2)}
    # reference behaviour (ON-LSTM corpus_stats_labeled) also counts whole-sentence spans
    assert label_recall(PREDS, GOLDS, include_whole_sentence=True) == {
        "FRAG": (1, 1), "NP": (3, 4), "PP": (0, 1), "S": (2, 2), "VP": (2, 2),
    }


def test_evaluate_collects_everything():
    result = evaluate(PREDS, GOLDS)
    assert result["n_sentences"] == 4
    assert result["sentence_f1"] == pytest.approx(47 / 84)
    assert result["corpus_f1"] == pytest.approx(8 / 15)
    assert result["label_recall"] == pytest.approx({"NP": 2 / 3, "PP": 0.0, "VP": 1.0})
    assert result["label_counts"]["NP"] == [2, 3]
    # heights: pred 4, 3, 1, 3 ; gold 3, 1, 1, 3
    assert result["mean_depth_pred"] == pytest.approx(11 / 4)
    assert result["mean_depth_gold"] == pytest.approx(2.0)
    # mean leaf depth pred: (14/5 + 9/4 + 1 + 16/6) / 4
    assert result["mean_leaf_depth_pred"] == pytest.approx((14 / 5 + 9 / 4 + 1 + 16 / 6) / 4)


def test_evaluate_with_plain_gold_trees_and_errors():
    plain = [g.tree for g in GOLDS]
    result = evaluate(PREDS, plain)
    assert result["sentence_f1"] == pytest.approx(47 / 84)
    assert result["label_recall"] == {}
    perfect = evaluate(plain, GOLDS)
    assert perfect["sentence_f1"] == perfect["corpus_f1"] == 1.0
    with pytest.raises(ValueError, match="sentence 1"):
        evaluate([PREDS[0], ["w", "x"]], GOLDS[:2])
    with pytest.raises(ValueError):
        evaluate(PREDS[:3], GOLDS)
