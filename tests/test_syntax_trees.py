"""Tests for treelm.syntax.trees: build_tree (ON-LSTM greedy split) and tree helpers."""

import json

import numpy as np
import pytest
import torch

from treelm.errors import TreelmError
from treelm.syntax.trees import (
    ascii_tree,
    build_tree,
    leaf_depths,
    leaves_and_spans,
    mean_leaf_depth,
    read_bracket_tree,
    read_json_tree,
    tree_depth,
    tree_leaves,
    tree_spans,
    tree_to_brackets,
    tree_to_json,
)


def naive_split_tree(levels, tokens):
    """Recursive transcription of the split-point rule, as an oracle for short inputs."""
    if len(tokens) == 1:
        return tokens[0]
    k = max(range(1, len(tokens)), key=lambda i: (levels[i], -i))  # leftmost maximum
    return [naive_split_tree(levels[:k], tokens[:k]), naive_split_tree(levels[k:], tokens[k:])]


def naive_official_tree(levels, tokens):
    """Recursive transcription of the official rule [x_<k, [x_k, x_>k]], empty sides dropped."""
    if len(tokens) == 1:
        return tokens[0]
    k = max(range(len(tokens)), key=lambda i: (levels[i], -i))
    part = tokens[k]
    if k + 1 < len(tokens):
        part = [part, naive_official_tree(levels[k + 1 :], tokens[k + 1 :])]
    if k == 0:
        return part
    return [naive_official_tree(levels[:k], tokens[:k]), part]


@pytest.mark.parametrize("style", ["official", "split"])
def test_known_case_peaks_at_token_4_then_token_2(style):
    # the highest level is token 4 (0.9) -> [1 2 3] [4 5]; in [1 2 3] it is token 2.
    tree = build_tree([0, 0.5, 0.1, 0.9, 0.2], [1, 2, 3, 4, 5], style)
    assert tree == [[1, [2, 3]], [4, 5]]
    assert tree_to_brackets(tree) == "((1 (2 3)) (4 5))"


def test_official_rule_split_token_opens_the_right_part():
    # 4 is highest: [[1 2 3], [4, tree(5 6)]]; in (5 6)... the right part binds 4 to all of it
    assert build_tree([0, 0.5, 0.1, 0.9, 0.1, 0.5], [1, 2, 3, 4, 5, 6]) == \
        [[1, [2, 3]], [4, [5, 6]]]
    # the first token may be the highest: it opens the whole sentence
    assert build_tree([100.0, 1.0, 1.0], ["a", "b", "c"]) == ["a", ["b", "c"]]
    assert build_tree([0.0, 0.0, 0.0, 0.0], [1, 2, 3, 4]) == [1, [2, [3, 4]]]   # ties: leftmost
    # the last token highest: [tree(x_<k), x_k]
    assert build_tree([0, 1, 2, 3], [1, 2, 3, 4]) == [[[1, 2], 3], 4]


def test_split_rule_ignores_first_level_and_ties_go_left():
    assert build_tree([100.0, 1.0, 1.0], ["a", "b", "c"], "split") == ["a", ["b", "c"]]
    assert build_tree([0.0, 0.0, 0.0, 0.0], [1, 2, 3, 4], "split") == [1, [2, [3, 4]]]
    assert build_tree([0, 1, 2, 3], [1, 2, 3, 4], "split") == [[[1, 2], 3], 4]
    # where the two rules differ: the official one binds 4 to (5 6); split splits (4 5 6) at 6
    assert build_tree([0, 0.1, 0.9, 0.1, 0.5], [2, 3, 4, 5, 6], "split") == [[2, 3], [[4, 5], 6]]
    with pytest.raises(ValueError, match="style"):
        build_tree([0, 1], [1, 2], "nope")


def test_single_token_and_errors():
    assert build_tree([0.3], ["w"]) == "w"
    with pytest.raises(ValueError):
        build_tree([], [])
    with pytest.raises(ValueError):
        build_tree([0.1, 0.2], ["a"])
    with pytest.raises(ValueError):
        build_tree([0.1, float("nan")], ["a", "b"])


def test_matches_recursive_oracle_on_random_inputs():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 14))
        levels = rng.integers(0, 4, size=n).tolist()  # many ties on purpose
        tokens = list(range(n))
        assert build_tree(levels, tokens) == naive_official_tree(levels, tokens)
        assert build_tree(levels, tokens, "split") == naive_split_tree(levels, tokens)


def test_accepts_numpy_and_torch_levels():
    levels = [0, 0.5, 0.1, 0.9, 0.2]
    expected = [[1, [2, 3]], [4, 5]]
    assert build_tree(np.array(levels), [1, 2, 3, 4, 5]) == expected
    assert build_tree(torch.tensor(levels), [1, 2, 3, 4, 5]) == expected


