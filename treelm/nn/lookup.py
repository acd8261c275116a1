"""An embedding lookup whose gradient reuses one buffer: ``rows = E[w]`` with

    ∂ℓ/∂E = Σ_i e_{w_i} ⊗ ∂ℓ/∂rows_i          (V, d), zero outside the rows looked up

as ``F.embedding`` computes it, the same sums in the same order (per row, in the order the
tokens come), so the same bits; but written into a (V, d) buffer kept from one backward to the
next, of which only the rows the last batch touched are cleared, instead of a fresh zeroed
tensor per backward.

Why: a fresh (V, d) tensor is a memory allocation the size of the embedding per step, which the
operating system hands over as new pages and zeroes page by page. With PTB's tied 10,000 × 400
embedding, that fill took 3.1 ms of a 108 ms bfloat16 tree step on an AMD Zen 5
(``benchmarks/results/step_profile-zen5-pair-6a5e294-20261129.json``) for the 1,400 rows a batch
touches. Autograd adds the buffer into the other uses' gradient (the
tied output layer's) or copies it into ``.grad`` (it never takes a tensor someone else still
holds), so the buffer is only read after the backward that filled it. One embedding looked up
twice in one loss (a tree teacher's features beside the language model's loss) would write the
buffer twice while autograd may still hold the first gradient: a lookup whose backward runs
while another of the same object's is still to come gets a fresh tensor instead (the lookups
not yet differentiated are tracked weakly, so a graph dropped without a backward is forgotten).

Tied (:meth:`RowLookup.tied_rows`, :meth:`RowLookup.tied_pieces`): where the output layer's
word matrix is E itself, E has two uses in one backward, the rows looked up and the output
layer's pieces of E (the adaptive softmax's head and tails). Autograd writes each use's gradient
into a (V, d) tensor of its own and then adds the two into a third, a pass over 48 MB for PTB's
E. Here the two uses meet (:class:`TiedGradient`, one per forward): the pieces' backward, which
runs as soon as the output layer's has (while its gradients are still in cache), writes their
gradient into one (V, d) tensor and hands it over instead of to autograd; the rows' backward,
last of the step, adds each looked-up row's sum (this buffer's, as above) to that row alone
and returns the tensor, E's only gradient, which autograd then takes as ``.grad`` without a
copy. Each element is the same sum of the same two terms, so the same bits. Were the rows'
backward to run first, each use returns its own gradient and autograd adds them, as without.

CPU tensors only: on another device ``F.embedding``'s own backward runs.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable


class RowLookup:
    """``rows(weight, tokens)`` = ``F.embedding(tokens, weight)``, its gradient in a buffer kept
    by this object (one per embedding: :class:`treelm.nn.dropout.DroppedEmbedding` holds one)."""

    def __init__(self) -> None:
        self.buffer: Tensor | None = None
        self.touched: Tensor | None = None      # the rows the last backward wrote
        # the lookups made whose backward has not run (their graphs alive)
        self.pending: weakref.WeakSet[Any] = weakref.WeakSet()

    def __call__(self, weight: Tensor, tokens: Tensor) -> Tensor:
        if weight.device.type != "cpu" or not (torch.is_grad_enabled() and weight.requires_grad):
            return F.embedding(tokens, weight)
        return _Rows.apply(weight, tokens, self)

    def tied_rows(self, weight: Tensor, tokens: Tensor) -> tuple[Tensor, TiedGradient | None]:
        """``E[tokens]`` and where its gradient meets the tied output layer's (pass it to
        :meth:`tied_pieces`; ``None`` where this lookup's own backward does not run)."""
        if weight.device.type != "cpu" or not (torch.is_grad_enabled() and weight.requires_grad):
            return self(weight, tokens), None
        meet = TiedGradient()
        return _TiedRows.apply(weight, tokens, self, meet), meet

    @staticmethod
    def tied_pieces(weight: Tensor, widths: Sequence[int], meet: TiedGradient | None
                    ) -> tuple[Tensor, ...]:
        """``torch.split(E, widths)`` for the output layer, made after the recurrent layers so
        that its backward runs right after the output layer's; its gradient goes to ``meet``."""
        if meet is None:
            return torch.split(weight, list(widths))
        return _TiedPieces.apply(weight, meet, tuple(widths))

    def gradient(self, shape: torch.Size, tokens: Tensor, grad: Tensor, ctx: Any) -> Tensor:
        """``∂ℓ/∂E`` (``shape``) of the lookup ``ctx`` in the buffer: the last backward's rows
        cleared, this one's summed in. Where another lookup of this object is still to run its
        backward (two uses of one embedding in one loss), a fresh tensor instead: autograd may
        hold this gradient until then, and that backward would write over the buffer."""
        self.pending.discard(ctx)
        index = tokens.reshape(-1)
        rows = grad.reshape(index.numel(), -1)
        if self.pending:
            return torch.zeros(shape, dtype=grad.dtype).index_add_(0, index, rows)
        buf = self.buffer
        if buf is None or buf.shape != shape or buf.dtype != grad.dtype:
            buf = self.buffer = torch.zeros(shape, dtype=grad.dtype)
        elif self.touched is not None:
            buf.index_fill_(0, self.touched, 0.0)
        self.touched = index
        return buf.index_add_(0, index, rows)


