"""What ``treelm translate`` reads and prints: sentences in, one translation a line out.

Input is plain UTF-8 text, one sentence a line, from a file (read whole) or from stdin (translated
as it comes: a terminal line by line, a pipe in chunks, so a long pipe starts printing before it
ends), read, checked and refused when empty by :mod:`treelm.text.inputs`, which also holds the
policy for unknown source symbols. Lines are translated in chunks of ``CHUNK`` batches, sorted by
length inside the chunk by the task, and printed in input order, each flushed; an empty line
prints an empty line, so the output stays aligned with the input. Progress (sentences done, of
how many for a file) goes to stderr (:class:`treelm.progress.Ticker`: a bar on a terminal, a line
every 30 s otherwise), except for a typed session.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from itertools import islice
from typing import TYPE_CHECKING

from treelm.errors import TreelmError
from treelm.progress import Ticker, reporting
from treelm.text.inputs import UnknownSymbols

if TYPE_CHECKING:  # torch and the tasks load only when a command runs
    from torch import nn

    from treelm.tasks.translation import TranslationTask

CHUNK = 8         # batches translated together (sorting by length works within a chunk)


def check_options(beam: int, batch_size: int | None, length_penalty: float | None) -> None:
    if beam < 1:
        raise TreelmError(f"--beam must be >= 1, got {beam}")
    if batch_size is not None and batch_size < 1:
        raise TreelmError(f"--batch-size must be >= 1, got {batch_size}")
    lp = length_penalty
    if lp is not None and not (math.isfinite(lp) and lp >= 0):
        raise TreelmError(f"--length-penalty must be a finite number >= 0, got {lp}")


def check_unknown(task: TranslationTask, block: list[str], first_line: int,
                  policy: UnknownSymbols, source: str) -> None:
    """Source symbols outside the run's vocabulary in ``block`` (line numbers from
    ``first_line`` of ``source``) follow ``policy`` (:mod:`treelm.text.inputs`)."""
    for n, line in enumerate(block, first_line):
        policy.check(task.unknown_source(line), f"{source}:{n}")


def translate_stream(task: TranslationTask, model: nn.Module, lines: Iterable[str], beam: int,
                     length_penalty: float | None, batch_size: int | None,
                     plot: str | None = None, unk: str = "map", source: str = "stdin") -> None:
    """Translate ``lines`` (of ``source``, for messages) and print one translation a line as
    soon as its chunk is done; with ``plot``, draw the first sentence's attention there. Source
    symbols outside the vocabulary follow ``unk`` (:mod:`treelm.text.inputs`); mapped ones are
    counted on stderr."""
    bs = batch_size or task.options.eval_batch_size
    interactive = not isinstance(lines, list) and sys.stdin.isatty()
    chunk = 1 if interactive else bs * CHUNK
    # progress of the whole input (a typed session has none); the task's own ticker per chunk
    # is silenced below
    total = len(lines) if isinstance(lines, list) else None
    tick = Ticker("translating", total, "sentences", silent=interactive)
    it = iter(lines)
    first = None
    done = 0
    policy = UnknownSymbols(unk, "the run's source vocabulary")
    with tick:
        while block := list(islice(it, chunk)):
            check_unknown(task, block, done + 1, policy, source)
            done += len(block)
            with reporting(quiet=True):
                found = task.translate(model, block, beam, length_penalty, bs)
            for t in found:
                if first is None:
                    first = t
                print(t.text, flush=True)
            tick.update(len(block))
    policy.report()
    if plot and first is not None:
        from treelm.translate.plot import plot_attention

        plot_attention(*task.attention_map(model, first), plot)
