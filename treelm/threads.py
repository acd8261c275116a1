"""A recurrence whose time steps are small runs them on one intra-op thread.

A time step of a recurrent model multiplies ``B`` state vectors by the recurrent weights
(``B·Σ|U|`` multiply-adds: 2.0 M for the three ON-LSTM layers of ``configs/ptb-onlstm-cpu.yaml`` at
batch 1, 0.2 M for the tiny test model at batch 128) and does gate math on a few hundred numbers:
too little to share, while every product that PyTorch (MKL, OpenMP) splits between threads joins
them again at every step. On cores shared with other processes a join waits for a descheduled
thread, and that wait, not the arithmetic, is then the cost of a step. Measured on this
project's 2-core AMD EPYC under load: the PTB CPU model at batch 1 took 2.1-2.7 ms per token on
one thread and 41-60 ms on two (2048 steps), and ``treelm eval --split test`` 10.6 minutes on
two; ``suite agreement`` with the tiny model scored 370 sentences/s on two threads against
2,270 on one.

:func:`recurrence_threads` is the scope the readers of many steps put around a model's
recurrent pass (a language model's evaluation over a stream, the levels of a long sentence, the
sentence scorer): one thread while a step is below :data:`SMALL_STEP` multiply-adds, every
thread otherwise (a step of the PTB model at batch 10 is 20 M); products over all steps at once
(the output layer) stay outside. It changes the process's thread count for the scope, so it is
for the code that owns the process (a verb's loop), not for a model shared between threads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

#: A time step of fewer multiply-adds than this runs on one thread (about 0.1 ms on one core).
SMALL_STEP = 4_000_000


def step_size(model: Any, batch: int) -> int | None:
    """Multiply-adds of one time step's recurrent products at ``batch``: ``batch`` times the
    size of every recurrent weight of ``model.layer_cells()``; ``None`` for a model without
    recurrent cells."""
    cells = model.layer_cells() if callable(getattr(model, "layer_cells", None)) else []
    size = sum(w.numel() for cell in cells
               for w in (cell.recurrent().values() if hasattr(cell, "recurrent") else ()))
    return batch * size if size else None


@contextlib.contextmanager
def recurrence_threads(model: Any, batch: int) -> Iterator[None]:
    """One intra-op thread inside the block when a time step of ``model`` at ``batch`` is below
    :data:`SMALL_STEP` multiply-adds (the count is restored after); otherwise nothing changes."""
    threads = torch.get_num_threads()
    work = step_size(model, batch)
    if threads == 1 or work is None or work >= SMALL_STEP:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
