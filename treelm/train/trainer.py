"""The one training loop of treelm, for every task.

``train(cfg, run_dir)`` builds the task, model and optimiser from a config
(:mod:`treelm.train.builders`) and runs epochs of the task's batches with gradient clipping,
optional NT-ASGD, learning-rate schedules, a wall-time budget, periodic validation, progress
display and crash-safe checkpoints; ``resume(run_dir, cfg)`` continues a killed run from its last
checkpoint so that the loss curve is the one an uninterrupted run gives. A checkpoint holds the
loop's state (:class:`LoopState`, saved and restored whole), the task's state (its position in the
epoch and what it carries between batches), the optimiser and every RNG state.

The loop knows nothing of the data: a batch goes to ``task.loss``, scores come from
``task.evaluate`` (:class:`treelm.tasks.base.Task`). With ``train.eval_parse`` a language model's
trees are scored too at every validation, logged beside the scores; on dev trees they choose the
run's default layer and rule and its ``best-trees`` checkpoint (:mod:`treelm.train.trees`), while
``best`` stays the task's primary score's. The run directory's side (making it whole, the writer
lock, checkpoints and their restore) is :mod:`treelm.train.persistence`; validating, and what a
validation decides (the best scores, the end of the budget), :mod:`treelm.train.validation`.
"""

from __future__ import annotations

import gc
import hashlib
import sys
import time
from typing import Any

import torch
from torch import nn

from treelm import omp
from treelm.kernels import precision
from treelm.rundir.checkpoint import (
    model_signature,
)
from treelm.rundir.files import MetricsLog, RunFiles
from treelm.rundir.lock import RunLock
from treelm.tasks.base import Batch
from treelm.train import budget, process, step_probe
from treelm.train import distributed as D
from treelm.train.builders import (
    build_optimizer,
    build_task,
    build_task_model,
    count_parameters,
    load_init,
    pick_device,
    read_config,
)
from treelm.train.interrupts import StopRequests
from treelm.train.optim import set_lr
from treelm.train.persistence import Persistence
from treelm.train.progress import Progress
from treelm.train.state import LoopState
from treelm.train.tensorboard import Board
from treelm.train.trees import training_trees
from treelm.train.validation import Validation, scores_line


