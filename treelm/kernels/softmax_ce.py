"""The output layer's softmax cross-entropy over a block of logits, by rows in C++
(``csrc/softmax_ce.cpp``), for :mod:`treelm.nn.linear_ce`.

For logits z (R, V) (the output layer's product, in its operands' dtype), bias b and targets y:

    u = z + b                      in float32 (float64 for float64 logits)
    ℓ = Σ_r [ logsumexp(u_r) − u_r[y_r] ]          returned, summed in float64
    G = softmax(u) − onehot(y)     written over z, rounded to z's dtype
    δb += Σ_r G_r                  into ``grad_bias`` (float32 / float64)

Why: PyTorch computes this block as seven passes over memory (a cast of the logits to float32,
log_softmax, gather, exp, scatter, the bias sum, the cast back); here each row is read once into
a buffer that stays in cache and written once. Where the logits are bfloat16 (autocast) that
made PTB training about 5% faster; in float32, with no casts to save, it is as fast as PyTorch.

:func:`softmax_ce_rows` returns ``None`` where the kernel does not apply (not CPU, another
dtype, the extension not built or ``TREELM_CXX=0``); the caller then runs the same equations in
PyTorch.
"""

from __future__ import annotations

import torch
from torch import Tensor

from treelm.kernels.sequence import cxx_extension

__all__ = ["softmax_ce_rows"]

_DTYPES = (torch.float32, torch.float64, torch.bfloat16)


def softmax_ce_rows(z: Tensor, bias: Tensor | None, target: Tensor,
                    grad_bias: Tensor | None) -> float | None:
    """The summed loss of the block ``z`` (its rows' gradient written over it), or ``None``
    where the C++ kernel does not apply; see the module docstring."""
    if z.device.type != "cpu" or z.dtype not in _DTYPES or not z.is_contiguous():
        return None
    ext = cxx_extension()
    if ext is None:
        return None
    return ext.softmax_ce_rows(z, bias, target, grad_bias)
