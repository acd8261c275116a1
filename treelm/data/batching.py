"""Batching for truncated BPTT over one long token stream (Zaremba et al.; AWD-LSTM).

:func:`batchify` cuts the stream (N,) into ``B`` contiguous columns, (N // B, B), so that column
``b`` continues across batches and the hidden state can be carried. :class:`BPTTSchedule` draws the
AWD-LSTM variable sequence lengths: base ``bptt`` with probability 0.95 else ``bptt / 2``, then
``seq_len ~ N(base, 5)``, at least 5, at most ``bptt + 20``; the learning rate is scaled by
``seq_len / bptt`` so that every token weighs the same.

For data made of examples (sentences, pairs, expressions), :func:`cut_batches` cuts an order of
examples into batches, by count or under a budget of padded tokens, sorting within windows so that
a batch holds examples of similar length; the seeded epoch iterator
(:mod:`treelm.tasks.examples`) and the evaluation batches of translation
(:func:`treelm.data.parallel.token_batches`) both cut with it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from torch import Tensor

from treelm.errors import TreelmError


def check_columns(tokens: int, batch_size: int, key: str = "batch_size",
                  what: str = "the stream", rows: int = 2) -> None:
    """Refuse ``batch_size`` columns of ``tokens`` that leave a column fewer than ``rows`` rows,
    in one line naming ``key``, its value and the largest value that fits. Evaluation needs 2
    rows (one input and its next token); training 3, since a training epoch reads rows while
    ``row < rows - 2`` and would otherwise run no batch at all, silently."""
    if tokens // batch_size >= rows:
        return
    largest = tokens // rows
    fits = f"the largest that fits is {largest:,}" if largest else "no batch size fits"
    raise TreelmError(f"{key}={batch_size} is too large for {what} ({tokens:,} tokens, at "
                      f"least {rows} per column): {fits}")


def batchify(data: Tensor, batch_size: int, key: str = "batch_size",
             what: str = "the stream") -> Tensor:
    """``data`` (N,) as ``batch_size`` columns, (N // batch_size, batch_size); a batch size
    that leaves a column under 2 tokens is refused (:func:`check_columns`, naming ``key``)."""
    check_columns(data.size(0), batch_size, key, what)
    n = data.size(0) // batch_size
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


def cut_batches(order: Sequence[int], *, batch_size: int | None = None,
                max_tokens: int | None = None, lengths: Sequence[int] | None = None,
                keys: Sequence[Any] | None = None, window: int = 0) -> list[list[int]]:
    """``order`` (example indices) cut into batches: windows of ``window`` examples (0: all),
    each sorted by ``keys`` when given, then cut by ``batch_size`` examples or by ``max_tokens``
    padded tokens (``n · max(lengths) ≤ max_tokens``). Exactly one of the two sizes is given."""
    if (batch_size is None) == (max_tokens is None):
        raise ValueError("give exactly one of batch_size and max_tokens")
    if max_tokens is not None and lengths is None:
        raise ValueError("max_tokens needs the examples' lengths")
    size = window or len(order) or 1
    batches: list[list[int]] = []
    for lo in range(0, len(order), size):
        chunk = list(order[lo:lo + size])
        if keys is not None:
            chunk.sort(key=keys.__getitem__)
        if batch_size is not None:
            batches += [chunk[j:j + batch_size] for j in range(0, len(chunk), batch_size)]
            continue
        cur: list[int] = []
        longest = 0
        for i in chunk:
            n = lengths[i]                                          # type: ignore[index]
            if cur and (len(cur) + 1) * max(longest, n) > max_tokens:   # type: ignore[operator]
                batches.append(cur)
                cur, longest = [], 0
            cur.append(i)
            longest = max(longest, n)
        if cur:
            batches.append(cur)
    return batches
