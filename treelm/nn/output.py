"""A language model's output layer, behind one interface: what every kind gives, so that nothing
outside :mod:`treelm.nn` asks which kind it has.

For last-layer features h (..., d) over a vocabulary of V words, every output layer has

    forward(h)           logits (..., V): any scores whose softmax is the layer's p(· | h)
                         (the model's ``logits``: generation, probes, analyses read them)
    log_probs(h)         log p(· | h) (..., V), float32 at least
    target_nll(h, y)     Σ_i −log p(y_i | h_i) for h (N, d), y (N,), float32 at least:
                         evaluation, a block of rows at a time
    loss(h, y, pieces)   the mean of the same, for training: no (N, V) tensor kept;
                         ``pieces``: the word matrix cut at ``widths()`` (``torch.split``),
                         given by a tied model (:meth:`treelm.nn.dropout.DroppedEmbedding.tied`:
                         the embedding's gradient written once), else the layer cuts its own
    widths()             the row counts the layer reads its word matrix in (its pieces)
    optimizer_groups()   [(parameters, scale)]: parameters whose learning rate is the run's
                         times ``scale`` (every other parameter: the run's rate), turned into
                         optimiser groups by :mod:`treelm.train.optim`
    loss_macs(N, f)      multiply-adds per token of ``loss``'s forward on N rows, by part
                         (f: the share of targets in each part taken only for its own targets)
    log_probs_macs(N)    the same for ``log_probs`` on N rows at once
    fixed()              a scope in which the weights stay as they are
                         (:func:`treelm.nn.fixed.fixed_weights`: an evaluation), where a layer
                         may keep what it makes from them
    weight               the word matrix (V, d): the embedding's Parameter when tied

Two kinds (:data:`treelm.nn.OUTPUT_LAYERS`, the ``kind`` of the config's ``model.output``): the full
softmax :class:`FullSoftmax` (here: ``softmax(W h + b)``, the default) and the adaptive softmax
:class:`~treelm.nn.adaptive_softmax.AdaptiveSoftmax` (an exact distribution whose rare words cost
less). Each kind computes each of these as it did before the interface: the full softmax's
training loss is :func:`~treelm.nn.linear_ce.linear_cross_entropy` of its weights, its
evaluation the cross-entropy of its logits; the adaptive softmax's are its own (:meth:`loss`).
The full softmax is an ``nn.Linear`` (its parameters ``weight``, ``bias``, made and initialised
as that class does), so checkpoints keep their names and a seed its draws.

The counts of multiply-adds are the products' alone, from the shapes: FLOPs are twice as many,
and forward + backward three times the forward (each product's two operand gradients);
``benchmarks/output_layer.py`` records them, and ``tests/test_output_layer.py`` holds them to
``torch.utils.flop_counter`` and to a count by hand.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from treelm.nn.fixed import KeepsWhileFixed
from treelm.nn.linear_ce import linear_cross_entropy

#: an output layer's declared optimiser groups: parameters and the scale of their learning rate
Groups = list[tuple[list[nn.Parameter], float]]


class OutputLayer(KeepsWhileFixed, nn.Module, abc.ABC):
    """The interface of the module docstring. ``OPTIONS``: the ``model.output`` keys the kind's
    constructor takes beside ``(vocab_size, dim, weight=)``."""

    OPTIONS: ClassVar[tuple[str, ...]] = ()
    weight: Tensor

    @abc.abstractmethod
    def forward(self, h: Tensor) -> Tensor:
        """Logits (..., V) whose softmax is p(· | h)."""

    @abc.abstractmethod
    def log_probs(self, h: Tensor) -> Tensor:
        """log p(· | h) (..., V), float32 at least."""

    @abc.abstractmethod
    def target_nll(self, h: Tensor, targets: Tensor) -> Tensor:
        """Σ −log p(target | h) over the rows of ``h`` (N, d), ``targets`` (N,)."""

    @abc.abstractmethod
    def loss(self, h: Tensor, targets: Tensor, pieces: Sequence[Tensor] | None = None
             ) -> Tensor:
        """Mean −log p(target | h) over the rows of ``h`` (N, d), without an (N, V) tensor;
        ``pieces``: ``torch.split(weight, widths())`` made by the caller."""

    @abc.abstractmethod
    def widths(self) -> list[int]:
        """The row counts :meth:`loss` reads ``weight`` in (its ``pieces``)."""

    def optimizer_groups(self) -> Groups:
        """The parameters whose rate is the run's times a scale, with it; none by default."""
        return []

    @abc.abstractmethod
    def loss_macs(self, rows: int, fractions: Sequence[float] = ()) -> dict[str, float]:
        """Multiply-adds per token of :meth:`loss`'s forward on ``rows`` rows, by part;
        ``fractions``: the share of the targets in each part that only its own targets take."""

    @abc.abstractmethod
    def log_probs_macs(self, rows: int) -> float:
        """Multiply-adds per token of :meth:`log_probs` on ``rows`` rows at once."""


class FullSoftmax(nn.Linear, OutputLayer):
    """p(· | h) = softmax(W h + b) over ``vocab_size`` words for features of size ``dim``; W tied
    to ``weight`` (the embedding's Parameter, (V, dim)) where given, else uniform in ±0.1, and b
    zero."""

    def __init__(self, vocab_size: int, dim: int, weight: nn.Parameter | None = None) -> None:
        super().__init__(dim, vocab_size)
        nn.init.zeros_(self.bias)
        if weight is not None:
            if tuple(weight.shape) != (vocab_size, dim):
                raise ValueError(f"the tied weight has shape {tuple(weight.shape)}, expected "
                                 f"({vocab_size}, {dim})")
            self.weight = weight
        else:
            nn.init.uniform_(self.weight, -0.1, 0.1)

    def forward(self, h: Tensor) -> Tensor:
        return F.linear(h, self.weight, self.bias)

    def _logits32(self, h: Tensor) -> Tensor:
        """The logits, float32 at least (under bf16 autocast the product is bfloat16)."""
        logits = self(h)
        return logits.to(torch.promote_types(logits.dtype, torch.float32))

    def log_probs(self, h: Tensor) -> Tensor:
        return torch.log_softmax(self._logits32(h), dim=-1)

    def target_nll(self, h: Tensor, targets: Tensor) -> Tensor:
        return F.cross_entropy(self._logits32(h), targets, reduction="sum")

    def loss(self, h: Tensor, targets: Tensor, pieces: Sequence[Tensor] | None = None
             ) -> Tensor:
        # fused product and cross-entropy (treelm.nn.linear_ce): no (N, V) logits kept
        weight = self.weight if pieces is None else pieces[0]
        return linear_cross_entropy(h, weight, self.bias, targets)

    def widths(self) -> list[int]:
        """One piece: the whole matrix."""
        return [self.out_features]

    def loss_macs(self, rows: int, fractions: Sequence[float] = ()) -> dict[str, float]:
        """The (V, d) product, whatever the rows: ``{"softmax": V d}``."""
        return {"softmax": self.log_probs_macs(rows)}

    def log_probs_macs(self, rows: int) -> float:
        return float(self.out_features * self.in_features)


def optimizer_groups(model: nn.Module) -> Groups:
    """The groups every output layer in ``model`` declares (:meth:`OutputLayer.optimizer_groups`),
    in module order: the parameters the trainer's optimiser steps at a rate of their own."""
    groups: Groups = []
    for m in model.modules():
        if isinstance(m, OutputLayer):
            groups.extend(m.optimizer_groups())
    return groups
