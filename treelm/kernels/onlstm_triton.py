"""Triton path of the fused ON-LSTM: the gate math of one step (Eqs. 6-14) in a single kernel, and
the gate math of one backward step in another.

Per step the recurrent GEMM stays ``torch.addmm`` / ``torch.mm`` (cuBLAS); one Triton program per
batch row then does the rest of the step. Forward (:class:`TritonCell`): it reads the
pre-activations ``z`` (G = 4H + 2L values) and writes everything the PyTorch step of
:class:`treelm.kernels.onlstm_torch.TorchCell` writes: the activations in place, ``[p̃_i, p̃_f]``,
``[ĩ, f̃]``, ``[î, f̂]``, ``c_t``, ``tanh(c_t)`` and ``h_t``. Backward (:class:`TritonBackCell`,
the contract of :class:`treelm.kernels.onlstm_torch.TorchBackCell`): it reads those buffers,
``δh_t`` (the recurrent product of the step after, plus ``∂ℓ/∂h_t`` from the output) and
``δc_t``, and writes ``δz_t`` (the module docstring of :mod:`treelm.kernels.onlstm_torch` has the
equations: the output gate, ``δc``, ``δω``, the per-level sums over the chunk, the cumulative sums
of ``δĩ``, ``δf̃`` and the softmax backward) and ``δc_{t-1}`` in place. So a forward and
backward of ``T`` steps launches ``2T`` GEMMs and ``2T`` Triton kernels, plus a constant number
of others (the input projection, the weight gradient, the levels' means).

Neurons are handled as an ``(L, C)`` tile (level × neuron-in-chunk), so each master-gate value is
broadcast over its chunk in registers, and the sums over a chunk (``Σ_C``) are row reductions of
the tile. ``triton`` is imported lazily: the package works without it. On CPU tensors the kernels
run under ``TRITON_INTERPRET=1`` (for tests, small sizes).
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

from torch import Tensor

from treelm.kernels.onlstm_buffers import ForwardBuffers
from treelm.kernels.onlstm_torch import LayerOutput, onlstm_torch_sequence

__all__ = ["TritonBackCell", "TritonCell", "onlstm_triton_sequence"]


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


@functools.cache
def _back_kernel() -> Any:
    """The backward step's kernel, compiled on first use (``triton`` imported here)."""
    import triton
    import triton.language as tl

    @triton.jit
    def onlstm_back_step(
        z_ptr, p_ptr, m_ptr, hat_ptr, cp_ptr, tc_ptr, dh_ptr, dout_ptr, lg_ptr, dc_ptr, dz_ptr,
        stride_z, stride_p, stride_m, stride_hat, stride_cp, stride_tc, stride_dh, stride_dout,
        stride_lg, stride_dc, stride_dz,
        L: tl.constexpr, C: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_C: tl.constexpr,
        SYMMETRIC: tl.constexpr, HAS_DH: tl.constexpr, HAS_DOUT: tl.constexpr,
        HAS_LEVEL: tl.constexpr,
    ):
        b = tl.program_id(0)
        H = L * C
        lv = tl.arange(0, BLOCK_L)
        lmask = lv < L
        cv = tl.arange(0, BLOCK_C)
        idx = lv[:, None] * C + cv[None, :]
        mask = lmask[:, None] & (cv[None, :] < C)
        # the step's saved activations (L, C) and master gates (L,)
        g_row = z_ptr + b * stride_z + 2 * L
        o = tl.load(g_row + idx, mask=mask, other=0.0)
        g = tl.load(g_row + H + idx, mask=mask, other=0.0)
        i = tl.load(g_row + 2 * H + idx, mask=mask, other=0.0)
        f = tl.load(g_row + 3 * H + idx, mask=mask, other=0.0)
        tc = tl.load(tc_ptr + b * stride_tc + idx, mask=mask, other=0.0)
        c_prev = tl.load(cp_ptr + b * stride_cp + idx, mask=mask, other=0.0)
        i_hat = tl.load(hat_ptr + b * stride_hat + idx, mask=mask, other=0.0)
        f_hat = tl.load(hat_ptr + b * stride_hat + H + idx, mask=mask, other=0.0)
        mi = tl.load(m_ptr + b * stride_m + lv, mask=lmask, other=0.0)
        mf = tl.load(m_ptr + b * stride_m + L + lv, mask=lmask, other=0.0)
        dc = tl.load(dc_ptr + b * stride_dc + idx, mask=mask, other=0.0)
        # δh_t: the recurrent part and the output's gradient (either may be absent)
        dh = tl.zeros_like(o)
        if HAS_DH:
            dh += tl.load(dh_ptr + b * stride_dh + idx, mask=mask, other=0.0)
        if HAS_DOUT:
            dh += tl.load(dout_ptr + b * stride_dout + idx, mask=mask, other=0.0)
        # output gate; δc += δh∘o∘(1 − tanh² c_t)
        dz_o = dh * tc * o * (1.0 - o)
        dc = dc + dh * o * (1.0 - tc * tc)
        # [δc∘ĉ, δc∘c_{t-1}]: with [i, f] the gates' gradients, summed over the chunk the levels'
        a_i = dc * g
        a_f = dc * c_prev
        w = mi * mf                                                     # ω
        dz_i = a_i * w[:, None] * i * (1.0 - i)
        dz_f = a_f * w[:, None] * f * (1.0 - f)
        dz_g = dc * i_hat * (1.0 - g * g)
        dw = tl.sum(a_i * (i - 1.0) + a_f * (f - 1.0), 1)               # δω
        dmi = tl.sum(a_i, 1) + dw * mf                                  # δĩ
        dmf = tl.sum(a_f, 1) + dw * mi                                  # δf̃
        if HAS_LEVEL:                                                   # + [δdi, −δdf] / L
            dmi += tl.load(lg_ptr + b * stride_lg)
            dmf += tl.load(lg_ptr + b * stride_lg + 1)
        # back through the cumulative sums (up to a constant per row, see onlstm_torch) ...
        ci = tl.cumsum(dmi, 0)
        if SYMMETRIC:
            dpi = ci
        else:
            dpi = ci - dmi
        dpf = dmf - tl.cumsum(dmf, 0)
        # ... and the softmax: δz = p̃∘(δp̃ − Σ_L p̃∘δp̃)
        pi = tl.load(p_ptr + b * stride_p + lv, mask=lmask, other=0.0)
        pf = tl.load(p_ptr + b * stride_p + L + lv, mask=lmask, other=0.0)
        dz_mi = pi * (dpi - tl.sum(pi * dpi, 0))
        dz_mf = pf * (dpf - tl.sum(pf * dpf, 0))
        dz_row = dz_ptr + b * stride_dz
        tl.store(dz_row + lv, dz_mi, mask=lmask)
        tl.store(dz_row + L + lv, dz_mf, mask=lmask)
        dz_row += 2 * L
        tl.store(dz_row + idx, dz_o, mask=mask)
        tl.store(dz_row + H + idx, dz_g, mask=mask)
        tl.store(dz_row + 2 * H + idx, dz_i, mask=mask)
        tl.store(dz_row + 3 * H + idx, dz_f, mask=mask)
        tl.store(dc_ptr + b * stride_dc + idx, dc * f_hat, mask=mask)  # δc_{t-1}

    return onlstm_back_step


