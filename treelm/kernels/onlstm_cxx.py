"""Fused ON-LSTM with its time loops in C++: the numbers of :mod:`treelm.kernels.onlstm_torch`, with
the per-step gate math compiled instead of run as a dozen PyTorch ops per step.

Same equations, same hand-derived BPTT, same outputs as the Python fused path (see
:mod:`treelm.kernels.onlstm_torch` for the notation): for x (T, B, I) and state ``(h_0, c_0)``,

    xp  = x W_ihᵀ + b_ih + b_hh                       one GEMM for all steps (autograd, outside)
    z_t = xp_t + h_{t-1} Uᵀ;  (p̃, ĩ, f̃, o, ĉ, i, f, c_t, h_t) from z_t and c_{t-1}  (Eqs. 6-14)
    df_t = 1 − mean_k f̃_k,   di_t = mean_k ĩ_k

returning ``out`` (T, B, H), ``(h_T, c_T)`` and ``{"df", "di"}`` (T, B), all differentiable.

Why C++: at the CPU training configuration's size (batch 64, 400 → 400, 40 levels) the Python
fused path spent as long on the per-step gate math and its Python dispatch (≈ 25 small ops per
step forward, as many backward) as on the products, and at batch 1 (evaluating a word model) the
dispatch alone dominated. Here a step is one recurrent product through ATen plus one pass per
batch row over that row's gates (``csrc/onlstm.cpp``), rows split between threads by
``at::parallel_for``; the backward step likewise, with the weight gradient ``δU = Σ_t δz_tᵀ
h_{t-1}`` left to one GEMM after the loop, as in the Python path. Each row is computed by one
thread in a fixed order, so the gate math's results do not depend on the thread count.

The recurrent products run on the backend :mod:`treelm.kernels.gemm` measured fastest for their
shape (``torch.mm``, MKL packed, oneDNN packed): the C++ loop calls the same ops on the weight
prepared here (:meth:`treelm.kernels.gemm.FixedMatmul.operands`). Saved for backward: the
activated gates, ``p̃``, ``[ĩ, f̃]``, ``c_0 … c_T``, ``tanh(c_t)`` and the output; ``î``, ``f̂``
are recomputed in the backward step (three multiply-adds, cheaper than storing them).

Under ``torch.autocast`` it follows the Python path's precision rules
(:func:`treelm.kernels.onlstm_torch.onlstm_torch_sequence`): the products in the autocast dtype
(the left operand copied into a low-precision buffer, the weight cast once per sequence), the
pre-activations, gates, state, levels and every backward quantity in float32.

Runs for CPU tensors of float32 or float64, all of one dtype (float32 parameters under
autocast); anything else goes to the Python fused path. The extension is built by
``make setup`` (:mod:`treelm.kernels.build`); where it cannot be built or loaded, or
``TREELM_CXX=0``, this module's entry point runs the Python fused path (one line on stderr says
why, once, unless switched off on purpose). Float32's exp inside the gates is an inlined
polynomial (about 2 ulp; libm's calls do not vectorise), so float32 results differ from the
Python path's in the last bits, within the kernels' 1e-5 tolerance; float64 uses libm.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from treelm.kernels.gemm import FixedMatmul, matmul, step_matmul, transpose_contiguous
from treelm.kernels.onlstm_torch import (
    LayerOutput,
    is_symmetric,
    onlstm_torch_sequence,
    project_inputs,
)
from treelm.kernels.precision import autocasting, no_autocast
from treelm.kernels.sequence import (
    cxx_extension,
    cxx_operands,
    previous_states,
    weight_grad,
)

__all__ = ["CxxONLSTMFunction", "CxxProjectedONLSTMFunction", "cxx_available",
           "onlstm_cxx_sequence"]

_DTYPES = (torch.float32, torch.float64)


def cxx_available() -> bool:
    """Whether the C++ loop can run here (built or buildable, and not switched off)."""
    return cxx_extension() is not None


def _loop_forward(xp: Tensor, h0: Tensor, c0: Tensor, weight_hh: Tensor, n_levels: int,
                  symmetric: bool, gemm_dtype: torch.dtype | None, save: bool
                  ) -> tuple[Tensor, Tensor, Tensor, Tensor, tuple[Tensor, ...], Tensor | None]:
    """The forward time loop in C++: ``(out, c_T, df, di, saved, states)``, ``saved`` what the
    backward loop reads (``M, gates, P, cs, tanh_c``; empty unless ``save``), ``states``
    ``h_0 … h_T`` (T + 1, B, H) as the bfloat16 products read them (with ``save`` under
    bfloat16 products, else ``None``): the weight gradient's right operand."""
    ext = cxx_extension()
    assert ext is not None
    T, B, _ = xp.shape
    kind, w, packed = cxx_operands(step_matmul(weight_hh, B, T, False, gemm_dtype))
    out, c_last, df, di, *saved = ext.forward(xp, h0, c0, kind, w, packed, n_levels, symmetric,
                                              save)
    if not save:
        return out, c_last, df, di, (), None
    M, gates, P, cs, tanh_c, states = saved
    return out, c_last, df, di, (gates, P, M, cs, tanh_c), states


