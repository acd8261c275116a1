"""What lets a run survive a kill at any moment: the run directory made whole before the first
batch (config, symbol tables, data fingerprints and a step-0 checkpoint, or nothing at all), one
writer at a time (:mod:`treelm.rundir.lock`), and checkpoints holding everything the next batch
depends on (the loop's :class:`LoopState`, the task's position, the optimiser and averager, every
RNG state and the GEMM backends measured), restored whole on ``--resume`` so that the loss curve
continues as an uninterrupted run's would. With ``train.eval_parse`` on dev trees, a checkpoint
may also become ``best-trees``, and ``trees.json`` follows the pointer
(:mod:`treelm.train.trees`).

A mixin of :class:`treelm.train.trainer.Trainer`, which owns the attributes used here; apart so
that the loop's file reads as the loop.
"""

from __future__ import annotations

import dataclasses
import errno
import shutil
import sys
from pathlib import Path
from typing import Any

from treelm.config import dump_config
from treelm.errors import CheckpointError, TreelmError
from treelm.kernels import gemm
from treelm.rundir.checkpoint import (
    CheckpointWriteError,
    load_trainer_state,
    load_weights,
    read_pointer,
    save_checkpoint,
)
from treelm.rundir.files import DISK_FULL, atomic_write_text
from treelm.rundir.lock import RunLockedError
from treelm.train import distributed as D
from treelm.train.reproducible import rng_state, set_rng_state
from treelm.train.state import LoopState, upgrade_state


class Persistence:
    """The run directory's side of :class:`~treelm.train.trainer.Trainer`."""

    cfg: dict[str, Any]
    s: LoopState
    save_seconds: float
    trees: Any              # treelm.train.trees.TrainingTrees, or None

    def _start(self) -> None:
        """Make the run directory with its config, tables and a step-0 checkpoint, so that a
        kill at any later moment leaves a run that resumes. A failure here leaves nothing."""
        made = not self.files.path.exists()
        try:
            if self.dist.main:
                self.files.path.mkdir(parents=True, exist_ok=True)
                self._lock()
                atomic_write_text(self.files.config, dump_config(self.cfg))
                self.task.save(self.files)
                self.files.write_fingerprints(self.task.data_files())
                self.metrics.start()
                # what the run trains in and why (auto's measurements), before the step-0
                # checkpoint so that a resume from it keeps the line
                self.event("precision", **self.choice.as_dict())
            self.save(fresh=True)
        except RunLockedError:
            raise                   # another process's run: nothing here is ours to remove
        except BaseException as e:
            self.close()
            if made and self.dist.main:
                shutil.rmtree(self.files.path, ignore_errors=True)
            if isinstance(e, OSError):
                where = f"{e.filename}: " if e.filename else ""
                raise TreelmError(f"{self.files.path}: cannot write the run directory "
                                  f"({where}{e.strerror or e}); nothing was kept") from None
            raise

    def _lock(self) -> None:
        """Take the run directory's writer lock (main process; :mod:`treelm.rundir.lock`)."""
        if not self.dist.main:
            return
        try:
            note = self.lock.acquire()
        except OSError as e:
            raise TreelmError(f"{self.files.path}: cannot write the run directory "
                              f"({e.strerror or e})") from None
        if note:
            self.tell(note)

    def close(self) -> None:
        """Release the run directory (the lock); safe to call twice."""
        self.lock.release()

    def save(self, best: bool = False, fresh: bool = False) -> None:
        """A checkpoint as ``last`` (and ``best``; and ``best-trees`` or ``best-trees-<rule>``
        when a validation since the last save beat it); ``fresh``: the first of a new run, so
        that a pointer (and ``trees.json``) left by the run ``--force`` replaces names nothing
        of it any more."""
        t0 = self._tick()
        trees = sorted(self.trees.pending) if self.trees is not None else []
        self.s.metrics_bytes = self.metrics.nbytes
        state = {"loop": dataclasses.asdict(self.s),
                 "task": D.gather_objects(self.task.state_dict(), self.dist),  # collective
                 "optimizer": self.optimizer.state_dict(),
                 "averager": self.averager.state_dict(),
                 **rng_state(self.device), "world": self.dist.world,
                 "gemm": gemm.measurements()}     # a resume chooses the same GEMM backends
        if self.dist.main:
            if fresh:
                self.files.trees.unlink(missing_ok=True)
            save_checkpoint(self.files.path, self.model, state, self.signature, best,
                            self.averager if self.averager.active else None,
                            precision=self.s.precision or None, fresh=fresh,
                            trees=trees)
            if self.trees is not None:
                self.trees.pending = set()
                self.trees.sync(self.files.path, self.s)
        D.barrier(self.dist)
        self.save_seconds = self._tick() - t0
        if not fresh:           # (the step-0 checkpoint is part of the start)
            self.s.spend("checkpoints", self.save_seconds)

    def _keep_trees(self, last: bool = False) -> None:
        """A checkpoint now if the validation just made a tree checkpoint (every rank decides
        alike); after an epoch's ``last`` batch the epoch's own checkpoint follows at once."""
        if D.any_rank(self.trees is not None and bool(self.trees.pending), self.dist) and not last:
            self.save()

    def _restore(self) -> None:
        self._lock()
        for line in self.files.changed_data() if self.dist.main else []:
            print(f"treelm: warning: {line}", file=sys.stderr, flush=True)
        load_weights(self.files.path, self.model, "last", self.signature)
        s = upgrade_state(load_trainer_state(self.files.path))
        self.s = LoopState(**s["loop"])
        tasks = s["task"]
        same = len(tasks) == self.dist.world
        self.task.load_state_dict(tasks[self.dist.rank if same else 0], same)
        self.optimizer.load_state_dict(s["optimizer"])
        self.averager.load_state_dict(s["averager"])
        set_rng_state(s, self.device)
        gemm.restore_measurements(s.get("gemm", []))
        self.metrics.nbytes = self.s.metrics_bytes
        if self.dist.main:  # forget what was logged after the checkpoint
            self.metrics.truncate(self.s.metrics_bytes)
        if self.trees is not None:  # a kill between a checkpoint and trees.json: mended
            self.trees.sync(self.files.path, self.s)


