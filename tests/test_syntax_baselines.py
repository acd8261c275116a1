"""Tests for treelm.syntax.baselines."""

import numpy as np
import pytest

from treelm.data.treebank import GoldTree
from treelm.syntax.baselines import (
    balanced,
    balanced_left,
    evaluate_baselines,
    left_branching,
    random_levels,
    random_tree,
    right_branching,
)
from treelm.syntax.metrics import evaluate
from treelm.syntax.trees import build_tree, tree_leaves, tree_spans


def test_shapes():
    words = list("abcde")
    assert left_branching(words) == [[[["a", "b"], "c"], "d"], "e"]
    assert right_branching(words) == ["a", ["b", ["c", ["d", "e"]]]]
    # span of m words split at floor(m/2): the right half gets the extra word, at every level
    assert balanced(words) == [["a", "b"], ["c", ["d", "e"]]]
    assert balanced(list("abc")) == ["a", ["b", "c"]]
    assert balanced(list("abcd")) == [["a", "b"], ["c", "d"]]
    # 7 -> 3 + 4; the 3 splits as 1 + 2, the 4 as 2 + 2
    assert balanced(list("abcdefg")) == [["a", ["b", "c"]], [["d", "e"], ["f", "g"]]]
    assert tree_spans(balanced(words)) == {(0, 5), (0, 2), (2, 5), (3, 5)}
    # the mirror construction: the left half gets the extra word
    assert balanced_left(words) == [[["a", "b"], "c"], ["d", "e"]]
    assert balanced_left(list("abcdefg")) == [[["a", "b"], ["c", "d"]], [["e", "f"], "g"]]
    for make in (left_branching, right_branching, balanced, balanced_left):
        assert make(["x"]) == "x"
        with pytest.raises(ValueError):
            make([])


def test_spans_by_formula():
    n = 9
    words = list(range(n))
    assert tree_spans(right_branching(words)) == {(i, n) for i in range(n - 1)}
    assert tree_spans(left_branching(words)) == {(0, j) for j in range(2, n + 1)}


def test_random_tree_is_seeded_binary_and_uniform_at_the_top():
    words = list(range(6))
    assert random_tree(words, 3) == random_tree(words, 3)
    tree = random_tree(words, np.random.default_rng(0))
    assert tree_leaves(tree) == words and len(tree_spans(tree)) == 5
    rng = np.random.default_rng(1)
    first_split = [len(tree_leaves(random_tree(words, rng)[0])) for _ in range(2000)]
    counts = np.bincount(first_split, minlength=6)[1:]
    assert counts.min() > 300  # each of the 5 split points ~400 times


def test_long_inputs_are_iterative():
    words = list(range(20000))
    for make in (left_branching, right_branching, balanced, balanced_left):
        assert len(tree_spans(make(words))) == len(words) - 1


def test_evaluate_baselines_on_tiny_corpus():
    golds = [
        GoldTree(list("abcd"), ["a", ["b", ["c", "d"]]], [("S", 0, 4), ("VP", 1, 4)]),
        GoldTree(list("abc"), ["a", ["b", "c"]], [("S", 0, 3), ("VP", 1, 3)]),
    ]
    results = evaluate_baselines(golds, seeds=range(3))
    assert results["right_branching"]["sentence_f1"] == 1.0
    assert results["left_branching"]["corpus_f1"] == 0.0
    assert results["right_branching"]["label_recall"] == {"VP": 1.0}
    rand = results["random"]["sentence_f1"]
    assert len(rand["runs"]) == 3 and 0.0 <= rand["mean"] <= 1.0 and rand["std"] >= 0.0


def test_evaluate_baselines_names_order_and_random_details():
    golds = [
        GoldTree(list("abcde"), [["a", "b"], ["c", ["d", "e"]]],
                 [("S", 0, 5), ("NP", 0, 2), ("VP", 2, 5), ("NP", 3, 5)]),
        GoldTree(list("abc"), ["a", ["b", "c"]], [("S", 0, 3), ("VP", 1, 3)]),
    ]
    full = evaluate_baselines(golds, seeds=range(3))
    assert list(full) == ["random", "balanced", "left_branching", "right_branching"]
    assert full["balanced"]["sentence_f1"] == 1.0        # the gold trees are balanced here
    some = evaluate_baselines(golds, seeds=range(3), names=["right_branching", "balanced_left"])
    assert list(some) == ["balanced_left", "right_branching"]
    assert some["balanced_left"]["sentence_f1"] < 1.0
    # the random summary carries the per-seed means of label recall and depths
    runs = []
    for seed in range(3):
        gen = np.random.default_rng(seed)
        runs.append(evaluate([random_tree(g.words, gen) for g in golds], golds))
    rand = full["random"]
    assert rand["sentence_f1"]["runs"] == [r["sentence_f1"] for r in runs]
    assert rand["mean_depth_pred"] == pytest.approx(np.mean([r["mean_depth_pred"] for r in runs]))
    for label in ("NP", "VP"):
        assert rand["label_recall"][label] == pytest.approx(
            np.mean([r["label_recall"].get(label, 0.0) for r in runs]))
    with pytest.raises(ValueError, match="unknown baseline"):
        evaluate_baselines(golds, names=["middle"])


def test_rule_control_is_random_levels_through_each_rule():
    words = list(range(9))
    levels = np.random.default_rng(4).random(9)
    assert random_levels(words, 4, "official") == build_tree(levels, words, "official")
    assert random_levels(words, 4, "split") == build_tree(levels, words, "split")
    assert random_levels(words, 4, "split") == random_tree(words, 4)   # the same draws
    assert random_levels(["x"], 0) == "x"


def test_rule_controls_scored_over_seeds():
    golds = [
        GoldTree(list("abcdef"), ["a", [["b", "c"], ["d", ["e", "f"]]]],
                 [("S", 0, 6), ("VP", 1, 6), ("NP", 1, 3), ("PP", 3, 6)]),
        GoldTree(list("abcd"), [["a", "b"], ["c", "d"]], [("S", 0, 4), ("NP", 0, 2)]),
    ]
    res = evaluate_baselines(golds, seeds=range(4), names=["random_levels_split",
                                                             "random_levels_official", "random"])
    assert list(res) == ["random", "random_levels_official", "random_levels_split"]
    assert res["random_levels_split"] == res["random"]
    for seed, f1 in enumerate(res["random_levels_official"]["sentence_f1"]["runs"]):
        gen = np.random.default_rng(seed)
        trees = [build_tree(gen.random(len(g.words)), g.words, "official") for g in golds]
        assert f1 == evaluate(trees, golds)["sentence_f1"]
    runs = res["random_levels_official"]["sentence_f1"]["runs"]
    assert res["random_levels_official"]["sentence_f1"]["mean"] == pytest.approx(np.mean(runs))