def test_brackets_json_leaves():
    tree = [["the", "cat"], ["sat", "down"]]
    assert tree_to_brackets(tree) == "((the cat) (sat down))"
    assert tree_to_brackets("word") == "word"
    zh = [[["苹果", "的"], ["颜色", "是"]], "什么"]
    assert tree_to_json(zh) == '[[["苹果","的"],["颜色","是"]],"什么"]'
    assert json.loads(tree_to_json(zh)) == zh
    assert tree_to_json((1, (2, 3))) == "[1,[2,3]]"
    assert tree_leaves(zh) == ["苹果", "的", "颜色", "是", "什么"]
    assert tree_leaves("x") == ["x"]


def test_spans_and_depths():
    tree = [[1, [2, 3]], [4, 5]]
    assert tree_spans(tree) == {(0, 5), (0, 3), (1, 3), (3, 5)}
    assert tree_spans([["a"], "b"]) == {(0, 2)}  # unary node adds no new span
    assert tree_spans("a") == set()
    assert leaf_depths(tree) == [2, 3, 3, 2, 2]
    assert tree_depth(tree) == 3
    assert tree_depth("a") == 0
    assert mean_leaf_depth(tree) == pytest.approx(12 / 5)


def _naive_spans(tree, start=0):
    """Recursive spans over >= 2 leaves and the leaf count: an oracle for the iterative walk."""
    if not isinstance(tree, (list, tuple)):
        return set(), 1
    spans, n = set(), 0
    for child in tree:
        sub, m = _naive_spans(child, start + n)
        spans |= sub
        n += m
    if n >= 2:
        spans.add((start, start + n))
    return spans, n


def _random_tree(rng, leaves):
    """A random n-ary tree with unary nodes and tuples among its lists."""
    if len(leaves) == 1 and rng.random() < 0.7:
        return leaves[0]
    cuts = sorted(rng.choice(range(1, len(leaves)), size=min(len(leaves) - 1, rng.integers(0, 3)),
                             replace=False)) if len(leaves) > 1 else []
    parts = [leaves[a:b] for a, b in zip([0, *cuts], [*cuts, len(leaves)])]
    kids = [_random_tree(rng, p) for p in parts]
    return tuple(kids) if rng.random() < 0.2 else kids


def test_leaves_and_spans_agree_with_a_recursive_walk():
    rng = np.random.default_rng(0)
    for n in [1, 2, 3, 5, 8, 13, 30] * 20:
        tree = _random_tree(rng, [f"w{i}" for i in range(n)])
        leaves, spans = leaves_and_spans(tree)
        length = len(leaves)
        assert (spans, length) == _naive_spans(tree)
        assert spans == tree_spans(tree) and length == len(tree_leaves(tree)) == n
        assert leaves == tree_leaves(tree)


def test_ascii_tree_drawing():
    drawing = ascii_tree([["the", "cat"], ["sat", "down"]])
    assert drawing.splitlines() == [
        "┬─┬─ the",
        "│ └─ cat",
        "└─┬─ sat",
        "  └─ down",
    ]
    assert ascii_tree("solo") == "solo"


def test_deep_trees_do_not_recurse():
    n = 5000
    tokens = list(range(n))
    chain = build_tree(list(range(n)), tokens)  # left-branching, depth n - 1
    assert tree_depth(chain) == n - 1
    assert len(tree_spans(chain)) == n - 1
    assert tree_leaves(chain) == tokens
    assert tree_to_brackets(chain).count("(") == n - 1
    assert json.loads(tree_to_json(build_tree([0] * 300, tokens[:300])))[0] == 0
    assert tree_to_json(chain).count("[") == n - 1
    assert len(ascii_tree(build_tree([0] * 1000, tokens[:1000])).splitlines()) == 1000


def test_read_bracket_tree():
    assert read_bracket_tree("( (a b) c )") == [["a", "b"], "c"]
    assert read_bracket_tree("((a) (b c))") == ["a", ["b", "c"]]
    assert read_bracket_tree("word") == "word"
    tree = [["the", "cat"], ["sat", ["on", ["the", "mat"]]]]
    assert read_bracket_tree(tree_to_brackets(tree)) == tree
    for bad in ("((a b)", "(a b))", "()", "(a) (b)", "  "):
        with pytest.raises(ValueError):
            read_bracket_tree(bad)


def test_read_json_tree():
    tree = [["苹果", "的"], ["颜色", [1, 2.5]]]
    assert read_json_tree(tree_to_json(tree)) == tree
    assert read_json_tree('"word"') == "word"
    for bad, why in (("[[]]", "empty list"), ('[["a", true]]', "not a string or number"),
                     ('[["a", null]]', "not a string or number"), ("[[a]]", "malformed JSON")):
        with pytest.raises(TreelmError, match=why):
            read_json_tree(bad)
