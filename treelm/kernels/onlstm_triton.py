"""Triton path of the fused ON-LSTM: the gate math of one step (Eqs. 6-14) in a single kernel.

Per step the recurrent GEMM stays ``torch.addmm`` (cuBLAS); one Triton program per batch row then
reads the pre-activations ``z`` (G = 4H + 2L values) and writes everything the PyTorch step of
:class:`treelm.kernels.onlstm_cpu.TorchCell` writes: the activations in place, ``[p̃_i, p̃_f]``,
``[ĩ, f̃]``, ``[î, f̂]``, ``c_t``, ``tanh(c_t)`` and ``h_t``. The backward pass is the PyTorch-level
BPTT of :mod:`treelm.kernels.onlstm_cpu` over those same buffers.

Neurons are handled as an ``(L, C)`` tile (level × neuron-in-chunk), so each master-gate value is
broadcast over its chunk in registers. ``triton`` is imported lazily: the package works without
it. On CPU tensors the kernel runs under ``TRITON_INTERPRET=1`` (for tests, small sizes).
"""

from __future__ import annotations

import functools
from typing import Any

from torch import Tensor

from treelm.kernels.onlstm_cpu import ForwardBuffers, onlstm_cpu_sequence

__all__ = ["TritonCell", "onlstm_triton_sequence"]


@functools.cache
def _step_kernel() -> Any:
    """Compile-on-first-use kernel (``triton`` imported here, not at module import)."""
    import triton
    import triton.language as tl

    @triton.jit
    def onlstm_step(
        z_ptr, p_ptr, m_ptr, hat_ptr, cp_ptr, cn_ptr, tc_ptr, h_ptr,
        stride_z, stride_p, stride_m, stride_hat, stride_cp, stride_cn, stride_tc, stride_h,
        L: tl.constexpr, C: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_C: tl.constexpr,
        SYMMETRIC: tl.constexpr,
    ):
        b = tl.program_id(0)
        H = L * C
        lv = tl.arange(0, BLOCK_L)
        lmask = lv < L
        z_row = z_ptr + b * stride_z
        # master gates: softmax over the levels, then the cumulative sums (Eqs. 6, 9, 10)
        xi = tl.load(z_row + lv, mask=lmask, other=-float("inf"))
        xf = tl.load(z_row + L + lv, mask=lmask, other=-float("inf"))
        ei = tl.where(lmask, tl.exp(xi - tl.max(xi, 0)), 0.0)
        ef = tl.where(lmask, tl.exp(xf - tl.max(xf, 0)), 0.0)
        pi = ei / tl.sum(ei, 0)
        pf = ef / tl.sum(ef, 0)
        mf = tl.cumsum(pf, 0)
        if SYMMETRIC:
            mi = tl.cumsum(pi, 0, reverse=True)
        else:
            mi = 1.0 - tl.cumsum(pi, 0)
        tl.store(p_ptr + b * stride_p + lv, pi, mask=lmask)
        tl.store(p_ptr + b * stride_p + L + lv, pf, mask=lmask)
        tl.store(m_ptr + b * stride_m + lv, mi, mask=lmask)
        tl.store(m_ptr + b * stride_m + L + lv, mf, mask=lmask)
        w = mi * mf                                                 # ω (Eq. 11)
        # neurons as an (L, C) tile
        cv = tl.arange(0, BLOCK_C)
        idx = lv[:, None] * C + cv[None, :]
        mask = lmask[:, None] & (cv[None, :] < C)
        g_row = z_row + 2 * L
        o = tl.sigmoid(tl.load(g_row + idx, mask=mask, other=0.0))
        g = 2.0 * tl.sigmoid(2.0 * tl.load(g_row + H + idx, mask=mask, other=0.0)) - 1.0  # tanh
        i = tl.sigmoid(tl.load(g_row + 2 * H + idx, mask=mask, other=0.0))
        f = tl.sigmoid(tl.load(g_row + 3 * H + idx, mask=mask, other=0.0))
        tl.store(g_row + idx, o, mask=mask)
        tl.store(g_row + H + idx, g, mask=mask)
        tl.store(g_row + 2 * H + idx, i, mask=mask)
        tl.store(g_row + 3 * H + idx, f, mask=mask)
        w2 = w[:, None]
        i_hat = i * w2 + (mi - w)[:, None]                          # Eqs. 12-13
        f_hat = f * w2 + (mf - w)[:, None]
        tl.store(hat_ptr + b * stride_hat + idx, i_hat, mask=mask)
        tl.store(hat_ptr + b * stride_hat + H + idx, f_hat, mask=mask)
        c_prev = tl.load(cp_ptr + b * stride_cp + idx, mask=mask, other=0.0)
        c_new = f_hat * c_prev + i_hat * g                          # Eq. 14
        tc = 2.0 * tl.sigmoid(2.0 * c_new) - 1.0
        tl.store(cn_ptr + b * stride_cn + idx, c_new, mask=mask)
        tl.store(tc_ptr + b * stride_tc + idx, tc, mask=mask)
        tl.store(h_ptr + b * stride_h + idx, o * tc, mask=mask)

    return onlstm_step


def _next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


class TritonCell:
    """Same contract as :class:`treelm.kernels.onlstm_cpu.TorchCell`: ``__call__(t)`` runs the gate
    math of step ``t`` on ``buffers.gates[k]`` with one kernel launch (grid: one program per row).
    """

    def __init__(self, buffers: ForwardBuffers, symmetric: bool) -> None:
        b = buffers
        self.b, self.symmetric = b, symmetric
        self.kernel = _step_kernel()
        self.gates, self.P, self.M = b.gates.unbind(0), b.P.unbind(0), b.M.unbind(0)
        self.hat, self.cs = b.hat.unbind(0), b.cs.unbind(0)
        self.tc, self.out = b.tanh_c.unbind(0), b.out.unbind(0)
        self.block_l, self.block_c = _next_pow2(b.L), _next_pow2(b.C)

    def __call__(self, t: int) -> None:
        k, a, c = self.b.slots(t)
        z, p, m, hat = self.gates[k], self.P[k], self.M[t], self.hat[k]
        cp, cn, tc, h = self.cs[a], self.cs[c], self.tc[k], self.out[t]
        self.kernel[(self.b.B,)](
            z, p, m, hat, cp, cn, tc, h,
            z.stride(0), p.stride(0), m.stride(0), hat.stride(0),
            cp.stride(0), cn.stride(0), tc.stride(0), h.stride(0),
            L=self.b.L, C=self.b.C, BLOCK_L=self.block_l, BLOCK_C=self.block_c,
            SYMMETRIC=self.symmetric,
        )


def onlstm_triton_sequence(
    x: Tensor,
    state: tuple[Tensor, Tensor],
    weight_ih: Tensor,
    bias_ih: Tensor,
    weight_hh: Tensor,
    bias_hh: Tensor,
    n_levels: int,
    master_input: str,
) -> tuple[Tensor, tuple[Tensor, Tensor], dict[str, Tensor]]:
    """:func:`treelm.kernels.onlstm_cpu.onlstm_cpu_sequence` with the Triton step kernel."""
    return onlstm_cpu_sequence(
        x, state, weight_ih, bias_ih, weight_hh, bias_hh, n_levels, master_input, cell=TritonCell
    )
