"""Slot filling: an RNN that gives every word of an utterance a label (Mesnil et al. 2013, 2015).

    e_t = E[w_t]                                    word embedding, (V, e)
    x_t = [e_{t-k}; …; e_t; …; e_{t+k}]             context window of d = 2k + 1 words, (d·e,);
                                                    <pad> embeddings beyond the edges
    h→_t = Stack→(x_1..x_t)                         any treelm cell stack, left to right
    h←_t = Stack←(x_t..x_n)                         the same, right to left (bidirectional)
    s_t = W [h→_t; h←_t] + b                        label scores, (L,)  (feedback: hidden)
    i   = W_i [h→_n; h←_1] + b_i                    intent scores, optional (joint model)

Mesnil's Jordan network feeds back the previous step's *output distribution* over labels, not a
hidden layer: with ``feedback: labels`` the single recurrent layer is a Jordan cell whose output
layer is the label layer, ``y_t = softmax(W_yh h_t + b_y)`` with ``h_t = σ(W_ih x_t + W_hy
y_{t−1})`` (:mod:`treelm.cells.jordan`), and the scores are ``s_t = log y_t``; bidirectionally the
two directions' distributions are averaged, ``s_t = log ½(y→_t + y←_t)`` (our choice: the papers
combine the two directions at the output layer without fixing this detail).

Shapes: words (T, B) int64 with <pad> after each utterance's end, lengths (B,) -> scores
(T, B, L). The right-to-left stack reads each utterance reversed within its own length, so padding
never reaches a real word; a window never depends on the other utterances of the batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Unpack

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from treelm.nn.dropout import DROPOUT_RULES, Dropouts, DroppedEmbedding, dropouts, locked_dropout
from treelm.nn.stack import RNNStack

FEEDBACKS = ("hidden", "labels")


@dataclass
class TaggerOutput:
    scores: Tensor                  # (T, B, L) label scores (log-probabilities up to a constant)
    intent: Tensor | None           # (B, I) intent scores, or None without an intent head


def reverse_within(x: Tensor, lengths: Tensor) -> Tensor:
    """Each column of ``x`` (T, B, ...) reversed over its first ``lengths[b]`` steps; the padding
    after them stays in place. Its own inverse."""
    T = x.size(0)
    t = torch.arange(T, device=x.device).unsqueeze(1)                 # (T, 1)
    n = lengths.to(x.device).unsqueeze(0)                             # (1, B)
    idx = torch.where(t < n, n - 1 - t, t)                            # (T, B)
    return x.gather(0, idx.view(T, -1, *([1] * (x.dim() - 2))).expand_as(x))


class Tagger(nn.Module):
    RULES: ClassVar[dict[str, Any]] = {
        "sizes": ">= 1", "window": ">= 1", "feedback": FEEDBACKS, **DROPOUT_RULES}

    def __init__(
        self,
        vocab_size: int,
        n_labels: int,
        pad_id: int,
        n_intents: int = 0,
        cell: str = "elman",
        sizes: list[int] | None = None,
        window: int = 1,
        bidirectional: bool = False,
        feedback: str = "hidden",
        intent: bool = False,
        cell_options: dict[str, Any] | None = None,
        **drop: Unpack[Dropouts],
    ) -> None:
        super().__init__()
        sizes = list(sizes or [100, 100])
        p = dropouts(drop)
        if window % 2 != 1:
            raise ValueError(f"window must be odd (the word and k on each side), got {window}")
        if feedback not in FEEDBACKS:
            raise ValueError(f"unknown feedback {feedback!r}: {' or '.join(FEEDBACKS)}")
        if intent and n_intents == 0:
            raise ValueError("intent: true needs intent labels in the training data")
        self.window, self.pad_id, self.feedback = window, pad_id, feedback
        self.dropout = p["dropout"]
        self.embedding = DroppedEmbedding(vocab_size, sizes[0], p["dropoute"], p["dropouti"])
        opts = dict(cell_options or {})
        if feedback == "labels":
            if len(sizes) != 2:
                raise ValueError("feedback: labels feeds back the label distribution of one "
                                 f"recurrent layer (sizes: [embedding, hidden]), got {sizes}")
            opts.update(output_size=n_labels, output_activation="softmax")
        stack_sizes = [window * sizes[0], *sizes[1:]]
        n_dirs = 2 if bidirectional else 1
        self.stacks = nn.ModuleList(RNNStack(cell, stack_sizes, p["dropouth"], p["wdrop"], opts)
                                    for _ in range(n_dirs))
        out = self.stacks[0].output_size
        if feedback == "labels" and out != n_labels:
            raise ValueError(f"feedback: labels needs a cell with a label-sized output layer "
                             f"(jordan); {cell!r} outputs {out}")
        self.head = nn.Linear(n_dirs * out, n_labels) if feedback == "hidden" else None
        self.intent_head = nn.Linear(n_dirs * out, n_intents) if intent else None

    def windows(self, words: Tensor) -> Tensor:
        """(T, B) word ids -> (T, B, window · e) concatenated embeddings around each word."""
        k = self.window // 2
        padded = F.pad(words, (0, 0, k, k), value=self.pad_id)         # (T + 2k, B)
        e = self.embedding.lookup(padded)                              # (T + 2k, B, e)
        T = words.size(0)
        x = torch.cat([e[j:j + T] for j in range(self.window)], dim=-1)
        return self.embedding.locked(x)             # dropouti: one mask over the whole window

    def forward(self, words: Tensor, lengths: Tensor) -> TaggerOutput:
        x = self.windows(words)
        outs = [self.stacks[0](x).out]
        if len(self.stacks) == 2:
            outs.append(reverse_within(self.stacks[1](reverse_within(x, lengths)).out, lengths))
        if self.head is not None:
            h = locked_dropout(torch.cat(outs, -1), self.dropout, self.training)
            scores = self.head(h)
        else:                                   # Jordan: the outputs are label distributions
            scores = torch.log(torch.stack(outs).mean(0).clamp_min(1e-12))
        intent = None
        if self.intent_head is not None:
            last = (lengths.to(words.device) - 1).view(1, -1, 1)
            ends = [outs[0].gather(0, last.expand(1, -1, outs[0].size(-1)))[0]]
            if len(outs) == 2:
                ends.append(outs[1][0])
            intent = self.intent_head(F.dropout(torch.cat(ends, -1), self.dropout,
                                                self.training))
        return TaggerOutput(scores, intent)

    def layer_cells(self) -> list[nn.Module]:
        return [layer for stack in self.stacks for layer in stack.layers]
