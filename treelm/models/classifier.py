"""Sequence classifier: a recurrent encoder reads a sequence, an MLP names its class (ListOps:
the value of an expression).

    e_t = E[w_t]                                  symbol embedding (V, E), embedding dropout
    h_t = Stack(e_1..e_t)                         any treelm cell stack (ON-LSTM, LSTM, ...)
    u = h_n                  (pool: last)         the state after the last symbol, or
    u = (1/n) Σ_{t≤n} h_t    (pool: mean)         the mean over the sequence's own positions
    y = W_2 ELU(W_1 drop(u) + b_1) + b_2          class scores (C,), dropout before each layer

With ``last`` nothing but the final state carries the sequence, so the encoder must compose the
whole of it into ``h_n`` (what ListOps asks of a model: the value is the root of a tree it is
never shown); ``mean`` lets every position speak. The MLP is the pair classifier's
(:mod:`treelm.models.pair`) on one encoding instead of four comparison features.

Shapes: tokens (T, B) int64, <pad> after each sequence's end, lengths (B,) -> logits (B, C). A
recurrent step never looks ahead, so neither pooling depends on the padding after a sequence's
end, nor (up to rounding) on the other sequences of the batch.
"""

from __future__ import annotations

from typing import Any, ClassVar, Unpack

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from treelm.cells import State
from treelm.nn.dropout import DROPOUT_RULES, Dropouts, DroppedEmbedding, dropouts
from treelm.nn.stack import RNNStack, StackOutput

POOLS = ("last", "mean")


class SequenceClassifier(nn.Module):
    RULES: ClassVar[dict[str, Any]] = {
        "sizes": ">= 1", "mlp_size": ">= 1", "pool": POOLS, **DROPOUT_RULES}

    def __init__(self, vocab_size: int, n_classes: int, pad_id: int, cell: str = "lstm",
                 sizes: list[int] | None = None, mlp_size: int | None = None,
                 pool: str = "last", cell_options: dict[str, Any] | None = None,
                 **drop: Unpack[Dropouts]) -> None:
        super().__init__()
        sizes = list(sizes or [128, 128])
        p = dropouts(drop)
        self.pad_id, self.pool, self.dropout = pad_id, pool, p["dropout"]
        self.embedding = DroppedEmbedding(vocab_size, sizes[0], p["dropoute"], p["dropouti"])
        self.rnn = RNNStack(cell, sizes, p["dropouth"], p["wdrop"], cell_options)
        self.hidden = nn.Linear(self.rnn.output_size, mlp_size or self.rnn.output_size)
        self.out = nn.Linear(self.hidden.out_features, n_classes)

    def features(self, tokens: Tensor, states: list[State] | None = None) -> StackOutput:
        """The encoder's per-layer outputs and cell ``aux`` (ON-LSTM levels) for (T, B) tokens."""
        return self.rnn(self.embedding(tokens), states)

    def encode(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """(T, B) tokens, (B,) lengths -> (B, H), pooled as ``pool`` says."""
        out = self.features(tokens).out                                   # (T, B, H)
        lengths = lengths.to(out.device)
        if self.pool == "mean":
            t = torch.arange(out.size(0), device=out.device).unsqueeze(1)       # (T, 1)
            keep = (t < lengths).unsqueeze(-1).to(out.dtype)                     # (T, B, 1)
            return (out * keep).sum(0) / lengths.unsqueeze(-1).to(out.dtype)
        last = (lengths - 1).view(1, -1, 1).expand(1, -1, out.size(-1))
        return out.gather(0, last)[0]

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        z = F.elu(self.hidden(F.dropout(self.encode(tokens, lengths), self.dropout,
                                        self.training)))
        return self.out(F.dropout(z, self.dropout, self.training))

    def layer_cells(self) -> list[nn.Module]:
        return list(self.rnn.layers)