class _Rows(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, weight: Tensor, tokens: Tensor, lookup: RowLookup) -> Tensor:
        ctx.save_for_backward(tokens)
        ctx.shape, ctx.lookup = weight.shape, lookup
        lookup.pending.add(ctx)
        return F.embedding(tokens, weight)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (tokens,) = ctx.saved_tensors
        return ctx.lookup.gradient(ctx.shape, tokens, grad.contiguous(), ctx), None, None


class TiedGradient:
    """Where a tied weight's two uses meet in one backward: the pieces' gradient, handed from
    their backward to the rows'."""

    def __init__(self) -> None:
        self.pieces: Tensor | None = None     # ∂ℓ/∂E of the output layer's pieces, (V, d)
        self.rows_first = False               # the rows' backward ran before the pieces'


class _TiedPieces(torch.autograd.Function):
    """``E -> E split at widths``; the gradient, one (V, d) tensor, goes to the rows' backward."""

    @staticmethod
    def forward(ctx: Any, weight: Tensor, meet: TiedGradient, widths: tuple[int, ...]
                ) -> tuple[Tensor, ...]:
        ctx.meet = meet
        return torch.split(weight, list(widths))

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, *pieces: Tensor) -> tuple[Tensor | None, None, None]:
        grad = torch.cat(pieces)        # the split's own backward (an unread piece: zeros)
        meet = ctx.meet
        if meet.rows_first:             # too late to meet: autograd adds the two
            meet.rows_first = False
            return grad, None, None
        meet.pieces = grad
        return None, None, None


class _TiedRows(torch.autograd.Function):
    """``E[tokens]``, its backward adding the rows' sums into the pieces' gradient."""

    @staticmethod
    def forward(ctx: Any, weight: Tensor, tokens: Tensor, lookup: RowLookup,
                meet: TiedGradient) -> Tensor:
        ctx.save_for_backward(tokens)
        ctx.shape, ctx.lookup, ctx.meet = weight.shape, lookup, meet
        lookup.pending.add(ctx)
        return F.embedding(tokens, weight)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None]:
        (tokens,) = ctx.saved_tensors
        sums = ctx.lookup.gradient(ctx.shape, tokens, grad.contiguous(), ctx)
        meet = ctx.meet
        out, meet.pieces = meet.pieces, None
        if out is None:                 # no pieces' gradient (yet): this use's own, as untied
            meet.rows_first = True
            return sums, None, None, None
        rows = torch.unique(tokens)     # each touched row once: the same two terms per element
        return out.index_add_(0, rows, sums.index_select(0, rows)), None, None, None
