"""The LSTM under bfloat16 autocast on CPU, with its time loops in C++ (``csrc/lstm.cpp``).

For x (T, B, I), state ``(h_0, c_0)`` and ``torch.nn.LSTM``'s weights (rows ``[i | f | g | o]``):

    xp  = x W_ihᵀ + b_ih + b_hh                   one GEMM for all steps (autograd, outside)
    z_t = xp_t + h_{t-1} Uᵀ
    i, f, g, o = σ(z_i), σ(z_f), tanh(z_g), σ(z_o)
    c_t = f ∘ c_{t-1} + i ∘ g,   h_t = o ∘ tanh(c_t)

returning ``out`` (T, B, H) and ``(h_T, c_T)``, differentiable in every input. The BPTT is
derived by hand (equations in ``csrc/lstm.cpp``); ``δU = Σ_t δz_tᵀ h_{t-1}`` is one GEMM after
the loop (:func:`treelm.kernels.sequence.weight_grad`).

Why it exists: in float32 :class:`treelm.cells.lstm.LSTM` runs PyTorch's fused kernel (oneDNN),
but oneDNN's bfloat16 LSTM keeps the state in bfloat16 and is missing on CPUs without native
bfloat16, so under autocast the cell stepped its readable Python loop: about a dozen dispatched
ops a step forward and as many backward, which held bf16 training of ``ptb-lstm-cpu`` to 1.24×
float32 while the products alone ran 2-2.6× faster. Here, as in
:mod:`treelm.kernels.onlstm_cxx`, a step is one recurrent product (bfloat16 operands, through the
GEMM backend :mod:`treelm.kernels.gemm` measured fastest) and one pass over each batch row's
gates in float32: the pre-activations, gates, state, output and every backward quantity stay in
float32, and the weight gradient is returned in the weight's dtype.

:func:`lstm_cxx_sequence` returns ``None`` where the loop does not apply (not CPU, a dtype other
than float32/float64, the extension not built or ``TREELM_CXX=0``): the cell then runs its step
loop, with the same numbers up to rounding.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from treelm.kernels.gemm import step_matmul
from treelm.kernels.precision import no_autocast
from treelm.kernels.sequence import cxx_extension, cxx_operands, project_inputs, weight_grad

__all__ = ["CxxLSTMFunction", "lstm_cxx_sequence"]

_DTYPES = (torch.float32, torch.float64)


class CxxLSTMFunction(torch.autograd.Function):
    """``(xp, h0, c0, weight_hh) -> (out, h_T, c_T)``, both loops in C++; ``weight_hh`` may be a
    DropConnect-dropped copy (its gradient is returned)."""

    @staticmethod
    def forward(ctx: Any, xp: Tensor, h0: Tensor, c0: Tensor, weight_hh: Tensor,
                gemm_dtype: torch.dtype | None = None) -> tuple[Tensor, Tensor, Tensor]:
        ext = cxx_extension()
        T, B, _ = xp.shape
        # U in the products' dtype, cast once for both loops (each would cast it again)
        low = weight_hh if gemm_dtype is None else weight_hh.detach().to(gemm_dtype)
        kind, w, packed = cxx_operands(step_matmul(low, B, T, False, gemm_dtype))
        out, c_last, gates, cs, tanh_c = ext.lstm_forward(xp, h0, c0, kind, w, packed, True)
        ctx.gemm_dtype = gemm_dtype
        ctx.low = low if gemm_dtype is not None else None
        ctx.save_for_backward(h0, weight_hh, out, gates, cs, tanh_c)
        return out, out[-1].clone(), c_last.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dout: Tensor | None, dh_last: Tensor | None, dc_last: Tensor | None
                 ) -> tuple[Tensor | None, ...]:
        h0, weight_hh, out, gates, cs, tanh_c = ctx.saved_tensors
        T, B, _ = gates.shape
        low = ctx.gemm_dtype
        need = ctx.needs_input_grad
        with no_autocast(h0.device.type, low is not None):
            product_weight = weight_hh if ctx.low is None else ctx.low
            kind, w, packed = cxx_operands(step_matmul(product_weight, B, T, True, low))
            dG, dh0, dc0 = cxx_extension().lstm_backward(dout, dh_last, dc_last, gates, cs,
                                                          tanh_c, kind, w, packed)
            dU = weight_grad(dG, h0, out, low, weight_hh.dtype) if need[3] else None
        return (dG if need[0] else None, dh0 if need[1] else None, dc0 if need[2] else None,
                dU, None)


def lstm_cxx_sequence(x: Tensor, state: tuple[Tensor, Tensor], weight_ih: Tensor,
                      bias_ih: Tensor, weight_hh: Tensor, bias_hh: Tensor
                      ) -> tuple[Tensor, tuple[Tensor, Tensor]] | None:
    """A whole LSTM layer through the C++ loops: ``out`` (T, B, H) and ``(h_T, c_T)``, or
    ``None`` where they do not apply (see the module docstring)."""
    tensors = (*state, weight_ih, bias_ih, weight_hh, bias_hh)
    if (x.device.type != "cpu" or any(t.device.type != "cpu" for t in tensors)
            or weight_hh.dtype not in _DTYPES or x.size(0) == 0 or cxx_extension() is None):
        return None
    xp, h0, c0, low, grad = project_inputs(x, state, weight_ih, bias_ih, weight_hh, bias_hh)
    if low is None and any(t.dtype != xp.dtype for t in (h0, c0, weight_hh)):
        return None                                 # mixed dtypes without autocast: the loop
    with no_autocast("cpu", low is not None):
        if grad:
            out, h, c = CxxLSTMFunction.apply(xp, h0, c0, weight_hh, low)
        else:
            T, B, _ = xp.shape
            kind, w, packed = cxx_operands(step_matmul(weight_hh, B, T, False, low))
            out, c = cxx_extension().lstm_forward(xp, h0, c0, kind, w, packed, False)
            h = out[-1]
    return out, (h, c)
