"""The attention figure of ``treelm translate -o FILE.png``: one heat map per decoder layer
that attends (one for an RNN with attention, one per layer for ConvS2S), rows the target symbols
predicted, columns the source symbols, cell (t, j) the weight α_tj with which the decoder read
source symbol j when predicting target symbol t (each row sums to 1). Matplotlib's ``Figure``
directly (Agg, no pyplot state)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np


def plot_attention(weights: np.ndarray, src: Sequence[str], tgt: Sequence[str],
                   path: str | os.PathLike[str]) -> None:
    """``weights`` (layers, T, S) with ``tgt`` (T) row and ``src`` (S) column labels, to a PNG
    (or any suffix matplotlib writes) at ``path``."""
    from matplotlib.figure import Figure

    L, T, S = weights.shape
    cell = 0.32
    # room for the rotated source labels below and the panel titles above, so neither is cut
    below = 0.8 + 0.075 * max((len(w) for w in src), default=1)
    fig = Figure(figsize=(L * (1.5 + cell * S), below + cell * T + (0.4 if L > 1 else 0.1)),
                 layout="constrained")
    axes = fig.subplots(1, L, squeeze=False)[0]
    for layer, ax in enumerate(axes):
        im = ax.imshow(np.asarray(weights[layer]), cmap="Blues", vmin=0.0, vmax=1.0,
                       aspect="equal")
        ax.set_xticks(range(S), list(src), rotation=90, fontsize=8)
        ax.set_yticks(range(T), list(tgt), fontsize=8)
        ax.set_xlabel("source")
        if layer == 0:
            ax.set_ylabel("translation")
        if L > 1:
            ax.set_title(f"decoder layer {layer + 1}", fontsize=9)
    fig.colorbar(im, ax=list(axes), shrink=0.8, label="attention weight")
    directory = os.path.dirname(os.fspath(path))
    if directory:
        os.makedirs(directory, exist_ok=True)
    fig.savefig(path, dpi=120, facecolor="white")