def _next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


class TritonCell:
    """Same contract as :class:`treelm.kernels.onlstm_torch.TorchCell`: ``__call__(t)`` runs the
    gate math of step ``t`` on ``buffers.gates[k]`` with one kernel launch (grid: one program per
    row). ``Backward``: :class:`TritonBackCell`.
    """

    Backward: ClassVar[type[Any]]

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


class TritonBackCell:
    """Same contract as :class:`treelm.kernels.onlstm_torch.TorchBackCell`: ``__call__(t, dh)``
    writes ``δz_t`` into ``dG[t]`` and turns ``dc`` into ``δc_{t-1}``, with one kernel launch (one
    program per row). ``dout`` is made contiguous once per sequence (a sum's gradient arrives as
    a stride-0 view); when a pointer is absent the kernel is compiled without reading it.
    """

    def __init__(self, buffers: ForwardBuffers, symmetric: bool, dG: Tensor, dc: Tensor,
                 dout: Tensor | None, level_grad: Tensor | None) -> None:
        b = self.b = buffers
        self.symmetric, self.dc = symmetric, dc
        self.kernel = _back_kernel()
        self.gates, self.P, self.M = b.gates.unbind(0), b.P.unbind(0), b.M.unbind(0)
        self.hat, self.cs, self.tc = b.hat.unbind(0), b.cs.unbind(0), b.tanh_c.unbind(0)
        self.dz = dG.unbind(0)
        self.dout = None if dout is None else dout.contiguous().unbind(0)
        self.level = None if level_grad is None else level_grad.unbind(0)
        self.block_l, self.block_c = _next_pow2(b.L), _next_pow2(b.C)

    def __call__(self, t: int, dh: Tensor | None) -> None:
        z, p, m, hat, cp, tc = (self.gates[t], self.P[t], self.M[t], self.hat[t], self.cs[t],
                                self.tc[t])
        dc, dz = self.dc, self.dz[t]
        dout = None if self.dout is None else self.dout[t]
        level = None if self.level is None else self.level[t]
        # an absent operand is compiled out (HAS_* false); any tensor stands in for its pointer
        self.kernel[(self.b.B,)](
            z, p, m, hat, cp, tc, dc if dh is None else dh, dc if dout is None else dout,
            dc if level is None else level, dc, dz,
            z.stride(0), p.stride(0), m.stride(0), hat.stride(0), cp.stride(0), tc.stride(0),
            0 if dh is None else dh.stride(0), 0 if dout is None else dout.stride(0),
            0 if level is None else level.stride(0), dc.stride(0), dz.stride(0),
            L=self.b.L, C=self.b.C, BLOCK_L=self.block_l, BLOCK_C=self.block_c,
            SYMMETRIC=self.symmetric, HAS_DH=dh is not None, HAS_DOUT=dout is not None,
            HAS_LEVEL=level is not None,
        )


TritonCell.Backward = TritonBackCell


def onlstm_triton_sequence(x: Tensor, state: tuple[Tensor, Tensor], weight_ih: Tensor,
                           bias_ih: Tensor, weight_hh: Tensor, bias_hh: Tensor, n_levels: int,
                           master_input: str) -> LayerOutput:
    """:func:`treelm.kernels.onlstm_torch.onlstm_torch_sequence` with the Triton step kernel."""
    return onlstm_torch_sequence(
        x, state, weight_ih, bias_ih, weight_hh, bias_hh, n_levels, master_input, cell=TritonCell
    )
