"""Source-side master-gate levels of a translation encoder with ON-LSTM layers, for tree induction.

An RNN encoder-decoder (:class:`~treelm.models.rnn_attn.RNNAttention`, any cell, ``cell: onlstm``
here) reads a source sentence as the symbols of the run's source tokenizer followed by ``<eos>``,

    x = x_1 … x_n <eos>          (sentencepiece pieces, or words with ``tokenizer: word``)

from the zero state. Each ON-LSTM layer of its left-to-right stack gives at every symbol the level
that Shen et al., "Ordered Neurons" (ICLR 2019), Sec. 5.2 read off a language model
(:mod:`treelm.syntax.levels`),

    d_f,j = 1 − mean_k f̃_j(k)     f̃_j: the master forget gate of the step that reads x_j
                                  after x_1 … x_{j-1}        (and d_i,j = mean_k ĩ_j(k))

and :func:`~treelm.syntax.trees.build_tree` splits the n symbols at their highest levels: a
binary tree over the source pieces. This is the paper's definition (an ON-LSTM reading a sentence
left to right), and the default, ``direction="forward"``.

The right-to-left stack of a bidirectional encoder reads ``<eos> x_n … x_1``; its level at
``x_j`` (``direction="backward"``) is the gate of the step that reads ``x_j`` after
``<eos> x_n … x_{j+1}``. Those are the paper's levels of the *reversed* sentence, so its tree is
``build_tree`` over the reversed symbols, mirrored back into reading order
(:meth:`SentenceLevels.tree <treelm.syntax.levels.SentenceLevels.tree>` with ``direction``
``"backward"``); its levels are reported in sentence order (column j: symbol x_j). Layers are
numbered from 1 within a stack; both stacks have the same cells.

Protocol: every sentence is read alone from the zero state, exactly as the model reads sources in
training and translation (no opening ``<eos>``, unlike the language-model protocol). The closing
``<eos>`` is read: the forward stack reads it last, so it cannot change the levels of
``x_1 … x_n``, but the backward stack reads it first. Its level is dropped, so n symbols give n
levels per layer; an empty sentence gives ``(n_layers, 0)`` arrays and is not run.

Batches: sentences sorted by length (longest first), ``<pad>`` on the right, ``batch_size`` at a
time. The forward stack never looks ahead and the backward one reads each sentence reversed within
its own length, so padding reaches no kept position: results equal one-by-one evaluation up to
float rounding (tested to 1e-6). The model runs in eval mode (no dropout) under ``torch.no_grad``
and only the source embedding and the encoder run, not the decoder.

The model's side: ``encoder_cells()`` (per direction, the stack's cells, layer 1 first) and
``encoder_features(src)`` (per direction, a :class:`~treelm.nn.stack.StackOutput` whose
``aux[l]["df"]`` / ``["di"]`` are ``(S, B)`` in source order), for ``src`` (B, S).

Shapes: per sentence, ``df`` and ``di`` are ``(n_layers, n)`` float32 arrays, row ``k`` for the
``k``-th ON-LSTM layer of the chosen stack.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from treelm.errors import TreelmError
from treelm.progress import Ticker
from treelm.syntax.levels import (
    DIRECTIONS,
    SentenceLevels,
    _eval_mode,
    batched_levels,
    master_gate_layers,
    tokenised_levels,
)
from treelm.text.vocab import Vocab


def encoder_layers(model: nn.Module, direction: str = "forward") -> tuple[int, ...]:
    """1-based numbers of the ON-LSTM layers of the encoder stack that reads in ``direction``.

    Raises:
        NoMasterGatesError: the encoder has no ON-LSTM layer.
        TreelmError: ``direction`` is ``"backward"`` and the encoder reads left to right only.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; choose one of {DIRECTIONS}")
    stacks = model.encoder_cells()
    layers = master_gate_layers(stacks[0])
    if direction == "backward" and len(stacks) < 2:
        raise TreelmError("direction 'backward' needs a bidirectional encoder; this run's "
                          "encoder reads left to right only")
    return layers


def compute_source_levels(
    model: nn.Module,
    id_seqs: Sequence[Sequence[int]],
    eos: int,
    pad: int,
    direction: str = "forward",
    batch_size: int = 256,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(df, di)`` per source sentence of ids, each ``(n_layers, n)`` float32 (module docstring).

    Args:
        model: an encoder-decoder with ``encoder_cells`` / ``encoder_features`` (any device).
        id_seqs: source sentences as vocabulary ids, *without* the closing ``<eos>``; empty ones
            give ``(n_layers, 0)`` arrays.
        eos, pad: the ids of ``<eos>`` and ``<pad>``.
        direction: ``"forward"`` (left-to-right stack) or ``"backward"`` (right-to-left stack).
        batch_size: sentences per forward pass.

    Raises:
        NoMasterGatesError, TreelmError: see :func:`encoder_layers`.
    """
    layers = encoder_layers(model, direction)
    stack, rows = DIRECTIONS.index(direction), [k - 1 for k in layers]
    device = next(model.parameters()).device

    def read(chunk: list[Sequence[int]], tick: Ticker) -> np.ndarray:
        grid = np.full((len(chunk), len(chunk[0]) + 1), pad, dtype=np.int64)  # pad after <eos>
        for b, ids in enumerate(chunk):
            grid[b, : len(ids)] = ids
            grid[b, len(ids)] = eos
        aux = model.encoder_features(torch.from_numpy(grid).to(device))[stack].aux
        both = torch.stack([torch.stack([aux[r][key] for r in rows]) for key in ("df", "di")])
        tick.update(sum(len(ids) for ids in chunk))
        return both.permute(3, 0, 1, 2).float().cpu().numpy()              # (B, 2, L, S)

    with _eval_mode(model):
        return batched_levels(id_seqs, len(rows), batch_size, read)


def source_sentence_levels(model: nn.Module, vocab: Vocab, sentences: Sequence[Sequence[str]],
                           batch_size: int = 256, unk: str = "map",
                           direction: str = "forward") -> list[SentenceLevels]:
    """Encoder levels of tokenised source sentences (lists of source symbols), in input order.

    ``vocab`` is the run's source vocabulary; a symbol outside it is read as ``<unk>``
    (``unk="map"``) or stops with a :class:`~treelm.errors.TreelmError` naming it
    (``unk="error"``). See :func:`compute_source_levels` for the protocol and shapes.
    """
    return tokenised_levels(
        vocab, sentences, unk, "source symbol", encoder_layers(model, direction),
        lambda ids: compute_source_levels(model, ids, vocab.eos, vocab.pad, direction,
                                          batch_size),
        direction)