def _loop_backward(grads: tuple[Tensor | None, ...], saved: tuple[Tensor, ...],
                   weight_hh: Tensor, symmetric: bool, gemm_dtype: torch.dtype | None
                   ) -> tuple[Tensor, Tensor, Tensor]:
    """The backward time loop in C++: ``(δG, δh_0, δc_0)`` from the outputs' gradients
    ``(dout, dh_T, dc_T, ddf, ddi)`` and the forward's ``saved`` (``gates, P, M, cs,
    tanh_c``)."""
    ext = cxx_extension()
    assert ext is not None
    T, B, _ = saved[0].shape
    kind, w, packed = cxx_operands(step_matmul(weight_hh, B, T, True, gemm_dtype))
    return ext.backward(*grads, *saved, kind, w, packed, symmetric)


class CxxONLSTMFunction(torch.autograd.Function):
    """``(xp, h0, c0, weight_hh) -> (out, h_T, c_T, df, di)`` as
    :class:`treelm.kernels.onlstm_torch.ONLSTMFunction`, both loops in C++."""

    @staticmethod
    def forward(
        ctx: Any,
        xp: Tensor,
        h0: Tensor,
        c0: Tensor,
        weight_hh: Tensor,
        n_levels: int,
        symmetric: bool,
        gemm_dtype: torch.dtype | None = None,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        save = any(ctx.needs_input_grad[:4])
        # U in the products' dtype, cast once for both loops (each would cast it again)
        low = weight_hh if gemm_dtype is None else weight_hh.detach().to(gemm_dtype)
        out, c_last, df, di, saved, states = _loop_forward(xp, h0, c0, low, n_levels,
                                                           symmetric, gemm_dtype, save)
        ctx.symmetric, ctx.gemm_dtype = symmetric, gemm_dtype
        if save:
            ctx.save_for_backward(h0, weight_hh, out, states, *saved)
            ctx.low = low if gemm_dtype is not None else None
        return out, out[-1].clone(), c_last.clone(), df, di

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dout: Tensor | None, dh_last: Tensor | None, dc_last: Tensor | None,
                 ddf: Tensor | None, ddi: Tensor | None) -> tuple[Tensor | None, ...]:
        h0, weight_hh, out, states, *saved = ctx.saved_tensors
        need = ctx.needs_input_grad
        low = ctx.gemm_dtype
        with no_autocast(h0.device.type, low is not None):
            product_weight = weight_hh if ctx.low is None else ctx.low
            dG, dh0, dc0 = _loop_backward((dout, dh_last, dc_last, ddf, ddi), tuple(saved),
                                          product_weight, ctx.symmetric, low)
            dU = weight_grad(dG, h0, out, low, weight_hh.dtype, states) if need[3] else None
        return (dG if need[0] else None, dh0 if need[1] else None, dc0 if need[2] else None,
                dU, None, None, None)


