"""Optimisers: SGD (with optional momentum, classical or Nesterov's), Adam, and SGD with the
non-monotonically triggered switch to averaged SGD (NT-ASGD, Merity et al. 2018, Alg. 1).

SGD with momentum μ keeps a velocity ``v ← μ v + g`` and steps ``x ← x − η v`` (classical) or
``x ← x − η (g + μ v)`` (Nesterov, in the form of Sutskever et al. 2013 that ``torch.optim.SGD``
implements); ConvS2S trains with Nesterov momentum 0.99 (Gehring et al. 2017).

NT-ASGD runs plain SGD until the validation loss fails to improve on the best of all but the last
``nonmono`` evaluations; from then on it keeps the running average of the iterates
``x̄ = (1/(k−T+1)) Σ_{i=T..k} x_i`` (ASGD with λ = 0, t0 = 0), which is used for evaluation and saved
as the model. ``swap()`` exchanges the live weights with the averages and back.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

OPTIMIZERS = ("sgd", "ntasgd", "adam")
#: a Parameter's attribute that scales its learning rate: a module sets ``p.lr_scale = s`` for a
#: parameter whose step at the run's rate would be too long (the adaptive softmax's cluster
#: logits: :mod:`treelm.nn.adaptive_softmax`); ``train.lr`` and its schedule stay one number
LR_SCALE = "lr_scale"


def param_groups(params: list[nn.Parameter]) -> list[dict[str, Any]]:
    """``params`` grouped by their ``lr_scale`` (1 where unset), in first-seen order: one group,
    as before, for a model that scales nothing, so its optimiser state keeps its shape."""
    groups: dict[float, list[nn.Parameter]] = {}
    for p in params:
        groups.setdefault(float(getattr(p, LR_SCALE, 1.0)), []).append(p)
    return [{"params": ps, LR_SCALE: scale} for scale, ps in groups.items()]


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Every group's rate: ``lr`` times the group's scale."""
    for g in optimizer.param_groups:
        g["lr"] = lr * g.get(LR_SCALE, 1.0)


def _scaled(optimizer: torch.optim.Optimizer, lr: float) -> torch.optim.Optimizer:
    set_lr(optimizer, lr)
    return optimizer


def make_optimizer(name: str, params: list[nn.Parameter], lr: float, weight_decay: float,
                   momentum: float = 0.0, nesterov: bool = False) -> torch.optim.Optimizer:
    """``momentum`` / ``nesterov`` apply to ``sgd`` only (NT-ASGD averages plain SGD iterates).
    Parameters with an ``lr_scale`` get their own group (:func:`param_groups`); the rate given
    here and by :func:`set_lr` is the unscaled one."""
    if (momentum or nesterov) and name != "sgd":
        raise ValueError(f"momentum and nesterov are options of sgd, not of {name}")
    if nesterov and momentum <= 0:
        raise ValueError("nesterov needs momentum > 0")
    groups = param_groups(params)
    if name == "sgd":
        return _scaled(torch.optim.SGD(groups, lr=lr, weight_decay=weight_decay,
                                       momentum=momentum, nesterov=nesterov), lr)
    if name == "ntasgd":
        return _scaled(torch.optim.SGD(groups, lr=lr, weight_decay=weight_decay), lr)
    if name == "adam":
        # fused: one kernel over every tensor instead of a dozen passes (28 → 4.5 ms a step for
        # the PTB CPU config's 6.4M parameters); same update, summed in another order
        fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params)
        return _scaled(torch.optim.Adam(groups, lr=lr, weight_decay=weight_decay,
                                        fused=fused or None), lr)
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
