"""The loop's part of the ``train:`` section (the task's own keys, such as batch sizes and
``bptt``, are its ``Options``: :mod:`treelm.tasks`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from treelm.config import parse_section
from treelm.errors import ConfigError
from treelm.kernels.precision import PRECISIONS

SCHEDULES = ("constant", "plateau", "linear_time", "linear_units")


@dataclass
class TrainConfig:
    """The loop's keys of ``train:``; every field has the default shown in ``configs/``."""

    optimizer: str = "adam"          # sgd | ntasgd | adam
    lr: float = 2e-3
    weight_decay: float = 0.0
    momentum: float = 0.0            # sgd: momentum μ (0 = plain SGD)
    nesterov: bool = False           # sgd: Nesterov's momentum (needs momentum > 0)
    clip: float = 0.25               # max global gradient norm; 0 = off
    epochs: int = 1
    nonmono: int = 5                 # NT-ASGD patience, in evaluations
    lr_schedule: str = "constant"    # constant | plateau | linear_time | linear_units
    lr_decay: float = 0.5            # plateau: multiply lr by this after `patience` bad evals
    patience: int = 1
    min_lr_frac: float = 0.0         # linear_*: final lr as a fraction of lr
    max_minutes: float | None = None     # wall-time budget: startup, training, every evaluation,
                                         # the final one included (train/budget.py)
    eval_every_minutes: float | None = None  # extra validations inside an epoch (a curve)
    save_every_minutes: float = 5.0
    save_every_batches: int | None = None
    log_interval: int = 200          # batches between log lines when not on a terminal
    threads: int | None = None       # torch.set_num_threads; None = leave as is
    flush_denormal: bool = True      # CPU: tiny gradients as denormals slow training down 2×
    device: str = "auto"             # auto | cpu | cuda
    deterministic: bool = False      # CUDA: deterministic kernels, so a resume is exact there too
    progress_seconds: float = 30.0   # without a terminal: a progress line this often
    precision: str = "auto"          # fp32 | bf16 | auto: bf16 mixed precision where this
                                     # machine multiplies bfloat16 natively (measured once)
    max_units: int | None = None     # stop after this many training units (tokens, examples)

    RULES: ClassVar[dict[str, Any]] = {
        "optimizer": ("sgd", "ntasgd", "adam"), "lr": "> 0", "weight_decay": ">= 0",
        "momentum": "[0, 1)",
        "clip": ">= 0", "epochs": ">= 1", "nonmono": ">= 1", "lr_schedule": SCHEDULES,
        "lr_decay": "(0, 1]", "patience": ">= 1", "min_lr_frac": "[0, 1]", "max_minutes": "> 0",
        "eval_every_minutes": "> 0", "save_every_minutes": ">= 0", "save_every_batches": ">= 1",
        "log_interval": ">= 1", "threads": ">= 1", "device": ("auto", "cpu", "cuda"),
        "progress_seconds": "> 0", "precision": PRECISIONS, "max_units": ">= 1"}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, others: tuple[str, ...] = ()) -> TrainConfig:
        """``others``: keys of the section that belong to the task."""
        tc = parse_section(cls, d, "train", others)
        if tc.lr_schedule == "linear_time" and not tc.max_minutes:
            raise ConfigError("train.lr_schedule = 'linear_time' needs train.max_minutes")
        if tc.lr_schedule == "linear_units" and not tc.max_units:
            raise ConfigError("train.lr_schedule = 'linear_units' needs train.max_units")
        if (tc.momentum or tc.nesterov) and tc.optimizer != "sgd":
            raise ConfigError(f"train.momentum and train.nesterov are options of "
                              f"train.optimizer = 'sgd', not {tc.optimizer!r}")
        if tc.nesterov and not tc.momentum:
            raise ConfigError("train.nesterov = true needs train.momentum > 0 (e.g. 0.99)")
        return tc
