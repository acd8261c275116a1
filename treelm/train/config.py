"""The loop's part of the ``train:`` section (the task's own keys, such as batch sizes and
``bptt``, are its ``Options``: :mod:`treelm.tasks`), and its sub-section ``train.eval_parse``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from treelm.config import parse_section
from treelm.errors import ConfigError
from treelm.kernels.precision import PRECISIONS

SCHEDULES = ("constant", "plateau", "linear_time", "linear_units")
TREE_RULES = ("official", "split")


@dataclass
class EvalParse:
    """``train.eval_parse``: sentence F1 of the trees of every ON-LSTM layer, under each tree rule,
    on a treebank at every validation, logged as ``parse_f1/<rule>/L<k>`` beside the validation
    scores (:mod:`treelm.syntax.tracking`). On dev trees they also choose the run's default
    layer and rule and its ``best-trees`` checkpoint (:mod:`treelm.train.trees`); ``best`` stays
    the lowest validation loss. ``if_missing``: a treebank that is not there stops the run
    (``error``) or is said in one line, the run training without tree scores (``skip``)."""

    treebank: str = "nltk-dev"       # nltk-dev | nltk-test | nltk | a .mrg file, directory, glob
    layers: list[int] | str = "all"  # 1-based ON-LSTM layers, or all
    rules: list[str] = field(default_factory=lambda: list(TREE_RULES))   # official | split
    max_len: int | None = None       # sentences of at most this many words (None: all)
    max_sentences: int | None = None     # the first N sentences (None: all)
    batch_size: int = 256            # sentences per forward pass
    if_missing: str = "error"        # error | skip: a treebank not found stops the run, or not

    RULES: ClassVar[dict[str, Any]] = {"max_len": ">= 1", "max_sentences": ">= 1",
                                       "batch_size": ">= 1", "if_missing": ("error", "skip")}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> EvalParse:
        ep = parse_section(cls, d, "train.eval_parse")
        layers = ep.layers
        if not (layers == "all" or (isinstance(layers, list) and layers and all(
                isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in layers))):
            raise ConfigError(f"train.eval_parse.layers = {layers!r}: expected all or a list of "
                              f"layer numbers >= 1, e.g. [2]")
        if not ep.rules or any(r not in TREE_RULES for r in ep.rules):
            raise ConfigError(f"train.eval_parse.rules = {ep.rules!r}: expected a list of "
                              f"{' and '.join(TREE_RULES)}, e.g. [official]")
        return ep


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
    eval_every_units: int | None = None  # ... and/or one each time the units seen cross a
                                         # multiple of this: the same points on any machine
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
    eval_parse: EvalParse | None = None  # tree F1 at every validation (EvalParse's keys)
    init_from: str | None = None     # RUN or RUN:CHECKPOINT (best, best-trees, ...): a new run
                                     # starts from that run's weights (fine-tuning); a resume
                                     # goes on from its own

    RULES: ClassVar[dict[str, Any]] = {
        "optimizer": ("sgd", "ntasgd", "adam"), "lr": "> 0", "weight_decay": ">= 0",
        "momentum": "[0, 1)",
        "clip": ">= 0", "epochs": ">= 1", "nonmono": ">= 1", "lr_schedule": SCHEDULES,
        "lr_decay": "(0, 1]", "patience": ">= 1", "min_lr_frac": "[0, 1]", "max_minutes": "> 0",
        "eval_every_minutes": "> 0", "eval_every_units": ">= 1",
        "save_every_minutes": ">= 0", "save_every_batches": ">= 1",
        "log_interval": ">= 1", "threads": ">= 1", "device": ("auto", "cpu", "cuda"),
        "progress_seconds": "> 0", "precision": PRECISIONS, "max_units": ">= 1"}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, others: tuple[str, ...] = ()) -> TrainConfig:
        """``others``: keys of the section that belong to the task."""
        tc = parse_section(cls, d, "train", others)
        if tc.eval_parse is not None:
            tc.eval_parse = EvalParse.from_dict(tc.eval_parse)  # type: ignore[arg-type]
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
