"""What ``treelm translate`` reads and prints: sentences in, one translation a line out.

Input is plain UTF-8 text, one sentence a line, from a file (read whole) or from stdin (translated
as it comes: a terminal line by line, a pipe in chunks, so a long pipe starts printing before it
ends). Lines are translated in chunks of
``CHUNK`` batches, sorted by length inside the chunk by the task, and printed in input order, each
flushed; an empty line prints an empty line, so the output stays aligned with the input. Progress
(sentences done, of how many for a file) goes to stderr (:class:`treelm.progress.Ticker`: a bar
on a terminal, a line every 30 s otherwise), except for a typed session.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from treelm.errors import TreelmError
from treelm.progress import Ticker, reporting

if TYPE_CHECKING:  # torch and the tasks load only when a command runs
    from torch import nn

    from treelm.tasks.translation import TranslationTask

CHUNK = 8         # batches translated together (sorting by length works within a chunk)


def check_options(beam: int, batch_size: int | None, alpha: float | None) -> None:
    if beam < 1:
        raise TreelmError(f"--beam must be >= 1, got {beam}")
    if batch_size is not None and batch_size < 1:
        raise TreelmError(f"--batch-size must be >= 1, got {batch_size}")
    if alpha is not None and not (math.isfinite(alpha) and alpha >= 0):
        raise TreelmError(f"--alpha must be a finite number >= 0, got {alpha}")


def read_file(path: str) -> list[str]:
    """The lines of a UTF-8 file; one-line errors naming the file (and the line)."""
    p = Path(path)
    if not p.is_file():
        raise TreelmError(f"{path}: no such file")
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise TreelmError(f"{path}:{line}: not UTF-8 text ({e.reason})") from None
    return text.splitlines()


def read_input(path: str | None) -> list[str] | Iterator[str]:
    """A file's lines, or stdin's lines as they come."""
    if path is not None:
        return read_file(path)
    return (line.rstrip("\r\n") for line in sys.stdin)


def check_unknown(task: TranslationTask, block: list[str], first_line: int, unk: str,
                  seen: dict[str, int]) -> None:
    """Source symbols outside the run's vocabulary in ``block`` (line numbers from
    ``first_line``): ``unk="error"`` stops at the first with a one-line error naming the line;
    ``"map"`` counts them in ``seen`` (they are read as ``<unk>``)."""
    for n, line in enumerate(block, first_line):
        unknown = task.unknown_source(line)
        if unknown and unk == "error":
            shown = ", ".join(repr(u) for u in dict.fromkeys(unknown))
            raise TreelmError(f"input line {n}: {shown} not known to the run's source "
                              "vocabulary; --unk map reads such symbols as <unk>")
        for u in unknown:
            seen[u] = seen.get(u, 0) + 1


def translate_stream(task: TranslationTask, model: nn.Module, lines: Iterable[str], beam: int,
                     alpha: float | None, batch_size: int | None,
                     plot: str | None = None, unk: str = "error") -> None:
    """Translate ``lines`` and print one translation a line as soon as its chunk is done;
    with ``plot``, draw the first sentence's attention there. Source symbols outside the
    vocabulary follow ``unk`` (:func:`check_unknown`); mapped ones are counted on stderr."""
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
    seen: dict[str, int] = {}
    with tick:
        while block := list(islice(it, chunk)):
            check_unknown(task, block, done + 1, unk, seen)
            done += len(block)
            with reporting(quiet=True):
                found = task.translate(model, block, beam, alpha, bs)
            for t in found:
                if first is None:
                    first = t
                print(t.text, flush=True)
            tick.update(len(block))
    if seen:
        shown = ", ".join(repr(u) for u in list(seen)[:10]) + (", …" if len(seen) > 10 else "")
        print(f"treelm: {sum(seen.values())} source symbol(s) outside the vocabulary read as "
              f"<unk>: {shown}", file=sys.stderr, flush=True)
    if plot and first is not None:
        from treelm.translate.plot import plot_attention

        plot_attention(*task.attention_map(model, first), plot)
