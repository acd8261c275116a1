"""Smoke tests for treelm.syntax.render (PNG files are written and well-formed)."""

import numpy as np
import pytest

from treelm.syntax.levels import SentenceLevels
from treelm.syntax.render import (
    plot_levels,
    plot_sentence_levels,
    plot_tree,
    scale_rows,
    tree_layout,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_tree_layout_coordinates():
    nodes, segments, height = tree_layout([["a", "b"], "c"])
    assert height == 2
    assert sorted(nodes) == [(0.5, 1.0), (1.25, 2.0)]
    assert len(segments) == 2 * 3  # per internal node: one bar + two drops
    assert tree_layout("a") == ([], [], 0)


def test_plot_tree_and_levels_write_png(tmp_path):
    tree = [[["苹果", "的"], ["颜色", "是"]], "什么"]
    plot_tree(tree, tmp_path / "tree.png", title="t")
    tokens = ["the", "cat", "sat", "down"]
    plot_levels(tokens, [[0.1, 0.2, 0.9, 0.3], [0.4, 0.1, 0.8, 0.2]],
                [["the", "cat"], ["sat", "down"]], tmp_path / "sub" / "levels.png")
    plot_levels(tokens, [0.1, 0.2, 0.9, 0.3], None, tmp_path / "levels_only.png")
    for name in ("tree.png", "sub/levels.png", "levels_only.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG_MAGIC


def test_plot_levels_checks_shapes(tmp_path):
    with pytest.raises(ValueError):
        plot_levels(["a", "b"], [[0.1, 0.2, 0.3]], None, tmp_path / "x.png")
    with pytest.raises(ValueError):
        plot_levels(["a", "b"], [[0.1, 0.2]], ["a", "b", "c"], tmp_path / "x.png")


def test_scale_rows():
    scaled = scale_rows([[1.0, 3.0, 2.0], [0.5, 0.5, 0.5]])
    assert scaled.tolist() == [[0.0, 1.0, 0.5], [0.5, 0.5, 0.5]]


def test_plot_sentence_levels(tmp_path):
    df = np.array([[0.1, 0.9, 0.3], [0.2, 0.4, 0.8]], dtype=np.float32)
    lv = SentenceLevels(["the", "qqq", "sat"], [2, 1, 3], [1], df, 1 - df, (1, 3))
    for i, kw in enumerate([{}, {"gate": "input", "scale": "shared", "with_tree": False},
                            {"title": "", "style": "split", "run_name": "a$b"}]):
        plot_sentence_levels(lv, tmp_path / f"{i}.png", 3, **kw)
        assert (tmp_path / f"{i}.png").read_bytes()[:8] == PNG_MAGIC