class Trainer(Persistence, Validation):
    def __init__(self, cfg: dict[str, Any], files: RunFiles, resume: bool = False,
                 quiet: bool = False, started: float | None = None) -> None:
        # the run's clock starts with the command (``started``: its perf_counter), else here
        self._t_last = time.perf_counter() if started is None else started
        self._t_process = self._t_last          # this process's start (a resume's too)
        self.save_seconds = self.batch_seconds = 0.0
        self.resumed = resume
        self.finished: str | None = None        # why a resumed run has nothing left to train
        self.lock = RunLock(files.lock)         # one writer per run directory (main process)
        self.board: Board | None = None         # TensorBoard's view of the metrics log
        self.tc, self.config = read_config(cfg, new=not resume)  # all checked, nothing made
        self.cfg, self.files = self.config.raw, files
        process.configure(self.tc)     # memory, threads, number formats: before anything
        self.device = pick_device(self.tc.device)
        self.dist = D.setup(self.device)
        if self.device.type == "cuda" and self.dist.enabled:
            self.device = torch.device("cuda", self.dist.local_rank)
            torch.cuda.set_device(self.device)
        self.quiet = quiet or not self.dist.main
        if torch.get_num_threads() > 1 and not self.quiet and not self.dist.enabled and (
                note := omp.busy_note(torch.get_num_threads())):   # (DDP's ranks are busy
            print(note, file=sys.stderr, flush=True)               # cores by design)
        torch.manual_seed(self.config.seed)
        self.task = build_task(self.config, self.device, self.dist.rank, self.dist.world,
                               files if resume else None)
        self.model = build_task_model(self.config, self.task).to(self.device)
        self.signature = model_signature(self.cfg)
        self.step_logs: dict[str, float] = {}
        if self.tc.init_from and not resume:
            loaded = load_init(self.tc.init_from, self.model, self.config, self.task)
            self.say(f"treelm: starting from the weights of {loaded}")
        self.net: nn.Module = self.model
        if self.dist.enabled:
            self.net = nn.parallel.DistributedDataParallel(self.model)
        self.optimizer, self.averager = build_optimizer(self.tc, self.model)
        self.trees, self.tree_f1 = training_trees(self.tc.eval_parse, self.model,
                                                  self.config.task.name, self.dist.main,
                                                  self.tell), {}
        self.s = LoopState(base_lr=self.tc.lr)
        self.metrics = MetricsLog(files)
        if resume:
            try:
                self._restore()
                self.finished = budget.finished(self.s.epoch, self.s.elapsed, self.s.tokens,
                                                self.s.stopped, self.s.limits, self.tc)
                if not self.finished:
                    self.choice = self._choose_precision(resumed=True)
            except BaseException:
                self.close()
                raise
        else:
            self.choice = self._choose_precision(resumed=False)
            self._start()       # its step-0 checkpoint records the precision
        if self.dist.main:      # (opened at its first event: a run that logs none makes no tb/)
            self.board = Board(files.tb, self.s.tokens if resume else None, self.tell)

    def _choose_precision(self, resumed: bool) -> precision.Choice:
        """fp32 or bf16 for this run: ``train.precision``, ``auto`` measured once per process
        (:mod:`treelm.kernels.precision`) and, where that says bf16, confirmed by this run's own
        step (:mod:`treelm.train.step_probe`); a resume keeps what the run started with unless the
        config now names another precision outright."""
        asked, saved = self.tc.precision, self.s.precision if resumed else ""
        if saved and asked in ("auto", saved):
            choice = precision.Choice(str(self.device), saved, "the run's precision, kept on "
                                      "resume")
        else:
            choice = precision.resolve(asked, self.device)
            if asked == "auto" and not precision.pinned() and self.dist.main:
                # the machine, then this model (on the main process: its choice is taken below)
                choice = step_probe.confirm(choice, self.model, self.task, self.device, self.say)
            # under DDP every process takes the main one's choice (a near tie measured apart
            # would otherwise split them)
            choice = D.gather_objects(choice, self.dist)[0]
            if saved:
                self.tell(f"treelm: precision {saved} -> {choice.precision} "
                          f"(train.precision={asked})")
        self.s.precision = choice.precision
        self.autocast = lambda: precision.autocast(choice.precision, self.device)
        self.say(f"treelm: precision {choice.precision} ({choice.reason})")
        return choice

    # ---------------------------------------------------------------- output
    def event(self, event: str, **fields: Any) -> None:
        if self.dist.main:
            record = {"event": event, "epoch": self.s.epoch, "step": self.s.step,
                      "elapsed": round(self.s.elapsed, 2), "tokens": self.s.tokens, **fields}
            self.metrics.append(record)
            if self.board is not None:
                self.board.log(record)

    def close(self) -> None:
        """Close the TensorBoard view, then release the run directory; safe to call twice."""
        if self.board is not None:
            self.board.close()
        super().close()

    def say(self, msg: str) -> None:
        if not self.quiet:
            print(msg, file=sys.stderr, flush=True)

    def tell(self, msg: str) -> None:
        """Printed even with --quiet (on the main process): what happened to the user's run."""
        if self.dist.main:
            print(msg, file=sys.stderr, flush=True)

    # ---------------------------------------------------------------- loop
    def lr_now(self) -> float:
        if self.tc.lr_schedule == "linear_time":        # over the wall-time budget
            frac = min(1.0, self.s.elapsed / (60.0 * self.tc.max_minutes))
        elif self.tc.lr_schedule == "linear_units":     # over the budget in units: the same
            frac = min(1.0, self.s.tokens / self.tc.max_units)   # curve on any machine
        else:
            return self.s.base_lr
        return self.s.base_lr * (1.0 - (1.0 - self.tc.min_lr_frac) * frac)

    def _tick(self) -> float:
        """Add the wall time since the last tick to ``elapsed``; returns now. Every second of
        the process counts against ``max_minutes``, wherever the ticks fall."""
        now = time.perf_counter()
        self.s.elapsed += now - self._t_last
        self._t_last = now
        return now

    def train(self) -> dict[str, Any] | None:
        """Train to the end (epochs, budget or a stop request); the summary, or None when a
        resumed run was already finished."""
        s = self.s
        if self.finished:
            self.tell(f"treelm: {self.files.path} is finished ({self.finished}): nothing to "
                      f"train (raise train.epochs, train.max_minutes or train.max_units on the "
                      f"command line to train on)")
            self.event("done", **self._summary())   # the resume cut it from the log: put back
            self._leave_group()
            return None
        self.say(f"treelm: {self.signature.get('cell', '')} {self.signature.get('type')} with "
                 f"{count_parameters(self.model):,} parameters, {self.task.describe()}"
                 + (f", {self.dist.world} processes" if self.dist.enabled else ""))
        if self.resumed:
            of = f" of {self.tc.max_minutes}" if self.tc.max_minutes else ""
            self.tell(f"treelm: resuming {self.files.path} from step {s.step:,} (epoch {s.epoch}"
                      f", {s.elapsed / 60:.1f}{of} min done)")
        self.s.spend("start", time.perf_counter() - self._t_process)
        self.net.train()
        with StopRequests(self.tell) as self.stop:
            ends = False
            if self.tc.max_minutes and not s.valid_seconds:
                self.say("treelm: validating once before training: its time budgets the final "
                         "validation inside train.max_minutes")
                ev = self._validate()
                self.event("valid", **ev.scores, **self.tree_f1, initial=True)
                self.say(f"  {scores_line(ev, 'valid')} at step {s.step} "
                         f"({s.valid_seconds:.1f} s)")
                if D.any_rank(self.out_of_time(), self.dist):
                    # no room to train and validate again: this validation is the final one
                    self.tell(f"treelm: one validation takes {s.valid_seconds:.1f} s: "
                              f"train.max_minutes = {self.tc.max_minutes} leaves no time to "
                              f"train and validate again; the run ends here")
                    self._improved(ev)
                    self._stop_on_budget()
                    self.save(best=True)
                    ends = True
            stop = "budget" if ends else self._loop()
        if stop == "interrupted":
            self.tell(f"treelm: interrupted ({self.stop.signal}): saved a checkpoint at step "
                     f"{self.s.step} (epoch {self.s.epoch}, {self.s.elapsed / 60:.1f} min); "
                     f"treelm train --resume {self.files.path} continues from there")
            self._leave_group()
            return {"interrupted": True, "step": self.s.step, "elapsed": self.s.elapsed}
        summary = self._summary()
        self.event("done", **summary)
        self._leave_group()
        return summary

    def _summary(self) -> dict[str, Any]:
        s = self.s
        summary = {**{f"best_valid_{k}": v for k, v in s.best_scores.items()},
                   "elapsed": s.elapsed, "tokens": s.tokens, "epochs": s.epoch - 1,
                   "precision": s.precision, "seconds_by_phase": s.time_account()}
        if self.dist.enabled:
            # every rank's weights, hashed: DDP must have kept them identical
            h = hashlib.sha256()
            for p in self.model.parameters():
                h.update(p.detach().cpu().numpy().tobytes())
            summary["rank_digests"] = D.gather_objects(h.hexdigest(), self.dist)
        return summary

    def _leave_group(self) -> None:
        # DDP's reducer holds the process group: drop it first, or gloo may abort at exit
        self.net = self.model
        gc.collect()
        D.teardown(self.dist)

    def _loop(self) -> str | None:
        """Epochs until done; returns "budget", "interrupted" or None (all epochs)."""
        tc, s = self.tc, self.s
        while s.epoch <= tc.epochs:
            stop = self._epoch()
            if stop == "interrupted":
                return stop
            if stop == "budget":  # one last validation of where we are
                self._stop_on_budget()
                self.say(f"treelm: final validation (the last one took {s.valid_seconds:.1f} s)"
                         if s.valid_seconds else "treelm: final validation")
                ev = self._validate()
                improved = self._improved(ev)
                self.event("valid", **ev.scores, **self.tree_f1, budget_end=True)
                self.say(f"| {self._spent()} | {scores_line(ev, 'valid')}")
                self.save(best=improved)
                return stop
            ev = self._validate()
            s.last_eval = s.elapsed
            s.val_history.append(ev.badness)
            improved = self._improved(ev)
            s.bad_evals = 0 if improved else s.bad_evals + 1
            if tc.lr_schedule == "plateau" and s.bad_evals >= tc.patience:
                s.base_lr *= tc.lr_decay
                s.bad_evals = 0
            if tc.optimizer == "ntasgd" and self.averager.maybe_trigger(s.val_history):
                self.say("treelm: switching to averaged SGD (NT-ASGD)")
                self.event("asgd_start")
            tr_loss = s.epoch_loss / max(1, s.epoch_units)
            self.event("valid", **ev.scores, **self.tree_f1, train_loss=tr_loss,
                       lr=self.lr_now(), epoch_end=True)
            train_txt = " | ".join(f"train {k} {v:8.2f}" for k, v in
                                   self.task.train_scores(tr_loss).items()) or \
                f"train loss {tr_loss:.4f}"
            self.say(f"| epoch {s.epoch:3d} | {s.elapsed / 60:6.1f} min | {train_txt} | "
                     f"{scores_line(ev, 'valid')}" + (" | best" if improved else ""))
            s.epoch += 1
            self.task.new_epoch()
            s.epoch_loss, s.epoch_units = 0.0, 0
            # no room for another batch and a validation: this epoch's was the final one
            ends = s.epoch <= tc.epochs and D.any_rank(self.out_of_time(), self.dist)
            if ends:
                self._stop_on_budget()
                self.say(f"| {self._spent()}")
            self.save(best=improved)
            if ends:
                return "budget"
        return None

    def step(self, batch: Batch, lr: float) -> float:
        """One optimisation step on ``batch`` at rate ``lr``; returns the logged loss."""
        set_lr(self.optimizer, lr)
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast():       # forward and loss; the backward follows autocast's casts
            out = self.task.loss(self.net, batch)
        out.loss.backward()
        if self.tc.clip:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.tc.clip)
        self.optimizer.step()
        self.averager.update()
        self.step_logs = {k: v.item() for k, v in out.logs.items()}
        return out.value.item()

    def _epoch(self) -> str | None:
        """One (rest of an) epoch; returns "budget" or "interrupted" when it stops early."""
        tc, s, world = self.tc, self.s, self.dist.world
        done, total = self.task.progress()
        progress = Progress(s.epoch, done, total, world, tc.progress_seconds,
                            60.0 * tc.max_minutes if tc.max_minutes else None,
                            self.task.train_scores, self.quiet)
        t_save = s.elapsed
        win_t0, win_units_timed = time.perf_counter(), 0
        try:
            for batch in self.task.batches():
                lr = self.lr_now() * batch.lr_scale
                t_step = time.perf_counter()
                value = self.step(batch, lr)
                s.spend("steps", time.perf_counter() - t_step)
                units = batch.size * world
                s.step += 1
                s.tokens += units
                s.count(value, units, self.step_logs)
                win_units_timed += units
                t_batch = self._t_last
                now = self._tick()
                self.batch_seconds = now - t_batch
                progress.update(batch.size, value, s.elapsed)
                if s.step % tc.log_interval == 0 or batch.last:
                    wl, logs = s.take_window()
                    tok_s = win_units_timed / max(1e-9, now - win_t0)
                    self.event("train", loss=wl, **self.task.train_scores(wl), **logs,
                               tok_s=tok_s, lr=lr, threads=torch.get_num_threads())
                    progress.postfix(wl, tok_s, s.elapsed)
                    win_t0, win_units_timed = now, 0
                by_time = tc.eval_every_minutes and (s.elapsed - s.last_eval
                                                     >= 60 * tc.eval_every_minutes)
                # by units: this batch crossed a multiple (no state, so a resume agrees); not
                # on an epoch's last batch, whose validation follows at once
                by_units = tc.eval_every_units and not batch.last and (
                    s.tokens // tc.eval_every_units > (s.tokens - units) // tc.eval_every_units)
                # not when the budget ends here: its final validation follows at once (every
                # rank decides alike, as below)
                if (by_time or by_units) and not D.any_rank(self.out_of_time(), self.dist):
                    ev = self._validate()
                    self.event("valid", **ev.scores, **self.tree_f1)
                    self.say(f"  {scores_line(ev, 'valid')} at {s.elapsed / 60:5.1f} min")
                    s.last_eval = s.elapsed
                    self._keep_trees(batch.last)
                if D.any_rank(self.stop.signal is not None, self.dist):
                    self.save()
                    return "interrupted"
                if D.any_rank(self.out_of_time(), self.dist):
                    return "budget"
                due = (tc.save_every_batches and s.step % tc.save_every_batches == 0) or (
                    tc.save_every_minutes and s.elapsed - t_save >= 60 * tc.save_every_minutes)
                if D.any_rank(bool(due), self.dist) and not batch.last:
                    self.save()
                    t_save = s.elapsed
        finally:
            progress.close()
        return None


def train(cfg: dict[str, Any], run: Any, quiet: bool = False,
          started: float | None = None) -> dict[str, Any] | None:
    """Train a new run into ``run``; ``started``: the command's start (``time.perf_counter``),
    from which ``train.max_minutes`` counts (default: now)."""
    trainer = Trainer(cfg, RunFiles(run), resume=False, quiet=quiet, started=started)
    try:
        return trainer.train()
    finally:
        trainer.close()


def resume(run: Any, cfg: dict[str, Any], quiet: bool = False,
           started: float | None = None) -> dict[str, Any] | None:
    """Continue ``run`` from its last checkpoint; None when it was finished already."""
    trainer = Trainer(cfg, RunFiles(run), resume=True, quiet=quiet, started=started)
    try:
        return trainer.train()
    finally:
        trainer.close()
