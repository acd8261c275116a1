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
holds), so the buffer is only read after the backward that filled it.

Tied (:func:`tied_rows`): where the output layer's word matrix is E itself, E has two uses in
one backward, the rows looked up and the output layer's pieces of E (the adaptive softmax's
head and tails), and autograd would write each use's gradient into its own (V, d) tensor and
add the two, a fresh (V, d) sum: three passes over 16 MB for PTB's E. One Function gives both
uses, so its backward holds every gradient at once and writes ∂ℓ/∂E once: the pieces' gradients
copied into one tensor, then the looked-up rows' sums (this buffer's, as above) added to those
rows alone. Each element is the same sum of the same two terms, so the same bits. On a bfloat16
tree step on an AMD Zen 5 the sum alone took 1.2 ms of 90
(``benchmarks/results/step_ab-zen5-bf16-tied-20261129.json`` has the step before and after).

CPU tensors only: on another device ``F.embedding``'s own backward runs.
"""

from __future__ import annotations

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

    def __call__(self, weight: Tensor, tokens: Tensor) -> Tensor:
        if weight.device.type != "cpu" or not (torch.is_grad_enabled() and weight.requires_grad):
            return F.embedding(tokens, weight)
        return _Rows.apply(weight, tokens, self)

    def tied(self, weight: Tensor, tokens: Tensor, widths: Sequence[int]
             ) -> tuple[Tensor, tuple[Tensor, ...]]:
        """``(E[tokens], torch.split(E, widths))``: the rows and E's pieces as a tied output layer
        reads them, ∂ℓ/∂E from both written once (module docstring)."""
        if weight.device.type != "cpu" or not (torch.is_grad_enabled() and weight.requires_grad):
            return self(weight, tokens), torch.split(weight, list(widths))
        rows, *pieces = _TiedRows.apply(weight, tokens, self, tuple(widths))
        return rows, tuple(pieces)

    def gradient(self, shape: torch.Size, tokens: Tensor, grad: Tensor) -> Tensor:
        """``∂ℓ/∂E`` (``shape``) in the buffer: the last backward's rows cleared, this one's
        summed in."""
        buf = self.buffer
        if buf is None or buf.shape != shape or buf.dtype != grad.dtype:
            buf = self.buffer = torch.zeros(shape, dtype=grad.dtype)
        elif self.touched is not None:
            buf.index_fill_(0, self.touched, 0.0)
        index = tokens.reshape(-1)
        buf.index_add_(0, index, grad.reshape(index.numel(), -1))
        self.touched = index
        return buf


class _Rows(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, weight: Tensor, tokens: Tensor, lookup: RowLookup) -> Tensor:
        ctx.save_for_backward(tokens)
        ctx.shape, ctx.lookup = weight.shape, lookup
        return F.embedding(tokens, weight)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (tokens,) = ctx.saved_tensors
        return ctx.lookup.gradient(ctx.shape, tokens, grad.contiguous()), None, None


class _TiedRows(torch.autograd.Function):
    """``(E, tokens) -> (E[tokens], *E split at widths)``, one backward for both uses."""

    @staticmethod
    def forward(ctx: Any, weight: Tensor, tokens: Tensor, lookup: RowLookup,
                widths: tuple[int, ...]) -> tuple[Tensor, ...]:
        ctx.save_for_backward(tokens)
        ctx.shape, ctx.lookup, ctx.widths = weight.shape, lookup, widths
        ctx.set_materialize_grads(False)        # a piece the loss left unread: no zeros made
        return (F.embedding(tokens, weight), *torch.split(weight, list(widths)))

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor | None, *pieces: Tensor | None
                 ) -> tuple[Tensor | None, None, None, None]:
        (tokens,) = ctx.saved_tensors
        like = grad if grad is not None else next((g for g in pieces if g is not None), None)
        if like is None:
            return None, None, None, None
        out = torch.empty(ctx.shape, dtype=like.dtype)
        lo = 0
        for width, g in zip(ctx.widths, pieces):
            if g is None:
                out[lo:lo + width].zero_()
            else:
                out[lo:lo + width].copy_(g)
            lo += width
        if grad is not None:
            # the rows' sums (in token order, as F.embedding sums them), added once per row
            sums = ctx.lookup.gradient(ctx.shape, tokens, grad.contiguous())
            rows = torch.unique(tokens)
            out.index_add_(0, rows, sums.index_select(0, rows))
        return out, None, None, None
