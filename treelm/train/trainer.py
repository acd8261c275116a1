"""The one training loop of treelm.

``train(cfg, run_dir)`` builds the corpus and model from a config, then runs epochs of truncated
BPTT with gradient clipping, optional NT-ASGD, learning-rate schedules, a wall-time budget,
periodic validation, progress display and crash-safe checkpoints; ``resume(run_dir)`` continues a
killed run from its last checkpoint so that the loss curve is the one an uninterrupted run gives
(the checkpoint holds the position in the epoch, the carried hidden states, the optimiser and every
RNG state).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from treelm.config import dump_config
from treelm.data.batching import BPTTSchedule, batchify
from treelm.data.corpus import Corpus, load_corpus
from treelm.data.vocab import Vocab
from treelm.errors import ConfigError
from treelm.models import build_model
from treelm.train import distributed as D
from treelm.train.checkpoint import (
    atomic_write_text,
    load_trainer_state,
    load_weights,
    model_signature,
    save_checkpoint,
)
from treelm.train.lm_task import detach_states, evaluate_lm, iterate, lm_loss, metric
from treelm.train.optim import Averager, make_optimizer

SCHEDULES = ("constant", "plateau", "linear_time")


@dataclass
class TrainConfig:
    """The ``train:`` section; every field has the default shown in ``configs/``."""

    optimizer: str = "adam"          # sgd | ntasgd | adam
    lr: float = 2e-3
    weight_decay: float = 0.0
    clip: float = 0.25               # max global gradient norm; 0 = off
    alpha: float = 0.0               # activation regularisation (AR)
    beta: float = 0.0                # temporal activation regularisation (TAR)
    bptt: int = 70
    variable_bptt: bool = True
    batch_size: int = 20
    eval_batch_size: int = 10
    test_batch_size: int = 1
    epochs: int = 1
    nonmono: int = 5                 # NT-ASGD patience, in evaluations
    lr_schedule: str = "constant"    # constant | plateau | linear_time
    lr_decay: float = 0.5            # plateau: multiply lr by this after `patience` bad evals
    patience: int = 1
    min_lr_frac: float = 0.0         # linear_time: final lr as a fraction of lr
    max_minutes: float | None = None     # wall-time budget (training + evaluation)
    eval_every_minutes: float | None = None  # extra validations inside an epoch (a curve)
    save_every_minutes: float = 5.0
    save_every_batches: int | None = None
    log_interval: int = 200          # batches between log lines when not on a terminal
    threads: int | None = None       # torch.set_num_threads; None = leave as is
    flush_denormal: bool = True      # CPU: tiny gradients as denormals slow training down 2×
    device: str = "auto"             # auto | cpu | cuda

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> TrainConfig:
        d = dict(d or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ConfigError(f"unknown train options {unknown}; known: {sorted(names)}")
        tc = cls(**d)
        if tc.lr_schedule not in SCHEDULES:
            raise ConfigError(f"unknown lr_schedule {tc.lr_schedule!r}; choose one of {SCHEDULES}")
        if tc.lr_schedule == "linear_time" and not tc.max_minutes:
            raise ConfigError("lr_schedule linear_time needs train.max_minutes")
        return tc


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


class Trainer:
    def __init__(self, cfg: dict[str, Any], run: Path, resume: bool = False,
                 quiet: bool = False) -> None:
        self.cfg = cfg
        self.run = run
        self.tc = TrainConfig.from_dict(cfg.get("train"))
        if self.tc.threads:
            torch.set_num_threads(self.tc.threads)
        torch.set_flush_denormal(self.tc.flush_denormal)
        self.device = pick_device(self.tc.device)
        self.dist = D.setup(self.device)
        if self.device.type == "cuda" and self.dist.enabled:
            self.device = torch.device("cuda", self.dist.local_rank)
        self.quiet = quiet or not self.dist.main
        seed = int(cfg.get("seed", 0))
        torch.manual_seed(seed)
        vocab = Vocab.load(run / "vocab.json") if resume else None
        self.corpus: Corpus = load_corpus(cfg.get("data", {}), vocab)
        self.level = self.corpus.vocab.level
        self.model = build_model(cfg.get("model", {}), len(self.corpus.vocab)).to(self.device)
        self.signature = model_signature(cfg)
        self.net: nn.Module = self.model
        if self.dist.enabled:
            self.net = nn.parallel.DistributedDataParallel(self.model)
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = make_optimizer(self.tc.optimizer, params, self.tc.lr,
                                        self.tc.weight_decay)
        self.averager = Averager(params, self.tc.nonmono)
        self.schedule = BPTTSchedule(self.tc.bptt, self.tc.variable_bptt, seed)
        train = D.shard(self.corpus.train, self.dist)
        self.train_data = batchify(train, self.tc.batch_size).to(self.device)
        # loop state (everything a resume restores)
        self.epoch, self.row, self.step = 1, 0, 0
        self.states: list | None = None
        self.val_history: list[float] = []
        self.best_val = math.inf
        self.base_lr = self.tc.lr
        self.bad_evals = 0
        self.elapsed = 0.0
        self.tokens_seen = 0
        self.epoch_loss, self.epoch_tokens = 0.0, 0
        self.win_loss, self.win_tok = 0.0, 0     # since the last progress line
        self.last_eval = 0.0                     # elapsed time of the last validation
        self.metrics_bytes = 0
        if resume:
            self._restore()
        elif self.dist.main:
            run.mkdir(parents=True, exist_ok=True)
            atomic_write_text(run / "config.yaml", dump_config(cfg))
            atomic_write_text(run / "vocab.json", self.corpus.vocab.to_json())
            (run / "metrics.jsonl").write_text("")

    # ---------------------------------------------------------------- state
    def _state(self) -> dict[str, Any]:
        states = D.gather_objects(detach_states(self.states), self.dist)
        return {
            "epoch": self.epoch, "row": self.row, "step": self.step,
            "states": states, "optimizer": self.optimizer.state_dict(),
            "averager": self.averager.state_dict(), "val_history": self.val_history,
            "best_val": self.best_val, "base_lr": self.base_lr, "bad_evals": self.bad_evals,
            "elapsed": self.elapsed, "tokens_seen": self.tokens_seen,
            "epoch_loss": self.epoch_loss, "epoch_tokens": self.epoch_tokens,
            "win_loss": self.win_loss, "win_tok": self.win_tok, "last_eval": self.last_eval,
            "metrics_bytes": self.metrics_bytes,
            "torch_rng": torch.get_rng_state(), "bptt_rng": self.schedule.rng.getstate(),
            "world": self.dist.world,
        }

    def _restore(self) -> None:
        load_weights(self.run, self.model, "last", self.signature)
        s = load_trainer_state(self.run)
        self.epoch, self.row, self.step = s["epoch"], s["row"], s["step"]
        states = s["states"]
        if len(states) == self.dist.world and states[self.dist.rank] is not None:
            self.states = [tuple(t.to(self.device) for t in st) for st in states[self.dist.rank]]
        self.optimizer.load_state_dict(s["optimizer"])
        self.averager.load_state_dict(s["averager"])
        self.val_history, self.best_val = s["val_history"], s["best_val"]
        self.base_lr, self.bad_evals = s["base_lr"], s["bad_evals"]
        self.elapsed, self.tokens_seen = s["elapsed"], s["tokens_seen"]
        self.epoch_loss, self.epoch_tokens = s["epoch_loss"], s["epoch_tokens"]
        self.win_loss, self.win_tok = s["win_loss"], s["win_tok"]
        self.last_eval = s.get("last_eval", self.elapsed)
        torch.set_rng_state(s["torch_rng"])
        self.schedule.rng.setstate(s["bptt_rng"])
        self.metrics_bytes = s["metrics_bytes"]
        if self.dist.main:  # forget what was logged after the checkpoint
            with open(self.run / "metrics.jsonl", "r+b") as f:
                f.truncate(self.metrics_bytes)

    def save(self, best: bool = False) -> None:
        state = self._state()  # collective: every rank takes part
        if self.dist.main:
            save_checkpoint(self.run, self.model, state, self.signature, best,
                            self.averager if self.averager.active else None)
        D.barrier(self.dist)

    # ---------------------------------------------------------------- logging
    def log(self, event: str, **fields: Any) -> None:
        if not self.dist.main:
            return
        rec = {"event": event, "epoch": self.epoch, "step": self.step,
               "elapsed": round(self.elapsed, 2), "tokens": self.tokens_seen, **fields}
        line = (json.dumps(rec) + "\n").encode()
        with open(self.run / "metrics.jsonl", "ab") as f:
            f.write(line)
        self.metrics_bytes += len(line)

    def say(self, msg: str) -> None:
        if not self.quiet:
            print(msg, file=sys.stderr, flush=True)

    # ---------------------------------------------------------------- loop
    def lr_now(self) -> float:
        if self.tc.lr_schedule == "linear_time":
            frac = min(1.0, self.elapsed / (60.0 * self.tc.max_minutes))
            return self.base_lr * (1.0 - (1.0 - self.tc.min_lr_frac) * frac)
        return self.base_lr

    def validate(self) -> float:
        self.averager.swap()
        loss = evaluate_lm(self.model, self.corpus.valid, self.tc.eval_batch_size, self.tc.bptt)
        self.averager.swap()
        return loss

    def out_of_time(self) -> bool:
        return bool(self.tc.max_minutes) and self.elapsed >= 60.0 * self.tc.max_minutes

    def train(self) -> dict[str, Any]:
        tc = self.tc
        self.say(f"treelm: {self.signature.get('cell', '')} {self.signature.get('type')} with "
                 f"{count_parameters(self.model):,} parameters, {len(self.corpus.vocab):,} "
                 f"{self.level} types, {self.corpus.train.numel():,} training tokens"
                 + (f", {self.dist.world} processes" if self.dist.enabled else ""))
        self.net.train()
        stop = False
        while self.epoch <= tc.epochs and not stop:
            stop = self._epoch()
            if stop:
                break
            vloss = self.validate()
            self.last_eval = self.elapsed
            self.val_history.append(vloss)
            name, value = metric(vloss, self.level)
            improved = vloss < self.best_val
            if improved:
                self.best_val = vloss
                self.bad_evals = 0
            else:
                self.bad_evals += 1
            if tc.lr_schedule == "plateau" and self.bad_evals >= tc.patience:
                self.base_lr *= tc.lr_decay
                self.bad_evals = 0
            if tc.optimizer == "ntasgd" and self.averager.maybe_trigger(self.val_history):
                self.say("treelm: switching to averaged SGD (NT-ASGD)")
                self.log("asgd_start")
            tr_loss = self.epoch_loss / max(1, self.epoch_tokens)
            tname, tvalue = metric(tr_loss, self.level)
            self.log("valid", loss=vloss, **{name: value}, train_loss=tr_loss, lr=self.lr_now(),
                     epoch_end=True)
            self.say(f"| epoch {self.epoch:3d} | {self.elapsed / 60:6.1f} min | train {tname} "
                     f"{tvalue:8.2f} | valid loss {vloss:.4f} | valid {name} {value:8.2f}"
                     + (" | best" if improved else ""))
            self.epoch += 1
            self.row = 0
            self.states = None
            self.epoch_loss, self.epoch_tokens = 0.0, 0
            self.save(best=improved)
        if stop:  # budget ran out inside an epoch: one last validation of where we are
            vloss = self.validate()
            improved = vloss < self.best_val
            self.best_val = min(self.best_val, vloss)
            name, value = metric(vloss, self.level)
            self.log("valid", loss=vloss, **{name: value}, budget_end=True)
            self.say(f"| budget of {tc.max_minutes} min reached | valid {name} {value:8.2f}")
            self.save(best=improved)
        name, value = metric(self.best_val, self.level)
        summary = {"best_valid_loss": self.best_val, f"best_valid_{name}": value,
                   "elapsed": self.elapsed, "tokens": self.tokens_seen, "epochs": self.epoch - 1}
        if self.dist.enabled:
            # every rank's weights, hashed: DDP must have kept them identical
            h = hashlib.sha256()
            for p in self.model.parameters():
                h.update(p.detach().cpu().numpy().tobytes())
            summary["rank_digests"] = D.gather_objects(h.hexdigest(), self.dist)
        self.log("done", **summary)
        D.teardown(self.dist)
        return summary

    def _epoch(self) -> bool:
        """One (rest of an) epoch; returns True when the time budget ran out."""
        tc = self.tc
        n_rows = self.train_data.size(0)
        bar = None
        if not self.quiet:
            from tqdm import tqdm

            bar = tqdm(total=n_rows, initial=self.row, unit="tok", unit_scale=tc.batch_size
                       * self.dist.world, desc=f"epoch {self.epoch}", leave=False,
                       dynamic_ncols=True, disable=None, file=sys.stderr)
        t_last = time.perf_counter()
        t_save = self.elapsed
        win_t0, win_tok_timed = time.perf_counter(), 0
        for batch in iterate(self.train_data, self.schedule, self.row):
            lr = self.lr_now() * batch.lr_scale
            for g in self.optimizer.param_groups:
                g["lr"] = lr
            self.optimizer.zero_grad(set_to_none=True)
            loss, ce, states = lm_loss(self.net, batch, self.states, tc.alpha, tc.beta)
            loss.backward()
            if tc.clip:
                nn.utils.clip_grad_norm_(self.model.parameters(), tc.clip)
            self.optimizer.step()
            self.averager.update()
            self.states = detach_states(states)
            ntok = batch.targets.numel() * self.dist.world
            self.step += 1
            self.row = batch.row + batch.inputs.size(0)
            self.tokens_seen += ntok
            self.epoch_loss += ce.item() * ntok
            self.epoch_tokens += ntok
            self.win_loss += ce.item() * ntok
            self.win_tok += ntok
            win_tok_timed += ntok
            now = time.perf_counter()
            self.elapsed += now - t_last
            t_last = now
            if bar is not None:
                bar.update(batch.inputs.size(0))
            if self.step % tc.log_interval == 0 or self.row >= n_rows - 2:
                wl = self.win_loss / self.win_tok
                name, value = metric(wl, self.level)
                tok_s = win_tok_timed / max(1e-9, now - win_t0)
                self.log("train", loss=wl, **{name: value}, tok_s=tok_s, lr=lr)
                if bar is not None and not bar.disable:
                    bar.set_postfix_str(f"loss {wl:.3f} {name} {value:.2f} {tok_s:,.0f} tok/s",
                                        refresh=False)
                else:  # no terminal (logs, CI): a plain line instead of the bar
                    self.say(f"  epoch {self.epoch} {100 * self.row / n_rows:5.1f}% | "
                             f"loss {wl:.3f} | {name} {value:8.2f} | {tok_s:7,.0f} tok/s "
                             f"| {self.elapsed / 60:5.1f} min")
                self.win_loss, self.win_tok = 0.0, 0
                win_t0, win_tok_timed = now, 0
            if tc.eval_every_minutes and (self.elapsed - self.last_eval
                                          >= 60 * tc.eval_every_minutes):
                vloss = self.validate()
                name, value = metric(vloss, self.level)
                self.log("valid", loss=vloss, **{name: value})
                self.say(f"  valid {name} {value:8.2f} at {self.elapsed / 60:5.1f} min")
                self.last_eval = self.elapsed
                self.elapsed += time.perf_counter() - t_last
                t_last = time.perf_counter()
            if D.any_rank(self.out_of_time(), self.dist):
                if bar is not None:
                    bar.close()
                return True
            due = (tc.save_every_batches and self.step % tc.save_every_batches == 0) or (
                tc.save_every_minutes and self.elapsed - t_save >= 60 * tc.save_every_minutes)
            if D.any_rank(bool(due), self.dist) and self.row < n_rows - 2:
                self.save()
                t_save = self.elapsed
                self.elapsed += time.perf_counter() - t_last
                t_last = time.perf_counter()
        if bar is not None:
            bar.close()
        return False


def train(cfg: dict[str, Any], run: Path, quiet: bool = False) -> dict[str, Any]:
    return Trainer(cfg, run, resume=False, quiet=quiet).train()


def resume(run: Path, cfg: dict[str, Any], quiet: bool = False) -> dict[str, Any]:
    return Trainer(cfg, run, resume=True, quiet=quiet).train()

