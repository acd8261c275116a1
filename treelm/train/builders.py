"""Build what the training loop runs from a config: the task, the model, the optimiser.

Kept apart from the loop (:mod:`treelm.train.trainer`) so that the loop sees only built objects,
and so that tests and benchmarks can build the same things without training.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch
from torch import nn

from treelm.data.treebank import NLTK_NAMES
from treelm.errors import ConfigError
from treelm.models import build_model
from treelm.rundir.files import RunFiles
from treelm.tasks import Task, TaskOptions, check_renamed, task_class, task_options
from treelm.train.config import TrainConfig
from treelm.train.optim import Averager, make_optimizer


def train_sections(cfg: dict[str, Any]) -> tuple[TrainConfig, type[Task], TaskOptions]:
    """The ``train:`` section split between the loop and the task; an unknown key is an error."""
    cls = task_class(cfg)
    check_renamed(cfg)
    loop_keys = tuple(f.name for f in dataclasses.fields(TrainConfig))
    task_keys = tuple(f.name for f in dataclasses.fields(cls.Options))
    tc = TrainConfig.from_dict(cfg.get("train"), others=task_keys)
    options = task_options(cls, cfg, others=loop_keys)
    cls.check_data(cfg.get("data"))
    return tc, cls, options


def absolute_data_paths(cfg: dict[str, Any], cls: type[Task]) -> dict[str, Any]:
    """``cfg`` with the task's data file paths and a ``train.eval_parse.treebank`` path made
    absolute (read relative to the current directory, as typed), so the saved config works from
    anywhere."""
    data = dict(cfg.get("data") or {})
    for k in cls.PATH_KEYS:
        if isinstance(data.get(k), str):
            data[k] = str(Path(data[k]).expanduser().absolute())
    cfg = {**cfg, "data": data} if cfg.get("data") is not None else cfg
    parse = (cfg.get("train") or {}).get("eval_parse")
    if isinstance(parse, dict) and isinstance(parse.get("treebank"), str) and \
            parse["treebank"] not in NLTK_NAMES:
        parse = {**parse, "treebank": str(Path(parse["treebank"]).expanduser().absolute())}
        cfg = {**cfg, "train": {**cfg["train"], "eval_parse": parse}}
    return cfg


def build_task(cfg: dict[str, Any], cls: type[Task], options: TaskOptions,
               device: torch.device, rank: int = 0, world: int = 1,
               files: RunFiles | None = None) -> Task:
    """A new task from the data (``files`` None) or a saved run's, with its training data."""
    if files is None:
        return cls.create(cfg, options, device, rank, world)
    return cls.open(cfg, options, files, device, rank, world, with_data=True)


def build_task_model(cfg: dict[str, Any], task: Task) -> nn.Module:
    return build_model(cfg.get("model", {}), **task.model_dims())


def build_optimizer(tc: TrainConfig, model: nn.Module) -> tuple[torch.optim.Optimizer, Averager]:
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(tc.optimizer, params, tc.lr, tc.weight_decay, tc.momentum,
                               tc.nesterov)
    return optimizer, Averager(params, tc.nonmono)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device = 'cuda': no CUDA device is available here "
                          "(train.device=cpu or auto)")
    return torch.device(name)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
