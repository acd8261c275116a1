"""The step function of an encoder-decoder, for the decoders of :mod:`treelm.decode`.

Any model with the seq2seq interface plugs in (RNN with attention, ConvS2S, ...); nothing here
looks at its type:

    encode(src (B, S)) -> memory        dict of tensors, batch dimension 0
    start(memory) -> state              decoder state before <bos>, memory included
    step(tokens (B,), state) -> (logits (B, V), state)
    forward(src, tgt_in (B, T)) -> logits (B, T, V)      teacher forcing

:class:`Seq2SeqStep` decodes incrementally: ``prime(src)`` encodes the source, reads ``<bos>`` and
returns the logits of the first target symbol with the state; every later symbol costs one
``step``. :class:`RecomputeStep` is the same search without incremental state: its state is the
source and the prefix read so far, and each new symbol recomputes ``forward`` over the whole
prefix, ``O(T²)`` decoder work for ``T`` symbols instead of ``O(T)`` (kept to measure what the
incremental state saves, and as an independent check of it).

Both ban symbols that no target sentence contains (``<pad>``, ``<bos>``) by setting their logits
to −∞, so that no decoder can emit them however little the model was trained.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn


class Seq2SeqStep:
    """``Seq2SeqStep(model, bos, banned)(tokens (B,), state) -> (logits (B, V), state)``."""

    def __init__(self, model: nn.Module, bos: int, banned: Sequence[int] = ()) -> None:
        self.model, self.bos, self.banned = model, bos, list(banned)

    def _ban(self, logits: Tensor) -> Tensor:
        if self.banned:
            logits = logits.clone()
            logits[:, self.banned] = float("-inf")
        return logits

    def __call__(self, tokens: Tensor, state: Any) -> tuple[Tensor, Any]:
        logits, state = self.model.step(tokens, state)
        return self._ban(logits), state

    @torch.no_grad()
    def prime(self, src: Tensor) -> tuple[Tensor, Any]:
        """Encode ``src`` (B, S) and read ``<bos>``: (logits (B, V) of the first symbol, state)."""
        state = self.model.start(self.model.encode(src))
        bos = torch.full((src.size(0),), self.bos, dtype=torch.long, device=src.device)
        return self(bos, state)


class RecomputeStep(Seq2SeqStep):
    """The same step without incremental state: ``state = {"src", "prefix"}`` and every call runs
    ``forward(src, prefix)`` over the whole prefix for the logits of its last position."""

    def __call__(self, tokens: Tensor, state: Any) -> tuple[Tensor, Any]:
        prefix = torch.cat([state["prefix"], tokens.unsqueeze(1)], 1)
        logits = self.model(state["src"], prefix)[:, -1]
        return self._ban(logits), {"src": state["src"], "prefix": prefix}

    @torch.no_grad()
    def prime(self, src: Tensor) -> tuple[Tensor, Any]:
        empty = src.new_zeros(src.size(0), 0)
        bos = torch.full((src.size(0),), self.bos, dtype=torch.long, device=src.device)
        return self(bos, {"src": src, "prefix": empty})
