"""Batching for truncated BPTT over one long token stream (Zaremba et al.; AWD-LSTM).

:func:`batchify` cuts the stream (N,) into ``B`` contiguous columns, (N // B, B), so that column
``b`` continues across batches and the hidden state can be carried. :class:`BPTTSchedule` draws the
AWD-LSTM variable sequence lengths: base ``bptt`` with probability 0.95 else ``bptt / 2``, then
``seq_len ~ N(base, 5)``, at least 5, at most ``bptt + 20``; the learning rate is scaled by
``seq_len / bptt`` so that every token weighs the same.
"""

from __future__ import annotations

import random

from torch import Tensor


def batchify(data: Tensor, batch_size: int) -> Tensor:
    n = data.size(0) // batch_size
    if n < 2:
        raise ValueError(f"{data.size(0)} tokens are too few for batch size {batch_size}")
    return data[: n * batch_size].view(batch_size, n).t().contiguous()


def get_batch(source: Tensor, i: int, seq_len: int) -> tuple[Tensor, Tensor]:
    """Inputs (T, B) from row i and targets shifted by one."""
    seq_len = min(seq_len, source.size(0) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len]


class BPTTSchedule:
    """Sequence lengths for one epoch; its RNG state goes into checkpoints for exact resumes."""

    def __init__(self, bptt: int, variable: bool = True, seed: int = 0) -> None:
        self.bptt = bptt
        self.variable = variable
        self.rng = random.Random(seed)

    def next_len(self) -> int:
        if not self.variable:
            return self.bptt
        base = self.bptt if self.rng.random() < 0.95 else self.bptt / 2
        return max(5, min(int(self.rng.gauss(base, 5)), self.bptt + 20))
