"""Tasks: what a kind of work owns (data, symbol tables, batches, loss, evaluation); the contract
is :class:`treelm.tasks.base.Task`. A config names its task with the top-level key ``task``
(default ``lm``); a new task is a module here and a row in :data:`TASKS`.
"""

from __future__ import annotations

from typing import Any

from treelm.config import SECTIONS, parse_section
from treelm.errors import ConfigError
from treelm.models import model_options
from treelm.tasks.base import Batch, Evaluation, LossOut, RunConfig, Task, TaskOptions
from treelm.tasks.listops import ListOpsTask
from treelm.tasks.lm import LMTask
from treelm.tasks.logic import LogicTask
from treelm.tasks.tagging import TaggingTask
from treelm.tasks.translation import TranslationTask

TASKS: dict[str, type[Task]] = {"lm": LMTask, "tagging": TaggingTask, "logic": LogicTask,
                                "translation": TranslationTask, "listops": ListOpsTask}

__all__ = ["TASKS", "Batch", "Evaluation", "LossOut", "RunConfig", "Task", "TaskOptions",
           "check_renamed", "read_run_config",
           "saved_config", "task_class", "task_options"]


def task_class(cfg: dict[str, Any]) -> type[Task]:
    name = cfg.get("task", "lm")
    if name not in TASKS:
        raise ConfigError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    return TASKS[name]


def task_options(cls: type[Task], cfg: dict[str, Any],
                 others: tuple[str, ...] | None = None) -> TaskOptions:
    """The task's keys of the ``train:`` section. ``others``: the keys that belong to the loop
    (any other key is an error); ``None`` ignores the rest (a saved, already checked config)."""
    train = dict(cfg.get("train") or {})
    if others is None:
        names = {f for f in cls.Options.__dataclass_fields__}
        train = {k: v for k, v in train.items() if k in names}
        others = ()
    return parse_section(cls.Options, train, "train", others)


def saved_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """A run's saved config as today's code reads it: ``train:`` keys its task has renamed since
    the run was made (``RENAMED_OPTIONS``) under their new names."""
    renamed = task_class(cfg).RENAMED_OPTIONS
    train = cfg.get("train") or {}
    if not any(k in train for k in renamed):
        return cfg
    return {**cfg, "train": {renamed.get(k, k): v for k, v in train.items()}}


def check_renamed(cfg: dict[str, Any]) -> None:
    """A new config that uses a ``train:`` key its task has renamed: one line naming the new
    key (the old name may mean something else in another task)."""
    cls = task_class(cfg)
    for old, new in cls.RENAMED_OPTIONS.items():
        if old in (cfg.get("train") or {}):
            raise ConfigError(f"train.{old} is train.{new} in a {cls.name!r} config (train.{old} "
                              f"is another task's key); rename it")


def read_run_config(raw: dict[str, Any], loop_keys: tuple[str, ...] | None = None) -> RunConfig:
    """Check and read every section a task and its model use (:class:`RunConfig`), before any
    data is read. ``loop_keys``: the ``train:`` keys that belong to the loop (any other key not
    the task's is an error); ``None`` for a saved config, already checked when its run began (keys
    of the loop are ignored, so that a run made by an older treelm still opens)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"a config is a mapping of {', '.join(SECTIONS)}; got "
                          f"{type(raw).__name__}")
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed must be an integer, got {seed!r}")
    task = task_class(raw)
    options = task_options(task, raw, others=loop_keys)
    # a task without a DATA dataclass (one a user registers) reads its section as written
    data = task.DATA.parse(raw.get("data")) if task.DATA is not None else raw.get("data")
    model = raw.get("model") or {}
    if not isinstance(model, dict):
        raise ConfigError(f"model: must be a mapping of options, got {type(model).__name__}")
    kind, kwargs = model_options(model)
    return RunConfig(raw, task, seed, data, options, {"type": kind, **kwargs})
