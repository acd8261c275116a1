"""A run's validation and what it decides: the task's scores on the valid split (and, with
``train.eval_parse``, the trees' F1) under the averaged weights, timed so that the last
validation's time budgets the final one; whether the scores beat the best so far (which makes
the ``best`` checkpoint); and whether the budget can hold another batch and the end of the run
(:mod:`treelm.train.budget`).

A mixin of :class:`treelm.train.trainer.Trainer`, which owns the attributes used here; apart so
that the loop's file reads as the loop.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from treelm import progress
from treelm.nn.fixed import fixed_weights
from treelm.tasks.base import Evaluation, Task
from treelm.train import budget
from treelm.train.config import TrainConfig
from treelm.train.state import LoopState


class Validation:
    """The validating side of :class:`~treelm.train.trainer.Trainer`."""

    tc: TrainConfig
    s: LoopState
    task: Task
    model: Any
    averager: Any
    trees: Any              # treelm.train.trees.TrainingTrees, or None
    tree_f1: dict[str, float]
    quiet: bool
    save_seconds: float
    batch_seconds: float
    autocast: Callable[[], AbstractContextManager[Any]]
    say: Callable[[str], None]
    _tick: Callable[[], float]

    def validate(self) -> Evaluation:
        self.averager.swap()
        try:
            # the task's evaluation reports progress (treelm.progress) as this loop does; one
            # scope of fixed weights for both, so that the trees read what the valid text made
            # (the first layer's input part over the vocabulary, treelm.models.lm)
            with self.autocast(), fixed_weights(self.model), progress.reporting(
                    quiet=self.quiet, every=self.tc.progress_seconds):
                ev = self.task.evaluate(self.model, "valid")
                if self.trees is not None:      # logged with the scores by the "valid" event
                    self.tree_f1 = self.trees.scores(
                        self.model, self.task.vocab)  # type: ignore[attr-defined]
        finally:
            self.averager.swap()
        if self.trees is not None:
            self.say(f"  tree F1 on {self.trees.treebank}: {self.trees.describe(self.tree_f1)}")
        return ev

    def _validate(self) -> Evaluation:
        """:meth:`validate`, timed: the time of the last validation budgets the final one."""
        t0 = self._tick()
        ev = self.validate()
        self.s.valid_seconds = self._tick() - t0
        self.s.spend("validation", self.s.valid_seconds)
        if self.trees is not None:      # best-trees: the next checkpoint is this validation's
            self.trees.validated(self.s, self.tree_f1)
        return ev

    def out_of_time(self) -> bool:
        """True when the budget cannot hold another batch and the end of the run (the final
        validation and its checkpoint): :mod:`treelm.train.budget`."""
        tc, s = self.tc, self.s
        reserve = budget.reserve_seconds(s.valid_seconds, self.save_seconds, self.batch_seconds)
        return (bool(tc.max_minutes) and s.elapsed + reserve >= 60.0 * tc.max_minutes) or (
            bool(tc.max_units) and s.tokens >= tc.max_units)

    def _stop_on_budget(self) -> None:
        """Record that the budget ended the run, and the limits then (a resume reads them)."""
        tc, s = self.tc, self.s
        s.stopped = "units" if tc.max_units and s.tokens >= tc.max_units else "minutes"
        s.limits = budget.limits(tc)

    def _improved(self, ev: Evaluation) -> bool:
        if ev.badness < self.s.best:
            self.s.best, self.s.best_scores = ev.badness, dict(ev.scores)
            self.s.tree_best = self.trees.best_record(self.s, self.tree_f1) if self.trees else {}
            return True
        return False

    def _spent(self) -> str:
        s, tc = self.s, self.tc
        if s.stopped == "units":
            return f"budget of {tc.max_units:,} units reached"
        return f"budget of {tc.max_minutes} min reached ({s.elapsed / 60:.2f} min)"


def scores_line(ev: Evaluation, split: str) -> str:
    """``valid loss 4.1234 | valid ppl    61.80``: a validation's scores, as the loop prints
    them."""
    return " | ".join(f"{split} {k} {v:.4f}" if k == "loss" else f"{split} {k} {v:8.2f}"
                      for k, v in ev.scores.items())
