"""Progress of long library calls on stderr: ``<what>: N/M units, X units/s, ETA m:ss``.

Every command that can run for minutes (``treelm eval`` of any task, the final validation of
``train``, ``suite agreement``, ``parse`` / ``eval-parse`` / ``translate`` / ``tag`` over files)
reports through one :class:`Ticker`, made where the work is counted (the evaluation loop, the
batches of a scorer) rather than in each verb, so that a verb cannot forget it. On a terminal the
ticker is a tqdm bar on stderr; elsewhere (a log file, a pipe, CI) it prints a plain line every
:func:`interval` seconds of wall time (30 by default; ``$TREELM_PROGRESS_SECONDS`` sets it, ``0``
prints at every update) and, when it printed any, a last line at the end. A call shorter than the
interval prints nothing, so quick commands and their tests stay quiet. stdout is never touched:
results printed there are unchanged.

:func:`reporting` silences every ticker in its scope (the ``--quiet`` of a verb) or sets their
interval (the trainer's ``progress_seconds``); running on a process other than rank 0 under
``torch.distributed`` silences them too. Tickers may nest (an evaluation inside a
training loop): each reports on its own.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

ENV_VAR = "TREELM_PROGRESS_SECONDS"
DEFAULT_SECONDS = 30.0

_quiet = 0                          # depth of nested reporting(quiet=True) scopes
_every: list[float] = []            # intervals set by reporting() scopes, innermost last


def interval() -> float:
    """Seconds between plain progress lines: the innermost :func:`reporting` scope's where one
    sets it, else ``$TREELM_PROGRESS_SECONDS``, else 30."""
    if _every:
        return _every[-1]
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_SECONDS
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"${ENV_VAR} must be a number of seconds, got {raw!r}") from None
    return max(0.0, value)


@contextlib.contextmanager
def reporting(quiet: bool = False, every: float | None = None) -> Iterator[None]:
    """Tickers inside the block are silent with ``quiet``, and print a plain line every
    ``every`` seconds (over ``$TREELM_PROGRESS_SECONDS``): how a caller with
    its own settings (the trainer's ``--quiet`` and ``progress_seconds``) passes them on."""
    global _quiet
    _quiet += int(quiet)
    if every is not None:
        _every.append(every)
    try:
        yield
    finally:
        _quiet -= int(quiet)
        if every is not None:
            _every.pop()


def silenced() -> bool:
    """Whether tickers made now stay silent: inside ``reporting(quiet=True)``, or not rank 0."""
    if _quiet:
        return True
    dist = sys.modules.get("torch.distributed")     # only if the program imported it
    try:
        return bool(dist is not None and dist.is_available() and dist.is_initialized()
                    and dist.get_rank() != 0)
    except (AttributeError, RuntimeError):
        return False


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


def _rate(rate: float) -> str:
    """Three significant digits or more: 12,345 · 123 · 12.3 · 0.123."""
    if rate >= 100:
        return f"{rate:,.0f}"
    return f"{rate:.1f}" if rate >= 10 else f"{rate:.3g}"


class Ticker:
    """Counts ``units`` of work towards ``total`` (unknown: ``None``) and reports on stderr.

    Use as a context manager (``with Ticker("test", n, "tokens") as tick: ... tick.update(k)``)
    or call :meth:`close`. ``every``: seconds between plain lines (default :func:`interval`);
    ``silent``: counts only.
    """

    def __init__(self, what: str, total: int | None = None, unit: str = "units",
                 every: float | None = None, silent: bool = False) -> None:
        self.what, self.total, self.unit = what, total, unit
        self.every = interval() if every is None else every
        self.done = 0
        self.printed = False
        self.t0 = self.last = time.perf_counter()
        self.bar: Any = None
        self.silent = silent or silenced()
        if not self.silent and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=what, unit=unit, leave=False, dynamic_ncols=True,
                            file=sys.stderr)

    def line(self) -> str:
        """``<what>: N/M units, X units/s, ETA m:ss`` (no total: without ``/M`` and ETA)."""
        elapsed = time.perf_counter() - self.t0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        text = f"{self.what}: {self.done:,}"
        if self.total is not None:
            text += f"/{self.total:,}"
        text += f" {self.unit}, {_rate(rate)} {self.unit}/s"
        if self.total is not None:
            left = max(0, self.total - self.done)
            text += f", ETA {_clock(left / rate)}" if rate > 0 else ", ETA ?"
        return text + f", {_clock(elapsed)} elapsed"

    def update(self, units: int = 1) -> None:
        """``units`` more done; prints a line when :attr:`every` seconds passed since the last."""
        self.done += units
        if self.silent:
            return
        if self.bar is not None:
            self.bar.update(units)
            return
        now = time.perf_counter()
        if now - self.last >= self.every:
            self.last = now
            self.printed = True
            print(self.line(), file=sys.stderr, flush=True)

    def close(self, finished: bool = True) -> None:
        """Ends the report: the bar is removed; after plain lines, a last one says it is done
        (not when the work stopped on an error, ``finished=False``)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.printed and finished and not self.silent:
            self.printed = False
            print(self.line().replace(", ETA 0:00", "") + " (done)", file=sys.stderr,
                  flush=True)

    def __enter__(self) -> Ticker:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(finished=kind is None)
