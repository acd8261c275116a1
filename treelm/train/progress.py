"""What a person watching training sees: a tqdm bar on a terminal, plain lines in a log.

On a terminal the bar shows tokens/s, the loss and the task's scores of the last window, and the
minutes left of a ``max_minutes`` budget. Without one (``nohup``, CI, a log file) a line is
printed every ``every`` seconds of wall time (30 by default, so the first comes within a minute
of the first batch, whatever the batch size) with the epoch's progress and ETA, tokens/s, the loss
since the previous line and the minutes left of the budget.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


class Progress:
    def __init__(self, epoch: int, done: int, total: int, world: int, every: float,
                 budget_s: float | None, scores: Callable[[float], dict[str, float]],
                 quiet: bool = False) -> None:
        self.epoch, self.done, self.total, self.world = epoch, done, total, world
        self.every, self.budget_s, self.scores = every, budget_s, scores
        self.bar = None
        if not quiet:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, unit="tok", unit_scale=world,
                            desc=f"epoch {epoch}", leave=False, dynamic_ncols=True, disable=None,
                            file=sys.stderr)
        self.plain = not quiet and (self.bar is None or self.bar.disable)
        self.t0 = time.perf_counter()
        self.loss, self.units = 0.0, 0         # since the last plain line

    def update(self, units: int, loss: float, elapsed: float) -> None:
        """After a batch of ``units`` on this process with mean ``loss``; ``elapsed``: seconds
        of the run so far (training and evaluation)."""
        self.done += units
        self.loss += loss * units
        self.units += units
        if self.bar is not None:
            self.bar.update(units)
        now = time.perf_counter()
        if self.plain and now - self.t0 >= self.every:
            rate = self.units / max(1e-9, now - self.t0)            # this process, units/s
            mean = self.loss / self.units
            txt = " | ".join(f"{k} {v:8.2f}" for k, v in self.scores(mean).items())
            eta = (self.total - self.done) / max(rate, 1e-9)
            left = ""
            if self.budget_s:
                left = f" | {_minutes(max(0.0, self.budget_s - elapsed))} left of budget"
            print(f"  epoch {self.epoch} {100 * self.done / self.total:5.1f}% | loss {mean:.3f}"
                  f" | {txt} | {rate * self.world:7,.0f} tok/s | {_minutes(elapsed)} | "
                  f"epoch ETA {_minutes(eta)}{left}", file=sys.stderr, flush=True)
            self.t0, self.loss, self.units = now, 0.0, 0

    def postfix(self, loss: float, tok_s: float, elapsed: float) -> None:
        """The bar's summary of the last logging window (terminal only)."""
        if self.bar is None or self.bar.disable:
            return
        txt = " ".join(f"{k} {v:.2f}" for k, v in self.scores(loss).items())
        left = ""
        if self.budget_s:
            left = f" {_minutes(max(0.0, self.budget_s - elapsed))} left"
        self.bar.set_postfix_str(f"loss {loss:.3f} {txt} {tok_s:,.0f} tok/s{left}",
                                 refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
