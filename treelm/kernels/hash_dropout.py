"""Dropout with a hashed mask, in C++ (``csrc/hash_dropout.cpp``): AWD-LSTM's weight drop on the
CPU without a random generator per element.

    u_i  = mix(mix(i · φ ⊕ s₀) ⊕ s₁) / 2^32        i the element's index, (s₀, s₁) = one 64-bit seed
    y_i  = x_i · [u_i ≥ p] / (1 − p)               (24 bits of u compared; see the C++ file)
    ∂ℓ/∂x_i = ∂ℓ/∂y_i · [u_i ≥ p] / (1 − p)         the same call on the gradient, the same seed

``mix`` is MurmurHash3's 32-bit finaliser. One seed per call is drawn from PyTorch's CPU
generator, so ``torch.manual_seed`` fixes the masks and a checkpoint's generator state resumes
them; nothing per element is drawn or stored.

Why: weight drop masks every hidden-to-hidden weight anew at every batch. ``torch.rand`` on the
CPU draws those one by one from a Mersenne twister, and the mask's comparison, cast, scaling and
product are more passes; forward and backward took about 3% of a ``ptb-onlstm-cpu`` training step
(by ``torch.profiler``). Here the mask is integer arithmetic the compiler vectorises, one pass
each way.

:func:`hash_dropout` returns ``None`` where it does not apply (not a CPU float32/float64 tensor,
the extension not built, ``TREELM_CXX=0``); :func:`treelm.nn.dropout.weight_drop` then draws the
mask with ``torch.rand`` (so CUDA keeps its own generator).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from treelm.kernels.sequence import cxx_extension

__all__ = ["hash_dropout"]

_DTYPES = (torch.float32, torch.float64)


class _HashDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, p: float, seed: int) -> Tensor:
        ctx.p, ctx.seed = p, seed
        return cxx_extension().hash_dropout(x, p, seed)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:  # type: ignore[override]
        return cxx_extension().hash_dropout(grad, ctx.p, ctx.seed), None, None


def draw_seed() -> int:
    """A 64-bit seed from PyTorch's default CPU generator (one draw)."""
    return int(torch.randint(-(2 ** 63), 2 ** 63 - 1, (), dtype=torch.int64).item())


def hash_dropout(x: Tensor, p: float, seed: int | None = None) -> Tensor | None:
    """``x`` with each element zeroed with probability ``p`` and the rest scaled by 1/(1 − p),
    the mask a hash of ``seed`` (drawn from the CPU generator when ``None``) and the element's
    index; differentiable in ``x``. ``None`` where the C++ kernel does not apply."""
    if x.device.type != "cpu" or x.dtype not in _DTYPES or cxx_extension() is None:
        return None
    return _HashDropout.apply(x, p, draw_seed() if seed is None else seed)
