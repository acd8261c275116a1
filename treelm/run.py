"""Open a trained run directory: its config, task (symbol tables) and model.

``load_run`` rebuilds the task from the saved config and tables (no corpus is read until an
evaluation needs one) and the model from the task's sizes, then loads the weights. Inference
verbs declare their common options with :func:`add_run_options` and open the run with
:func:`open_run`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treelm.errors import CheckpointError

if TYPE_CHECKING:  # the verbs import this module to declare options: keep torch out of --help
    from torch import nn

    from treelm.rundir.files import RunFiles
    from treelm.tasks import Task


@dataclass
class Run:
    path: Path
    cfg: dict[str, Any]
    task: Task
    model: nn.Module

    @property
    def files(self) -> RunFiles:
        from treelm.rundir.files import RunFiles

        return RunFiles(self.path)

    @property
    def vocab(self) -> Any:
        """The vocabulary of a task with one (language models)."""
        return self.task.vocab  # type: ignore[attr-defined]

    @property
    def tokenizer(self) -> Any:
        return self.task.tokenizer  # type: ignore[attr-defined]


def load_run(path: str | Path, which: str = "best",
             expect: str | tuple[str, ...] | None = None) -> Run:
    """Load a run's model in eval mode. ``expect`` (a task name, e.g. ``"lm"``, or a tuple of
    them) refuses runs of other tasks with a one-line error."""
    import torch

    from treelm.config import load_config
    from treelm.models import build_model
    from treelm.rundir.checkpoint import load_weights, model_signature, read_pointer
    from treelm.rundir.files import RunFiles
    from treelm.tasks import task_class, task_options

    files = RunFiles(path)
    read_pointer(files.path)  # clear error if this is not a run directory
    cfg = load_config(files.config)
    cls = task_class(cfg)
    names = (expect,) if isinstance(expect, str) else expect
    if names is not None and cls.name not in names:
        raise CheckpointError(f"{files.path}: holds a {cls.name!r} run; this command needs a "
                              f"{' or '.join(map(repr, names))} run")
    for line in files.changed_data():
        print(f"treelm: warning: {line}", file=sys.stderr, flush=True)
    task = cls.open(cfg, task_options(cls, cfg), files, torch.device("cpu"))
    model = build_model(cfg.get("model", {}), **task.model_dims())
    load_weights(files.path, model, which, model_signature(cfg))
    model.eval()
    return Run(files.path, cfg, task, model)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """``--checkpoint`` and ``--threads``, which every verb that opens a run takes."""
    p.add_argument("--checkpoint", choices=["best", "last"], default="best",
                   help="which weights of the run (default best)")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")


def open_run(args: argparse.Namespace, expect: str | tuple[str, ...] | None = None,
             attr: str = "run_dir") -> Run:
    """The run named by ``args.<attr>`` with the options of :func:`add_run_options`."""
    import torch

    if getattr(args, "threads", None) is not None and args.threads < 1:
        raise CheckpointError(f"--threads must be >= 1, got {args.threads}")
    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    return load_run(getattr(args, attr), args.checkpoint, expect)
