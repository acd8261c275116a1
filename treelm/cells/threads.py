"""A recurrence over a handful of sequences runs its time steps on one intra-op thread.

At batch ``B`` a step's recurrent product is ``B·G·H`` multiply-adds (0.67 M for one ON-LSTM
layer of 400 at batch 1) and its gate math a few hundred numbers: too little to share, while
every product that PyTorch (MKL, OpenMP) splits between threads joins them again at every step.
On cores shared with other processes a join waits for a descheduled thread, and that wait,
not the arithmetic, is then the cost of a step. Measured on this project's 2-core machine under
load (batch 1, ``configs/ptb-onlstm-cpu.yaml``'s three layers, 2048 steps): 2.1-2.7 ms per token
on one thread, 41-60 ms on two; ``treelm eval --split test`` took 10.6 minutes on two threads.

:func:`recurrence_threads` is the scope the batch-1 readers (evaluation of a language model
over a stream, reading the levels of a long sentence) put around the recurrent stack; products
over all steps at once (the output layer) stay outside, on every thread. It changes the
process's thread count for the scope, so it is for the code that owns the process (a verb's
loop), not for a model shared between threads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

#: Batches up to this many sequences run their recurrence on one thread.
SMALL_BATCH = 4


@contextlib.contextmanager
def recurrence_threads(batch: int) -> Iterator[None]:
    """One intra-op thread inside the block when ``batch`` <= :data:`SMALL_BATCH` (the count
    is restored after); otherwise nothing changes."""
    threads = torch.get_num_threads()
    if batch > SMALL_BATCH or threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
