"""build_tree and tree helpers on a 100,000-token sentence: fast and recursion-free."""


import numpy as np

from treelm.syntax.trees import build_tree, tree_depth, tree_spans


def test_100k_tokens_random_levels():
    n = 100_000
    levels = np.random.default_rng(0).random(n)
    # no recursion limit, no quadratic blow-up that would stall the suite; the speed itself is
    # measured by benchmarks/parse_speed.py, not here (a timed unit test fails under load)
    tree = build_tree(levels, range(n))
    spans = tree_spans(tree)
    assert len(spans) == n - 1  # a binary tree over n leaves has n - 1 internal nodes


def test_100k_tokens_monotone_levels_chain():
    n = 100_000
    tree = build_tree(np.arange(n, dtype=float), range(n))  # left-branching, depth n - 1
    assert tree_depth(tree) == n - 1
    assert len(tree_spans(tree)) == n - 1
