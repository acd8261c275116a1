"""What every fused recurrent layer does around its time loop, whichever cell it computes
(:mod:`treelm.kernels.onlstm_torch`, :mod:`treelm.kernels.onlstm_cxx`,
:mod:`treelm.kernels.lstm_cxx`):

    xp = x W_ihᵀ + b_ih + b_hh         all steps' input part in one GEMM, before the loop
    δU = Σ_t δz_tᵀ h_{t-1}              the recurrent weight's gradient in one GEMM, after it

and the C++ extension with the operands of a per-step product prepared for it. Under
``torch.autocast`` both GEMMs run in the autocast dtype and the loop in float32.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from treelm.kernels.gemm import CastMatmul, FixedMatmul, cast_linear, linear, matmul
from treelm.kernels.precision import autocast_dtype

__all__ = ["cxx_extension", "cxx_operands", "input_part", "previous_states", "project_inputs",
           "weight_grad"]

_KIND = {"mm": 0, "mkl": 1, "onednn": 2, "panel": 3}


def input_part(x: Tensor, weight_ih: Tensor, bias_ih: Tensor, bias_hh: Tensor) -> Tensor:
    """``xp = x W_ihᵀ + b_ih + b_hh`` without autograd, as :func:`project_inputs` makes it (in
    the autocast dtype under autocast): for a caller that makes it once for inputs it reads
    many times (a language model's table over its vocabulary, :mod:`treelm.models.lm`) and
    hands it to the loop as ``xp``. Its rows are the products' own rows, so a table's row is
    the row the loop would have made wherever a product's rows do not depend on how many are
    made at once (oneDNN's bfloat16 linear at any count, ``tests/test_input_table.py``)."""
    low = autocast_dtype(x.device.type)
    with torch.no_grad():
        return (linear(x, weight_ih, bias_ih + bias_hh) if low is None else
                cast_linear(x, weight_ih, bias_ih + bias_hh, low))


def project_inputs(x: Tensor, state: tuple[Tensor, Tensor], weight_ih: Tensor, bias_ih: Tensor,
                   weight_hh: Tensor, bias_hh: Tensor, takes_bf16: bool = False,
                   xp: Tensor | None = None
                   ) -> tuple[Tensor, Tensor, Tensor, torch.dtype | None, bool]:
    """``xp = x W_ihᵀ + b_ih + b_hh`` for all steps in one GEMM (autocast's product under
    autocast, :func:`~treelm.kernels.gemm.cast_linear`'s same bits where no gradient is wanted;
    taken back to float32 unless it is bfloat16 and the caller ``takes_bf16``: a loop that reads
    it widened spares the copy), the state in float32 under autocast; returns
    ``(xp, h0, c0, autocast dtype or None, whether a gradient is wanted)``. ``xp`` given
    (:func:`input_part`'s, made by the caller; without autograd only) is taken as it is."""
    h0, c0 = state
    low = autocast_dtype(x.device.type)
    if xp is not None:
        if torch.is_grad_enabled() and any(t.requires_grad for t in (weight_ih, bias_ih,
                                                                    bias_hh)):
            raise ValueError("a given input part xp is for evaluation: no gradient reaches "
                             "weight_ih through it")
    elif low is None:
        xp = linear(x, weight_ih, bias_ih + bias_hh)
    elif torch.is_grad_enabled() and any(t.requires_grad for t in (x, weight_ih, bias_ih,
                                                                    bias_hh)):
        xp = F.linear(x, weight_ih, bias_ih + bias_hh)    # autocast's product, differentiable
    else:                                                 # the same without autograd
        xp = input_part(x, weight_ih, bias_ih, bias_hh)
    if low is not None:                                   # then the recurrence in float32
        xp = xp if takes_bf16 and low == torch.bfloat16 else xp.float()
        h0, c0 = h0.float(), c0.float()
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (xp, h0, c0, weight_hh))
    return xp, h0, c0, low, grad


def previous_states(h0: Tensor, out: Tensor) -> Tensor:
    """``(h_0, …, h_{T-1})`` as ``(T·B, H)`` rows: what the recurrent product read at each
    step, the right operand of ``δU``."""
    hs = torch.cat((h0.unsqueeze(0), out[:-1])) if out.shape[0] > 1 else h0.unsqueeze(0)
    return hs.reshape(-1, out.shape[-1])


def weight_grad(dG: Tensor, h0: Tensor, out: Tensor, gemm_dtype: torch.dtype | None,
                dtype: torch.dtype, states: Tensor | None = None) -> Tensor:
    """``δU = Σ_t δz_tᵀ h_{t-1}``: one ``(G, T·B)·(T·B, H)`` product (in ``gemm_dtype`` when
    set), returned in ``dtype``. ``states``: ``h_0 … h_T`` (T + 1, B, H) already in
    ``gemm_dtype``, as a loop that writes its products' operands kept them (read in place of
    ``h0`` and ``out``)."""
    a = dG.reshape(-1, dG.shape[-1])
    if gemm_dtype is None:
        return matmul(a.t(), previous_states(h0, out))
    if states is not None and states.dtype == gemm_dtype:
        b = states[:-1].reshape(-1, states.shape[-1])
    else:
        b = previous_states(h0, out).to(gemm_dtype)
    return matmul(a.to(gemm_dtype).t(), b).to(dtype)


def cxx_extension() -> Any:
    """The compiled time loops or ``None`` (:func:`treelm.kernels.build.load`; imported here,
    not at the top, so that ``python -m treelm.kernels.build`` runs a module the package has not
    imported yet)."""
    from treelm.kernels import build

    return build.load()


def cxx_operands(product: FixedMatmul | CastMatmul) -> tuple[int, Tensor, Tensor | None]:
    """A per-step product as the C++ loops take it: (backend code, weight, packed weight)."""
    backend, w, packed = product.operands()
    return _KIND[backend], w.detach(), packed
