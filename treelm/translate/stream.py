"""What ``treelm translate`` reads and prints: sentences in, one translation a line out.

Input is plain UTF-8 text, one sentence a line, from a file (read whole) or from stdin (translated
as it comes: a terminal line by line, a pipe in chunks, so a long pipe starts printing before it
ends), read, checked and refused when empty by :mod:`treelm.text.inputs`, which also holds the
policy for unknown source symbols. Lines are translated through the Python API
(:meth:`treelm.api.model.TreelmModel.translate_batches`, one path with ``treelm.load``) in chunks
of eight batches, sorted by length inside the chunk by the task, and printed in input order,
each flushed; an empty line prints an empty line, so the output stays aligned with the input.
Progress (sentences done, of how many for a file) goes to stderr (:class:`treelm.progress.Ticker`:
a bar on a terminal, a line every 30 s otherwise), except for a typed session.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from treelm.progress import Ticker
from treelm.text.inputs import UnknownSymbols

if TYPE_CHECKING:  # torch and the run load only when a command runs
    from treelm.api.model import TreelmModel


def translate_stream(model: TreelmModel, lines: Iterable[str], beam: int,
                     length_penalty: float | None, batch_size: int | None,
                     plot: str | None = None, unk: str = "map", source: str = "stdin") -> None:
    """Translate ``lines`` (of ``source``, for messages) through
    :meth:`~treelm.api.model.TreelmModel.translate_batches` and print one translation a line
    as soon as its chunk is done; with ``plot``, draw the first sentence's attention there
    (:meth:`~treelm.api.model.TreelmModel.attention`). Source symbols outside the vocabulary
    follow ``unk`` (:mod:`treelm.text.inputs`); mapped ones are counted on stderr."""
    interactive = not isinstance(lines, list) and sys.stdin.isatty()
    # progress of the whole input (a typed session has none); the task's own ticker per chunk
    # is silenced by translate_batches
    total = len(lines) if isinstance(lines, list) else None
    tick = Ticker("translating", total, "sentences", silent=interactive)
    first = None
    policy = UnknownSymbols(unk, "the run's source vocabulary")
    with tick:
        for found in model.translate_batches(lines, beam, length_penalty,
                                             batch_size=batch_size, unk=policy, where=source,
                                             chunk=1 if interactive else None):
            for t in found:
                if first is None:
                    first = t
                print(t.text, flush=True)
            tick.update(len(found))
    policy.report()
    if plot and first is not None:
        from treelm.translate.plot import plot_attention

        att = model.attention(first.source, first)
        plot_attention(att.weights, att.source, att.target, plot)
