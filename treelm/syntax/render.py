"""PNG drawings of induced trees and of ON-LSTM master-forget-gate levels (matplotlib, Agg).

``plot_tree`` draws a tree as a dendrogram: leaves along the bottom in sentence order,
each internal node a horizontal bar above its children at height ``1 + max(child height)``.
``plot_levels`` draws the per-layer levels as a heat map (rows = layers, columns = tokens,
tokens on the x axis, colour bar) with the induced tree above the tokens, in the style of the
figure in Su Jianlin's ON-LSTM post (kexue.fm, 2019) and Fig. 3 of Shen et al. (ICLR 2019).
``plot_sentence_levels`` is the figure of ``treelm plot``: one sentence's levels from a model,
by default min-max scaled per layer (a tree reads only the order of levels within a layer).

Both functions use :class:`matplotlib.figure.Figure` directly (no pyplot state, no GUI
backend) and pick a CJK-capable font when one is installed, silently falling back to
matplotlib's default font otherwise.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from matplotlib import font_manager, rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from treelm.syntax.trees import Tree, is_leaf, tree_leaves

#: Fonts with CJK glyphs, tried in order; the first installed one is put before the default.
CJK_FONTS = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Noto Sans SC",
    "Source Han Sans SC",
    "Source Han Sans CN",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Sarasa Gothic SC",
    "SimHei",
    "Microsoft YaHei",
    "PingFang SC",
    "Heiti SC",
    "Arial Unicode MS",
    "Droid Sans Fallback",
)

_Segment = tuple[tuple[float, float], tuple[float, float]]


def _font_family() -> list[str]:
    installed = {f.name for f in font_manager.fontManager.ttflist}
    cjk = [name for name in CJK_FONTS if name in installed][:1]
    return cjk + ["DejaVu Sans", "sans-serif"]


@contextmanager
def _style():
    """Font fallback chain, no 'Glyph missing' warnings, minus signs in any font."""
    rc = {"font.family": _font_family(), "axes.unicode_minus": False}
    with rc_context(rc), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*[Gg]lyph.*missing.*")
        warnings.filterwarnings("ignore", message=r".*findfont.*")
        yield


def tree_layout(tree: Tree) -> tuple[list[tuple[float, float]], list[_Segment], int]:
    """Dendrogram coordinates of ``tree`` (iterative).

    Leaf i sits at ``(i, 0)``; an internal node sits at height ``1 + max(child heights)``,
    centred between its first and last child.

    Returns:
        ``(nodes, segments, height)``: internal-node positions ``(x, y)``, line segments
        ``((x0, y0), (x1, y1))`` (one horizontal bar per node and one vertical drop per
        child), and the tree height (0 for a bare leaf).
    """
    nodes: list[tuple[float, float]] = []
    segments: list[_Segment] = []
    child_stack: list[list[tuple[float, float]]] = [[]]
    leaf_x = 0
    todo: list[tuple[bool, Tree]] = [(False, tree)]
    while todo:
        closing, item = todo.pop()
        if closing:
            kids = child_stack.pop()
            if not kids:
                continue
            y = max(k[1] for k in kids) + 1.0
            x = (kids[0][0] + kids[-1][0]) / 2.0
            segments.append(((kids[0][0], y), (kids[-1][0], y)))
            segments.extend(((kx, y), (kx, ky)) for kx, ky in kids)
            nodes.append((x, y))
            child_stack[-1].append((x, y))
        elif is_leaf(item):
            child_stack[-1].append((float(leaf_x), 0.0))
            leaf_x += 1
        else:
            child_stack.append([])
            todo.append((True, item))
            todo.extend((False, child) for child in reversed(item))
    top = child_stack[0]
    height = int(top[0][1]) if top else 0
    return nodes, segments, height


def _draw_tree(ax: Axes, tree: Tree, color: str = "#333333", linewidth: float = 1.4) -> int:
    """Draw the dendrogram of ``tree`` on ``ax``; returns its height."""
    from matplotlib.collections import LineCollection

    nodes, segments, height = tree_layout(tree)
    if segments:
        ax.add_collection(LineCollection(segments, colors=color, linewidths=linewidth))
    if nodes and len(nodes) <= 400:
        xs, ys = zip(*nodes)
        ax.scatter(xs, ys, s=12, color=color, zorder=3)
    return height


def _label_style(tokens: Sequence[str]) -> tuple[float, int]:
    """Font size and rotation for token labels so neighbours do not overlap."""
    longest = max((len(t) for t in tokens), default=1)
    fontsize = 11.0 if len(tokens) <= 40 else 8.0
    rotation = 0 if longest <= 5 and len(tokens) <= 40 else 90
    return fontsize, rotation


def _save(fig: Figure, path: str | os.PathLike[str]) -> None:
    directory = os.path.dirname(os.fspath(path))
    if directory:
        os.makedirs(directory, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight", pad_inches=0.15, facecolor="white")


def plot_tree(tree: Tree, path: str | os.PathLike[str], title: str | None = None) -> None:
    """Draw ``tree`` (nested lists, leaves rendered with ``str``) to a PNG file at ``path``.

    Leaves are written along the bottom (vertically when long or many), internal nodes are
    dots joined to their children by bracket-shaped lines. Width grows with the number of
    leaves (capped), height with the tree height (capped).
    """
    tokens = [str(t) for t in tree_leaves(tree)]
    n = len(tokens)
    fontsize, rotation = _label_style(tokens)
    longest = max((len(t) for t in tokens), default=1)
    with _style():
        _, _, height = tree_layout(tree)
        step = 0.32 if rotation else max(0.55, 0.1 * longest + 0.2)
        width = min(max(3.0, step * n + 1.0), 80.0)
        fig_h = min(max(2.0, 0.35 * height + 1.2), 30.0)
        fig = Figure(figsize=(width, fig_h))
        ax = fig.add_subplot()
        _draw_tree(ax, tree)
        for i, tok in enumerate(tokens):
            ax.text(i, -0.25, tok, ha="center", va="top", rotation=rotation, fontsize=fontsize)
        ax.set_xlim(-0.6, n - 0.4)
        ax.set_ylim(-0.3, max(height, 1) + 0.4)
        ax.axis("off")
        if title:
            ax.set_title(title)
        _save(fig, path)


def plot_levels(
    tokens: Sequence[str],
    levels_per_layer: Sequence[Sequence[float]] | Any,
    tree: Tree | None,
    path: str | os.PathLike[str],
    title: str | None = None,
    cmap: str = "viridis",
    row_labels: Sequence[str] | None = None,
    colorbar_label: str = "level",
) -> None:
    """Heat map of per-layer levels with the induced tree drawn above the tokens.

    Args:
        tokens: n token strings, labelled under the heat map columns.
        levels_per_layer: L x n values (list of lists or array; e.g. each ON-LSTM layer's
            expected master-forget-gate split level ``d_t``); row 0 is drawn on top and
            labelled "layer 1".
        tree: a tree over the same n leaves (e.g. ``build_tree`` of one layer's levels), or
            ``None`` to draw only the heat map.
        path: PNG output path.
        row_labels: one label per row (default ``"layer 1"``, ``"layer 2"``, ...).
        colorbar_label: the colour bar's caption.
    """
    data = np.asarray(levels_per_layer, dtype=np.float64)
    if data.ndim == 1:
        data = data[None, :]
    tokens = [str(t) for t in tokens]
    n = len(tokens)
    if data.ndim != 2 or data.shape[1] != n:
        raise ValueError(f"levels have shape {data.shape}, expected (layers, {n})")
    if row_labels is not None and len(row_labels) != data.shape[0]:
        raise ValueError(f"{len(row_labels)} row labels for {data.shape[0]} rows")
    if tree is not None and len(tree_leaves(tree)) != n:
        raise ValueError(f"tree has {len(tree_leaves(tree))} leaves for {n} tokens")
    layers = data.shape[0]
    fontsize, rotation = _label_style(tokens)
    longest = max((len(t) for t in tokens), default=1)
    with _style():
        height = tree_layout(tree)[2] if tree is not None else 0
        step = 0.36 if rotation else max(0.6, 0.1 * longest + 0.25)
        width = min(max(4.0, step * n + 1.8), 80.0)
        tree_h = min(0.3 * height + 0.4, 8.0) if tree is not None else 0.0
        heat_h = 0.45 * layers + 0.3
        fig = Figure(figsize=(width, tree_h + heat_h + 0.6))
        rows = [tree_h, heat_h] if tree is not None else [heat_h]
        grid = fig.add_gridspec(len(rows), 2, height_ratios=rows, width_ratios=[1.0, 0.025],
                                hspace=0.04, wspace=0.02)
        heat_row = len(rows) - 1
        ax_heat = fig.add_subplot(grid[heat_row, 0])
        image = ax_heat.imshow(data, aspect="auto", cmap=cmap, interpolation="nearest")
        ax_heat.set_xticks(range(n))
        ax_heat.set_xticklabels(tokens, rotation=rotation, fontsize=fontsize)
        ax_heat.set_yticks(range(layers))
        labels = row_labels or [f"layer {i + 1}" for i in range(layers)]
        ax_heat.set_yticklabels(list(labels), fontsize=9)
        ax_heat.set_xlim(-0.5, n - 0.5)
        cbar = fig.colorbar(image, cax=fig.add_subplot(grid[heat_row, 1]))
        cbar.set_label(colorbar_label, fontsize=9)
        cbar.ax.tick_params(labelsize=8)
        if tree is not None:
            ax_tree = fig.add_subplot(grid[0, 0], sharex=ax_heat)
            _draw_tree(ax_tree, tree, color="#1f3b73")
            ax_tree.set_ylim(-0.05, max(height, 1) + 0.3)
            ax_tree.axis("off")
            if title:
                ax_tree.set_title(title)
        elif title:
            ax_heat.set_title(title)
        _save(fig, path)


def scale_rows(data: Sequence[Sequence[float]] | Any) -> np.ndarray:
    """Min-max scale every row to [0, 1] (a constant row becomes 0.5).

    A tree reads only the order of the levels within its layer, so this shows what each layer's
    parse sees even when layers live on different ranges.
    """
    data = np.asarray(data, dtype=np.float64)
    lo, hi = data.min(axis=1, keepdims=True), data.max(axis=1, keepdims=True)
    span = hi - lo
    return np.where(span > 0, (data - lo) / np.where(span > 0, span, 1.0), 0.5)


def plot_sentence_levels(lv: Any, path: str | os.PathLike[str], layer: int, *,
                         gate: str = "forget", scale: str = "layer", style: str = "official",
                         with_tree: bool = True, title: str | None = None,
                         run_name: str = "") -> None:
    """Heat map of one sentence's levels in every ON-LSTM layer, with one layer's tree above.

    Args:
        lv: the sentence's :class:`~treelm.syntax.levels.SentenceLevels`; words read as
            ``<unk>`` are labelled with a ``*``.
        layer: the 1-based layer whose ``d_f`` makes the tree.
        gate: ``forget`` (``d_f``) or ``input`` (``d_i``) levels in the heat map.
        scale: ``layer`` (min-max per row, each row labelled with its range) or ``shared``.
        style: tree rule of :func:`~treelm.syntax.trees.build_tree`.
        with_tree: draw the tree above the heat map.
        title: the title (``None``: one naming ``run_name``, the gate and the layer; ``""``:
            none).
    """
    symbol = "d_f" if gate == "forget" else "d_i"
    data = lv.df if gate == "forget" else lv.di
    rows = [f"layer {k}" for k in lv.layers]
    caption = f"${symbol}$"
    if scale == "layer":
        rows = [f"{name}  [{lo:.3f}, {hi:.3f}]"
                for name, lo, hi in zip(rows, data.min(axis=1), data.max(axis=1))]
        caption = f"${symbol}$, min-max scaled per layer"
        data = scale_rows(data)
    tree = lv.tree(layer, style) if with_tree else None
    if title is None:
        gate_name = "master-forget-gate" if gate == "forget" else "master-input-gate"
        name = run_name.replace("$", r"\$")    # a $ in a directory name would start mathtext
        reading = " (right-to-left stack)" if lv.direction == "backward" else ""
        title = f"{name}: {gate_name} levels ${symbol}${reading}" + (
            f"; tree from layer {layer}" if with_tree else "")
    labels = [t if i not in lv.unknown else f"{t}*" for i, t in enumerate(lv.tokens)]
    plot_levels(labels, data, tree, path, title=title or None, row_labels=rows,
                colorbar_label=caption)
