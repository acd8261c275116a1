"""Sentence-pair classifier: one recurrent encoder reads both sentences, an MLP compares them
(the logical inference model of Bowman et al. 2015 and of the ON-LSTM paper, Shen et al. 2019 §6.3).

    e_t = E[w_t]                                  symbol embedding (V, E), embedding dropout
    h_t = Stack(e_1..e_t)                         any treelm cell stack (ON-LSTM, LSTM, ...)
    u = h_{n_1}(left),  v = h_{n_2}(right)        the state after each sentence's last symbol
    z = [u; v; u ∘ v; |u − v|]                    (4H,): both, and their agreement / difference
    y = W_2 ELU(W_1 drop(z) + b_1) + b_2          class scores (C,), dropout before each layer

The encoder is shared (a siamese network), so the comparison features are symmetric in what they
can express, and nothing but the last state carries a sentence: the encoder must compose the whole
formula into h_n. ELU and one hidden layer of the encoder's size follow the official ON-LSTM code.

Shapes: left (T₁, B), right (T₂, B) int64, <pad> after each sentence's end, lengths (B,) each ->
logits (B, C). Both sides run as one batch of 2B sequences (padded to max(T₁, T₂)); a recurrent
step never looks ahead, so the state at a sentence's true last symbol does not depend on the
padding after it, nor (up to rounding) on the other sentences of the batch.
"""

from __future__ import annotations

from typing import Any, ClassVar, Unpack

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from treelm.cells import State
from treelm.nn.dropout import DROPOUT_RULES, Dropouts, DroppedEmbedding, dropouts
from treelm.nn.stack import RNNStack, StackOutput


class PairClassifier(nn.Module):
    RULES: ClassVar[dict[str, Any]] = {
        "sizes": ">= 1", "mlp_size": ">= 1", **DROPOUT_RULES}

    def __init__(
        self,
        vocab_size: int,
        n_classes: int,
        pad_id: int,
        cell: str = "lstm",
        sizes: list[int] | None = None,
        mlp_size: int | None = None,
        cell_options: dict[str, Any] | None = None,
        **drop: Unpack[Dropouts],
    ) -> None:
        super().__init__()
        sizes = list(sizes or [128, 200])
        p = dropouts(drop)
        self.pad_id, self.dropout = pad_id, p["dropout"]
        self.embedding = DroppedEmbedding(vocab_size, sizes[0], p["dropoute"], p["dropouti"])
        self.rnn = RNNStack(cell, sizes, p["dropouth"], p["wdrop"], cell_options)
        H = self.rnn.output_size
        M = mlp_size or H
        self.hidden = nn.Linear(4 * H, M)
        self.out = nn.Linear(M, n_classes)

    def features(self, tokens: Tensor, states: list[State] | None = None) -> StackOutput:
        """The encoder's per-layer outputs and cell ``aux`` (ON-LSTM levels) for (T, B) tokens."""
        return self.rnn(self.embedding(tokens), states)

    def encode(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """(T, B) tokens, (B,) lengths -> (B, H): the last layer's output at each last symbol."""
        out = self.features(tokens).out                                   # (T, B, H)
        last = (lengths.to(out.device) - 1).view(1, -1, 1).expand(1, -1, out.size(-1))
        return out.gather(0, last)[0]

    def compare(self, u: Tensor, v: Tensor) -> Tensor:
        """Class scores (B, C) of two encodings (B, H)."""
        z = torch.cat([u, v, u * v, (u - v).abs()], dim=-1)
        z = F.elu(self.hidden(F.dropout(z, self.dropout, self.training)))
        return self.out(F.dropout(z, self.dropout, self.training))

    def forward(self, left: Tensor, left_lengths: Tensor, right: Tensor,
                right_lengths: Tensor) -> Tensor:
        T, B = max(left.size(0), right.size(0)), left.size(1)
        both = torch.cat([F.pad(left, (0, 0, 0, T - left.size(0)), value=self.pad_id),
                          F.pad(right, (0, 0, 0, T - right.size(0)), value=self.pad_id)], 1)
        h = self.encode(both, torch.cat([left_lengths, right_lengths]))
        return self.compare(h[:B], h[B:])

    def layer_cells(self) -> list[nn.Module]:
        return list(self.rnn.layers)
