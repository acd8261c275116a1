"""Open a trained run directory: its config, task (symbol tables) and model.

``load_run`` rebuilds the task from the saved config and tables (no corpus is read until an
evaluation needs one) and the model from the task's sizes, then loads the weights. Inference
verbs declare their common options with :func:`add_run_options` and open the run with
:func:`open_run`.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treelm.errors import CheckpointError
from treelm.verb import Number

#: The checkpoints of a run: the lowest validation loss, the best dev trees of
#: ``train.eval_parse`` under either rule and under each rule alone (:mod:`treelm.train.trees`;
#: one per rule of ``treelm.syntax.trees.TREE_STYLES``, which a test holds this to), the newest.
CHECKPOINTS = ("best", "best-trees", "best-trees-official", "best-trees-split", "last")
#: What ``--checkpoint`` says of them.
CHECKPOINT_HELP = ("which weights of the run: best (the lowest validation loss; default), "
                   "best-trees (the best dev tree F1 of train.eval_parse), best-trees-official "
                   "or best-trees-split (the same under that rule alone) or last")

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
    precision: str = "fp32"      # what the run trained in (checkpoint.json); fp32 | bf16
    checkpoint: str = "best"     # which weights: one of CHECKPOINTS

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The context the run's forward passes run in (bf16 mixed precision or nothing)."""
        from treelm.kernels.precision import autocast

        return autocast(self.precision, "cpu")

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
             expect: str | tuple[str, ...] | None = None, averaged: bool | None = None) -> Run:
    """Load a run's model in eval mode from checkpoint ``which`` (:data:`CHECKPOINTS`; a run
    without ``best-trees`` is a one-line error saying why). ``expect`` (a task name, e.g.
    ``"lm"``, or a tuple of them) refuses runs of other tasks with a one-line error;
    ``averaged``: NT-ASGD's averaged weights or the live ones
    (:func:`treelm.rundir.checkpoint.load_weights`; None: averaged for ``best`` and
    ``best-trees``)."""
    import torch

    from treelm.config import load_config
    from treelm.models import build_model
    from treelm.rundir.checkpoint import load_weights, model_signature, read_pointer
    from treelm.rundir.files import RunFiles
    from treelm.tasks import read_run_config, saved_config, task_class

    files = RunFiles(path)
    pointer = read_pointer(files.path)  # clear error if this is not a run directory
    cfg = saved_config(load_config(files.config))
    cls = task_class(cfg)           # the task first: a run of another task is refused as such
    names = (expect,) if isinstance(expect, str) else expect
    if names is not None and cls.name not in names:
        raise CheckpointError(f"{files.path}: holds a {cls.name!r} run; this command needs a "
                              f"{' or '.join(map(repr, names))} run")
    if which not in pointer:
        raise CheckpointError(f"{files.path} has no {which} checkpoint: "
                              f"{_missing(which, cfg, pointer)}")
    for line in files.changed_data():
        print(f"treelm: warning: {line}", file=sys.stderr, flush=True)
    config = read_run_config(cfg)
    task = cls.open(config, files, torch.device("cpu"))
    model = build_model(config.model, **task.model_dims())
    load_weights(files.path, model, which, model_signature(cfg), averaged)
    model.eval()
    return Run(files.path, cfg, task, model, pointer.get("precision", "fp32"), which)


def _missing(which: str, cfg: dict[str, Any], pointer: dict[str, Any]) -> str:
    """Why a run lacks checkpoint ``which`` (only ``best-trees*`` can be missing)."""
    if not which.startswith("best-trees"):
        return "the run directory is incomplete"
    ep = (cfg.get("train") or {}).get("eval_parse")
    if not ep:
        return "it was trained without train.eval_parse"
    from treelm.rundir.trees import checkpoint_rule

    rule = checkpoint_rule(which)
    if rule and isinstance(ep, dict) and rule not in (ep.get("rules") or [rule]):
        return f"its train.eval_parse.rules do not score the {rule} rule"
    if rule and "best-trees" in pointer:     # trained before runs kept one checkpoint per rule
        return ("it was trained before treelm kept a checkpoint per rule; best-trees is its "
                "best dev trees under either rule")
    return ("no validation of it has chosen on dev trees yet (a test treebank, nltk-test or "
            "sinica-test, never chooses)")


def add_run_options(p: argparse.ArgumentParser) -> None:
    """``--checkpoint`` and ``--threads``, which every verb that opens a run takes."""
    p.add_argument("--checkpoint", choices=CHECKPOINTS, default="best", help=CHECKPOINT_HELP)
    p.add_argument("--threads", type=Number(int, at_least=1),
                   help="torch threads (default: torch's choice)")
    p.add_argument("--precision", choices=["run", "fp32", "bf16", "auto"], default="run",
                   help="numeric precision: the run's own (default: what it trained in), fp32, "
                   "bf16 mixed precision, or auto (bf16 where this machine multiplies it "
                   "natively)")


def open_run(args: argparse.Namespace, expect: str | tuple[str, ...] | None = None,
             attr: str = "run_dir") -> Run:
    """The run named by ``args.<attr>`` with the options of :func:`add_run_options`. Its
    precision (``--precision``, default the run's) holds for the rest of the verb: autocast is
    entered on ``args.scope``, the verb's ``ExitStack`` that :func:`treelm.cli.main` closes."""
    import torch

    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    run = load_run(getattr(args, attr), args.checkpoint, expect)
    asked = getattr(args, "precision", "run")
    if asked != "run":
        from treelm.kernels.precision import resolve

        run.precision = resolve(asked, "cpu").precision
    scope = getattr(args, "scope", None)      # the verb's lifetime (treelm.cli.main)
    if scope is not None:
        scope.enter_context(run.autocast())
    return run