class CxxProjectedONLSTMFunction(torch.autograd.Function):
    """``(x, W_ih, b, h0, c0, U) -> (out, h_T, c_T, df, di)``: :class:`CxxONLSTMFunction` with
    the input projection ``xp = x W_ihᵀ + b`` inside, for float32 training outside autocast.

    Why: both weight gradients read δGᵀ (δG = ∂L/∂xp, (T·B, G)): δW_ih = δGᵀ X and δU = δGᵀ
    H_{t-1}. oneDNN's product takes its left operand row by row, so made apart (the projection's
    autograd, then :func:`~treelm.kernels.sequence.weight_grad`) each copied δG transposed
    itself; here one transposed copy serves both (at the paper's size a copy is 27 MB, about 5 ms
    on 2 Zen 5 cores). δX = δG W_ih and δb = Σ δG read δG as it is. Same products, so the same
    numbers as the two Functions apart wherever the measured backends agree."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight_ih: Tensor, bias: Tensor, h0: Tensor, c0: Tensor,
                weight_hh: Tensor, n_levels: int, symmetric: bool
                ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        T, B, n_in = x.shape
        x2 = x.reshape(T * B, n_in)
        xp = FixedMatmul(weight_ih, T * B)(x2, add=bias).view(T, B, -1)
        out, c_last, df, di, saved, _ = _loop_forward(xp, h0, c0, weight_hh, n_levels,
                                                      symmetric, None, True)
        ctx.symmetric = symmetric
        ctx.save_for_backward(x2, weight_ih, h0, weight_hh, out, *saved)
        return out, out[-1].clone(), c_last.clone(), df, di

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dout: Tensor | None, dh_last: Tensor | None, dc_last: Tensor | None,
                 ddf: Tensor | None, ddi: Tensor | None) -> tuple[Tensor | None, ...]:
        x2, weight_ih, h0, weight_hh, out, *saved = ctx.saved_tensors
        need = ctx.needs_input_grad
        dG, dh0, dc0 = _loop_backward((dout, dh_last, dc_last, ddf, ddi), tuple(saved),
                                      weight_hh, ctx.symmetric, None)
        T, B, G = dG.shape
        d2 = dG.view(T * B, G)
        dx = matmul(d2, weight_ih).view(T, B, -1) if need[0] else None
        dw_ih = dU = None
        if need[1] or need[5]:
            d2t = transpose_contiguous(d2)      # δGᵀ once, in rows, for both weight gradients
            if need[1]:
                dw_ih = matmul(d2t, x2)
            if need[5]:
                dU = matmul(d2t, previous_states(h0, out))
        db = d2.sum(0) if need[2] else None
        return (dx, dw_ih, db, dh0 if need[3] else None, dc0 if need[4] else None, dU,
                None, None)


def _runs_here(x: Tensor, tensors: tuple[Tensor, ...]) -> bool:
    """CPU tensors of one float32/float64 dtype, and the extension loaded."""
    return (x.device.type == "cpu" and x.dtype in _DTYPES
            and all(t.dtype == x.dtype and t.device.type == "cpu" for t in tensors)
            and cxx_extension() is not None)


def onlstm_cxx_sequence(x: Tensor, state: tuple[Tensor, Tensor], weight_ih: Tensor, bias_ih: Tensor,
                        weight_hh: Tensor, bias_hh: Tensor, n_levels: int, master_input: str,
                        xp: Tensor | None = None) -> LayerOutput:
    """Fused ON-LSTM layer with the C++ loops: :func:`onlstm_torch_sequence`'s contract and
    numbers (``xp``: the input part already made, evaluation only); runs that function instead
    where the C++ loop does not apply (see the module docstring)."""
    h0, c0 = state
    if not _runs_here(x, (h0, c0, weight_ih, bias_ih, weight_hh, bias_hh)):
        return onlstm_torch_sequence(x, state, weight_ih, bias_ih, weight_hh, bias_hh, n_levels,
                                     master_input, xp=xp)
    tensors = (x, weight_ih, bias_ih, bias_hh, h0, c0, weight_hh)
    if (xp is None and x.dtype == torch.float32 and not autocasting("cpu")
            and torch.is_grad_enabled()
            and any(t.requires_grad for t in tensors)):
        out, h, c, df, di = CxxProjectedONLSTMFunction.apply(
            x, weight_ih, bias_ih + bias_hh, h0, c0, weight_hh, n_levels,
            is_symmetric(master_input))
        return out, (h, c), {"df": df, "di": di}
    # under bfloat16 autocast xp stays in its bfloat16: the C++ loop reads it widened
    xp, h0, c0, symmetric, low, grad = project_inputs(
        x, state, weight_ih, bias_ih, weight_hh, bias_hh, master_input, takes_bf16=True, xp=xp)
    with no_autocast("cpu", low is not None):
        if grad:
            out, h, c, df, di = CxxONLSTMFunction.apply(
                xp, h0, c0, weight_hh, n_levels, symmetric, low
            )
        else:
            out, c, df, di, _, _ = _loop_forward(xp, h0, c0, weight_hh, n_levels, symmetric,
                                                 low, False)
            h = out[-1]
    return out, (h, c), {"df": df, "di": di}