def write_failure(run: Path, e: OSError) -> TreelmError | None:
    """The one line for a write that failed while ``run`` trained (a full disk: ``ENOSPC``,
    ``EDQUOT``, ``EFBIG``; or any error writing a file of the run): the file, what went wrong,
    the unfinished checkpoint removed, and the last good checkpoint, from which ``--resume``
    continues. None for an error that is not a write of the run's (left to propagate)."""
    name = errno.errorcode.get(e.errno or 0, "")
    ours = bool(e.filename) and Path(str(e.filename)).resolve().is_relative_to(run.resolve())
    if not ours and e.errno not in DISK_FULL:
        return None
    what = f"{e.filename}: " if e.filename else ""
    what += f"{e.strerror or e}" + (f" ({name})" if name else "")
    if isinstance(e, CheckpointWriteError) and e.removed is not None:
        what += f"; the unfinished checkpoint {e.removed} was removed"
    # only a full disk wants room; anything else (permissions, a read-only or failing disk)
    # wants its cause mended first
    then = "make room" if e.errno in DISK_FULL else "mend that"
    try:
        last = read_pointer(run)["last"]
        # (a failure's path: reading the state once for its step costs nothing that matters)
        step = load_trainer_state(run)["loop"]["step"]
    except (CheckpointError, KeyError, TypeError):
        return TreelmError(f"{what}; {run} holds no complete checkpoint")
    return TreelmError(f"{what}; the last good checkpoint is {run / last} (step {step:,}): "
                       f"{then}, then `treelm train --resume {run}` continues from it")
