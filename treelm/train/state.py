"""The training loop's state, saved and restored whole, and the reader of older layouts."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

#: The phases of a run's wall time: ``start`` (config, data, model, the precision's probe, the
#: step-0 checkpoint), ``steps`` (``Trainer.step``: forward, backward, clip, optimiser),
#: ``validation`` (scores and tree scores), ``checkpoints`` (saves after the first), ``loop``
#: (the rest: the task's batching, logging, progress).
PHASES = ("start", "steps", "validation", "checkpoints", "loop")


@dataclass
class LoopState:
    """Everything of the loop that a resume restores (the task keeps its own position)."""

    epoch: int = 1
    step: int = 0
    elapsed: float = 0.0                 # wall seconds: startup, training, evaluation, saves
    tokens: int = 0                      # units seen by all processes
    base_lr: float = 0.0                 # lr before schedules (plateau decays it)
    best: float = math.inf               # best primary score, signed so that lower is better
    best_scores: dict[str, float] = field(default_factory=dict)
    val_history: list[float] = field(default_factory=list)   # signed primaries (NT-ASGD)
    bad_evals: int = 0
    epoch_loss: float = 0.0              # sums of loss × units this epoch / progress window
    epoch_units: int = 0
    win_loss: float = 0.0
    win_units: int = 0
    win_logs: dict[str, float] = field(default_factory=dict)  # the task's extra terms × units
    last_eval: float = 0.0               # elapsed time of the last validation
    metrics_bytes: int = 0               # length of metrics.jsonl at this state
    precision: str = ""                  # fp32 | bf16 as resolved at the start (pinned on resume)
    valid_seconds: float = 0.0           # wall time of the last validation (budgets the final one)
    stopped: str = ""                    # "minutes" | "units": the budget that ended the run
    limits: dict[str, Any] = field(default_factory=dict)   # epochs, max_minutes, max_units then
    # train.eval_parse on dev trees (treelm.train.trees): the choice at the validation that made
    # `best`, the best choice of any validation (that of `best-trees`), and per rule the best
    # choice under that rule alone (that of `best-trees-<rule>`); {} for none
    tree_best: dict[str, Any] = field(default_factory=dict)
    tree_top: dict[str, Any] = field(default_factory=dict)
    tree_top_rule: dict[str, dict[str, Any]] = field(default_factory=dict)
    # where ``elapsed`` went, in wall seconds (:data:`PHASES`): the run's own account of its
    # time outside the optimisation steps (the ``done`` event logs it)
    spent: dict[str, float] = field(default_factory=dict)

    def spend(self, phase: str, seconds: float) -> None:
        """Count ``seconds`` of wall time against ``phase`` (one of :data:`PHASES`)."""
        self.spent[phase] = self.spent.get(phase, 0.0) + seconds

    def time_account(self) -> dict[str, float]:
        """``spent`` with ``loop`` (the rest of ``elapsed``: batching, logging, progress), each
        phase's seconds rounded, in :data:`PHASES`' order."""
        known = {p: self.spent.get(p, 0.0) for p in PHASES if p != "loop"}
        known["loop"] = max(0.0, self.elapsed - sum(known.values()))
        return {p: round(known[p], 2) for p in PHASES}

    def count(self, value: float, units: int, logs: dict[str, float]) -> None:
        """A step's logged loss (and the task's extra terms) over ``units`` units."""
        self.epoch_loss += value * units
        self.epoch_units += units
        self.win_loss += value * units
        self.win_units += units
        for k, v in logs.items():
            self.win_logs[k] = self.win_logs.get(k, 0.0) + v * units

    def take_window(self) -> tuple[float, dict[str, float]]:
        """The progress window's mean loss and extra terms; the window starts again."""
        means = self.win_loss / self.win_units, {k: v / self.win_units
                                                 for k, v in self.win_logs.items()}
        self.win_loss, self.win_units, self.win_logs = 0.0, 0, {}
        return means


def upgrade_state(s: dict[str, Any]) -> dict[str, Any]:
    """Trainer states written before the Task seam (flat LM fields) in today's layout."""
    if "loop" in s:
        return s
    loop = LoopState(
        epoch=s["epoch"], step=s["step"], elapsed=s["elapsed"], tokens=s["tokens_seen"],
        base_lr=s["base_lr"], best=s["best_val"], val_history=list(s["val_history"]),
        bad_evals=s["bad_evals"], epoch_loss=s["epoch_loss"], epoch_units=s["epoch_tokens"],
        win_loss=s["win_loss"], win_units=s["win_tok"],
        last_eval=s.get("last_eval", s["elapsed"]), metrics_bytes=s["metrics_bytes"])
    if math.isfinite(loop.best):
        loop.best_scores = {"loss": loop.best}
    tasks = [{"row": s["row"], "states": st, "bptt_rng": s["bptt_rng"]} for st in s["states"]]
    return {"loop": dataclasses.asdict(loop), "task": tasks, "optimizer": s["optimizer"],
            "averager": s["averager"], "torch_rng": s["torch_rng"], "world": s["world"]}
