"""Optimisers: SGD (with optional momentum, classical or Nesterov's), Adam, and SGD with the
non-monotonically triggered switch to averaged SGD (NT-ASGD, Merity et al. 2018, Alg. 1).

SGD with momentum μ keeps a velocity ``v ← μ v + g`` and steps ``x ← x − η v`` (classical) or
``x ← x − η (g + μ v)`` (Nesterov, in the form of Sutskever et al. 2013 that ``torch.optim.SGD``
implements); ConvS2S trains with Nesterov momentum 0.99 (Gehring et al. 2017).

NT-ASGD runs plain SGD until the validation loss fails to improve on the best of all but the last
``nonmono`` evaluations; from then on it keeps the running average of the iterates
``x̄ = (1/(k−T+1)) Σ_{i=T..k} x_i`` (ASGD with λ = 0, t0 = 0), which is used for evaluation and saved
as the model. ``swap()`` exchanges the live weights with the averages and back.

Rates of their own. A layer may declare parameters whose step at the run's rate would be too
long (the adaptive softmax's cluster logits: :meth:`treelm.nn.output.OutputLayer.optimizer_groups`,
gathered by :func:`treelm.models.optimizer_groups`) as ``[(parameters, scale)]``; they go into
optimiser groups of their own whose rate is the run's × scale (:func:`param_groups`,
:func:`set_lr`), so ``train.lr`` and its schedule stay one number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

OPTIMIZERS = ("sgd", "ntasgd", "adam")
#: an optimiser group's key: the group's rate is the run's times this
RATE_SCALE = "rate_scale"
#: the same key as checkpoints written before it was renamed hold it
OLD_RATE_SCALE = "lr_scale"

#: declared rates: ``[(parameters, scale)]`` (:func:`treelm.models.optimizer_groups`)
Scaled = Sequence[tuple[Sequence[nn.Parameter], float]]


def param_groups(params: list[nn.Parameter], scaled: Scaled = ()) -> list[dict[str, Any]]:
    """``params`` grouped by their scale (from ``scaled``, 1 for the others), in first-seen
    order: one group for a model that scales nothing (or scales by 1), so its optimiser state
    keeps its shape, and the scale-1 group first wherever the model's first parameter is in it."""
    scale = {id(p): float(s) for ps, s in scaled for p in ps}
    groups: dict[float, list[nn.Parameter]] = {}
    for p in params:
        groups.setdefault(scale.get(id(p), 1.0), []).append(p)
    return [{"params": ps, RATE_SCALE: s} for s, ps in groups.items()]


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Every group's rate: ``lr`` times the group's scale."""
    for g in optimizer.param_groups:
        g["lr"] = lr * g[RATE_SCALE]


def _declared_scales(optimizer: torch.optim.Optimizer,
                     state: dict[str, Any]) -> dict[str, Any] | None:
    """A saved optimiser state whose groups take this optimiser's scales (the model's, as its
    config declares them): a state saved before the key was :data:`RATE_SCALE` (or before groups
    had a scale) loads to the same rates. A state of another number of groups is left to
    ``load_state_dict`` to refuse."""
    saved = state["param_groups"]
    if len(saved) != len(optimizer.param_groups):
        return None
    # the scales, and whether the step is fused, are this optimiser's (a state saved unfused
    # resumes fused, to the same bits)
    groups = [{**{k: v for k, v in g.items() if k != OLD_RATE_SCALE}, RATE_SCALE: ours[RATE_SCALE],
               **{k: ours[k] for k in ("fused", "foreach") if k in ours}}
              for g, ours in zip(saved, optimizer.param_groups)]
    return {**state, "param_groups": groups}


def _scaled(optimizer: torch.optim.Optimizer, lr: float) -> torch.optim.Optimizer:
    set_lr(optimizer, lr)
    optimizer.register_load_state_dict_pre_hook(_declared_scales)
    return optimizer


def make_optimizer(name: str, params: list[nn.Parameter], lr: float, weight_decay: float,
                   momentum: float = 0.0, nesterov: bool = False,
                   scaled: Scaled = ()) -> torch.optim.Optimizer:
    """``momentum`` / ``nesterov`` apply to ``sgd`` only (NT-ASGD averages plain SGD iterates).
    The parameters of ``scaled`` (``[(parameters, scale)]``, as a model's layers declare them)
    get groups of their own (:func:`param_groups`); the rate given here and by :func:`set_lr` is
    the unscaled one."""
    if (momentum or nesterov) and name != "sgd":
        raise ValueError(f"momentum and nesterov are options of sgd, not of {name}")
    if nesterov and momentum <= 0:
        raise ValueError("nesterov needs momentum > 0")
    groups = param_groups(params, scaled)
    fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params) or None
    if name in ("sgd", "ntasgd"):
        # fused: g + λx and the step in one pass per tensor, where torch's loop wrote g + λx
        # into a new tensor of each parameter's size (the tree config's optimiser phase: 2.3
        # → 1.5 ms a step, step_profile-zen5-pair-*); the same update to the last bit
        # (tests/test_train.py)
        return _scaled(torch.optim.SGD(groups, lr=lr, weight_decay=weight_decay,
                                       momentum=momentum, nesterov=nesterov, fused=fused), lr)
    if name == "adam":
        # fused: one kernel over every tensor instead of a dozen passes (28 → 4.5 ms a step for
        # the PTB CPU config's 6.4M parameters); same update, summed in another order
        return _scaled(torch.optim.Adam(groups, lr=lr, weight_decay=weight_decay,
                                        fused=fused), lr)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")


class Averager:
    """Running average of parameters once triggered (the 'A' in NT-ASGD)."""

    def __init__(self, params: list[nn.Parameter], nonmono: int) -> None:
        self.params = params
        self.nonmono = nonmono
        self.avg: list[torch.Tensor] | None = None
        self.count = 0

    @property
    def active(self) -> bool:
        return self.avg is not None

    def maybe_trigger(self, val_history: list[float]) -> bool:
        """Alg. 1: switch when the newest loss is worse than the best before the last
        ``nonmono``."""
        if self.active or len(val_history) <= self.nonmono:
            return False
        if val_history[-1] > min(val_history[: -self.nonmono]):
            self.avg = [p.detach().clone() for p in self.params]
            self.count = 1
            return True
        return False

    @torch.no_grad()
    def update(self) -> None:
        if self.avg is None:
            return
        self.count += 1
        for a, p in zip(self.avg, self.params):
            a.add_(p - a, alpha=1.0 / self.count)

    @torch.no_grad()
    def swap(self) -> None:
        if self.avg is None:
            return
        for a, p in zip(self.avg, self.params):
            tmp = p.detach().clone()
            p.copy_(a)
            a.copy_(tmp)

    def state_dict(self) -> dict[str, Any]:
        return {"avg": self.avg, "count": self.count}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.avg = d["avg"]
        self.count = d["count"]
