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

from treelm.data.treebank import TREEBANK_NAMES
from treelm.errors import ConfigError
from treelm.models import build_model, optimizer_groups
from treelm.rundir.files import RunFiles
from treelm.tasks import RunConfig, Task, check_renamed, read_run_config, task_class
from treelm.train.config import TrainConfig
from treelm.train.optim import Averager, make_optimizer


def read_config(cfg: dict[str, Any], new: bool = True) -> tuple[TrainConfig, RunConfig]:
    """The config read once, every section checked before anything is read or made: the loop's
    keys of ``train:`` (``TrainConfig``) and the run's (``RunConfig``: seed, task, data, the task's
    options, the model). ``new``: a new run's config, whose data paths are made absolute (read
    relative to the current directory, as typed) so that the saved config works from anywhere; a
    resumed run's config is its saved one."""
    cls = task_class(cfg)
    check_renamed(cfg)
    if new:
        cfg = absolute_data_paths(cfg, cls)
    loop_keys = tuple(f.name for f in dataclasses.fields(TrainConfig))
    task_keys = tuple(f.name for f in dataclasses.fields(cls.Options))
    tc = TrainConfig.from_dict(cfg.get("train"), others=task_keys)
    return tc, read_run_config(cfg, loop_keys)


def absolute_data_paths(cfg: dict[str, Any], cls: type[Task] | None = None) -> dict[str, Any]:
    """``cfg`` with the task's data file paths and a ``train.eval_parse.treebank`` path made
    absolute; sections of the wrong shape are left as they are, for their parser to refuse.
    ``cls``: the config's task (default: the one it names)."""
    cls = cls or task_class(cfg)
    data = cfg.get("data")
    if isinstance(data, dict):
        data = {k: str(Path(v).expanduser().absolute())
                if k in cls.PATH_KEYS and isinstance(v, str) else v for k, v in data.items()}
        cfg = {**cfg, "data": data}
    train = cfg.get("train")
    parse = train.get("eval_parse") if isinstance(train, dict) else None
    if isinstance(parse, dict) and isinstance(parse.get("treebank"), str) and \
            parse["treebank"] not in TREEBANK_NAMES:
        parse = {**parse, "treebank": str(Path(parse["treebank"]).expanduser().absolute())}
        cfg = {**cfg, "train": {**train, "eval_parse": parse}}
    train = cfg.get("train")
    teacher = train.get("tree_teacher") if isinstance(train, dict) else None
    if isinstance(teacher, dict) and isinstance(teacher.get("trees"), str) and teacher["trees"]:
        teacher = {**teacher, "trees": str(Path(teacher["trees"]).expanduser().absolute())}
        cfg = {**cfg, "train": {**train, "tree_teacher": teacher}}
    return cfg


def build_task(config: RunConfig, device: torch.device, rank: int = 0, world: int = 1,
               files: RunFiles | None = None) -> Task:
    """A new task from the data (``files`` None) or a saved run's, with its training data."""
    if files is None:
        return config.task.create(config, device, rank, world)
    return config.task.open(config, files, device, rank, world, with_data=True)


def build_task_model(config: RunConfig, task: Task) -> nn.Module:
    """The model of ``config.model`` (checked already) with the sizes the task's data gives."""
    model = build_model(config.model, **task.model_dims())
    task.check_model(model)
    return model


def load_init(spec: str, model: nn.Module, config: RunConfig, task: Task) -> str:
    """``train.init_from``: the weights of ``RUN`` or ``RUN:CHECKPOINT`` (default ``best``;
    NT-ASGD's averaged weights where it averaged, as ``eval`` reads them) into the new run's
    ``model``. A run of another model or over another vocabulary is one line. Returns what was
    loaded, to be said."""
    from treelm.run import CHECKPOINTS
    from treelm.rundir.checkpoint import load_weights, model_signature

    run, _, which = spec.rpartition(":")
    if not run or which not in CHECKPOINTS:
        run, which = spec, "best"
    path = Path(run)
    files = RunFiles(path)
    if not files.pointer.exists():
        raise ConfigError(f"train.init_from = {spec!r}: {run} is not a run directory")
    vocab = getattr(task, "vocab", None)
    if vocab is not None and files.vocab_path().exists() and files.read_vocab().itos != vocab.itos:
        raise ConfigError(f"train.init_from = {spec!r}: that run's vocabulary is not this "
                          "run's (another corpus or tokenizer)")
    load_weights(path, model, which, signature=model_signature(config.raw))
    return f"{run} ({which})"


def build_optimizer(tc: TrainConfig, model: nn.Module) -> tuple[torch.optim.Optimizer, Averager]:
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(tc.optimizer, params, tc.lr, tc.weight_decay, tc.momentum,
                               tc.nesterov, scaled=optimizer_groups(model))
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
