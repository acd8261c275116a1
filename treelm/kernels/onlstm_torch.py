"""Fused ON-LSTM over a whole sequence: one ``torch.autograd.Function`` with a hand-derived BPTT.

Computes the same numbers as the readable reference (:func:`treelm.cells.onlstm.onlstm_update`
stepped by :class:`treelm.cells.onlstm.ONLSTM` with ``impl="reference"``), but without autograd
bookkeeping per step. Notation (per step ``t``; ``L`` levels of ``C = H / L`` neurons each):

    z_t   = xp_t + h_{t-1} U^T                    (B, G), G = 4H + 2L; xp_t = x_t W^T + b_ih + b_hh
    p̃_i, p̃_f = softmax(z_ĩ), softmax(z_f̃)        (B, L) each
    f̃ = cumsum(p̃_f)                               master forget gate (Eq. 9)
    ĩ = 1 − cumsum(p̃_i)   ("paper", Eq. 10)   or   ĩ_k = Σ_{j≥k} p̃_i,j   ("symmetric")
    o, ĉ, i, f = σ(z_o), tanh(z_ĉ), σ(z_i), σ(z_f)  (B, H) each
    ω = f̃ ∘ ĩ,  f̂ = f ∘ ω + (f̃ − ω),  î = i ∘ ω + (ĩ − ω)                    (Eqs. 11-13)
    c_t = f̂ ∘ c_{t-1} + î ∘ ĉ,   h_t = o ∘ tanh(c_t)                         (Eq. 14)
    df_t = 1 − mean_k f̃_k,   di_t = mean_k ĩ_k                               (B,) each

Master-gate values act on all ``C`` neurons of their level (shapes ``(B, L, 1)`` against
``(B, L, C)``). The backward pass, for ``δc = ∂ℓ/∂c_t`` (incl. the path through ``h_t``):

    δc   += δh ∘ o ∘ (1 − tanh² c_t),          δz_o = δh ∘ tanh(c_t) ∘ o(1 − o)
    δz_f  = δc ∘ c_{t-1} ∘ ω ∘ f(1 − f),      δz_i = δc ∘ ĉ ∘ ω ∘ i(1 − i)
    δz_ĉ  = δc ∘ î ∘ (1 − ĉ²),                 δc_{t-1} = δc ∘ f̂
    δω    = Σ_C δc ∘ ((f − 1) ∘ c_{t-1} + (i − 1) ∘ ĉ)
    δf̃   = Σ_C δc ∘ c_{t-1} + δω ∘ ĩ − δdf / L,    δĩ = Σ_C δc ∘ ĉ + δω ∘ f̃ + δdi / L
    δp̃_f = reverse-cumsum(δf̃);  δp̃_i = −reverse-cumsum(δĩ) (paper) or cumsum(δĩ) (symmetric)
    δz_m  = p̃ ∘ (δp̃ − Σ_L p̃ ∘ δp̃)                                 (softmax backward)
    δh_{t-1} = δz_t U,   δU = Σ_t δz_t^T h_{t-1} (one GEMM over all T·B rows),  δxp_t = δz_t

Softmax backward ignores a constant added to ``δp̃`` along the levels, so the reverse cumsum
``Σ_{k≥j} x_k`` is replaced by ``x_j − cumsum(x)_j`` (they differ by the row total).

The input projection (one GEMM for all steps) stays outside the Function, so autograd handles
``weight_ih`` and both biases (``b_hh`` is folded into the projection's bias); it runs through
:func:`treelm.kernels.gemm.linear` (``F.linear``'s numbers and gradients, on the backend measured
fastest for its shape).

Cost structure (why it is fast): per step one recurrent GEMM forward and one backward, both against
a weight prepared once per sequence for the GEMM backend measured fastest for that shape on this
machine (:mod:`treelm.kernels.gemm`: MKL packed, oneDNN packed or plain ``addmm``/``mm``; always
plain for float64 and non-CPU tensors); the gate math writes into preallocated per-sequence
buffers through views made once; the weight gradient is a single ``(G, T·B) @ (T·B, H)`` GEMM
after the loop (:func:`treelm.kernels.gemm.matmul`, also on the backend measured fastest).
Saved per step: the activated gates, ``p̃``, ``[ĩ, f̃]``, ``[î, f̂]``, ``c_{t-1}``, ``tanh(c_t)`` and
``h_t`` (the output).

Under ``torch.autocast`` the products run in the autocast dtype (bfloat16, float16) and the
gate math, the master-gate cumulative sums and the cell state in float32: the list of which
tensor is kept in which precision is in :func:`onlstm_torch_sequence`.

No host work (what a GPU, and a CUDA graph capturing the sequence, needs): every buffer and scratch
tensor is allocated once per sequence, in shapes fixed by ``(T, B)``; the steps write through
``out=`` and in place (the one exception: a packed CPU GEMM returns a fresh result per call);
no value is read back to the host (no ``.item()``, no Python branch on a tensor) and no tensor is
made from Python data (constants are filled on the device). ``tests/test_kernels_onlstm.py``
checks this by recording every op of a forward and backward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Protocol

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from treelm.kernels.gemm import step_matmul
from treelm.kernels.onlstm_buffers import ForwardBuffers
from treelm.kernels.precision import no_autocast
from treelm.kernels.sequence import project_inputs as project
from treelm.kernels.sequence import weight_grad

__all__ = ["CellFactory", "ForwardBuffers", "LayerOutput", "ONLSTMFunction", "TorchBackCell",
           "TorchCell", "onlstm_backward_loop", "onlstm_forward_loop", "onlstm_torch_sequence",
           "project_inputs", "weight_grad"]

_aten = torch.ops.aten

#: What a whole-sequence ON-LSTM layer returns: ``out`` (T, B, H), ``(h_T, c_T)`` and the levels
#: ``{"df": (T, B), "di": (T, B)}``.
LayerOutput = tuple[Tensor, tuple[Tensor, Tensor], dict[str, Tensor]]


#: Builds a sequence's per-step gate math from its buffers: :class:`TorchCell` or a kernel.
CellFactory = Callable[[ForwardBuffers, bool], Callable[[int], None]]


class TorchCell:
    """The gate math of one step in PyTorch ops (Eqs. 6-14), written into :class:`ForwardBuffers`.

    Per-step views are made once, so that a step costs only the arithmetic. ``__call__(t)``
    expects ``buffers.gates[k]`` to hold step ``t``'s pre-activations. ``Backward``: the matching
    backward step (:class:`TorchBackCell`).
    """

    Backward: ClassVar[type[Any]]

    def __init__(self, buffers: ForwardBuffers, symmetric: bool) -> None:
        b = buffers
        B, L, C = b.B, b.L, b.C
        self.b, self.symmetric = b, symmetric
        self.v = b.gate_views(b.gates)
        self.P, self.M = b.P.unbind(0), b.M.unbind(0)
        self.mi, self.mf = b.M[:, :, 0].unbind(0), b.M[:, :, 1].unbind(0)
        self.pi = b.P[:, :, 0].unbind(0)
        self.hat4 = b.hat.view(-1, B, 2, L, C).unbind(0)
        self.hi, self.hf = b.hat[:, :, 0].unbind(0), b.hat[:, :, 1].unbind(0)
        self.cs, self.tc, self.out = b.cs.unbind(0), b.tanh_c.unbind(0), b.out.unbind(0)
        self.w = b.M.new_empty(B, L)                         # ω (scratch)
        self.w3, self.w4 = self.w.view(B, 1, L), self.w.view(B, 1, L, 1)
        self.mw = b.M.new_empty(B, 2, L)                     # [ĩ − ω, f̃ − ω] (scratch)
        self.mw4 = self.mw.unsqueeze(-1)
        self.one = b.M.new_ones(())
        if symmetric:                                       # p̃_i reversed, its cumsum (scratch)
            self.rev, self.rcum = b.M.new_empty(B, L), b.M.new_empty(B, L)

    def __call__(self, t: int) -> None:
        k, a, c = self.b.slots(t)
        v = self.v
        p, m, mi = self.P[k], self.M[t], self.mi[t]
        _aten._softmax.out(v["m"][k], -1, False, out=p)     # p̃ = softmax(z_ĩ), softmax(z_f̃)
        torch.cumsum(p, -1, out=m)                          # f̃ = cumax (Eq. 9)
        if self.symmetric:                                  # ĩ_k = Σ_{j≥k} p̃_i,j
            _aten.flip.out(self.pi[k], [-1], out=self.rev)
            torch.cumsum(self.rev, -1, out=self.rcum)
            _aten.flip.out(self.rcum, [-1], out=mi)
        else:                                               # ĩ = 1 − cumax (Eq. 10)
            torch.sub(self.one, mi, out=mi)
        torch.sigmoid_(v["o"][k])
        torch.tanh_(v["g"][k])
        torch.sigmoid_(v["if"][k])
        torch.mul(mi, self.mf[t], out=self.w)               # ω = f̃∘ĩ (Eq. 11)
        torch.sub(m, self.w3, out=self.mw)
        torch.addcmul(self.mw4, v["if4"][k], self.w4, out=self.hat4[k])  # î, f̂ (Eqs. 12-13)
        c_new = self.cs[c]
        torch.mul(self.hf[k], self.cs[a], out=c_new)        # c_t = f̂∘c_{t-1} + î∘ĉ (Eq. 14)
        c_new.addcmul_(self.hi[k], v["g"][k])
        torch.tanh(c_new, out=self.tc[k])
        torch.mul(v["o"][k], self.tc[k], out=self.out[t])   # h_t = o∘tanh(c_t)


def onlstm_forward_loop(xp: Tensor, h0: Tensor, c0: Tensor, weight_hh: Tensor, n_levels: int,
                        symmetric: bool, save: bool, cell: CellFactory = TorchCell,
                        gemm_dtype: torch.dtype | None = None
                        ) -> tuple[Tensor, Tensor, Tensor, Tensor, ForwardBuffers]:
    """The forward recurrence from the input projections ``xp`` (T, B, G).

    Returns ``out`` (T, B, H), ``c_T`` (B, H), ``df``, ``di`` (T, B) and the buffers. ``cell``
    builds the per-step gate math (:class:`TorchCell`, or a Triton kernel with the same contract).
    ``gemm_dtype``: the recurrent products' precision under autocast (see
    :func:`onlstm_torch_sequence`); ``None``: the buffers' dtype.
    """
    T, B, _ = xp.shape
    buf = ForwardBuffers(xp, h0.shape[1], n_levels, save)
    step = cell(buf, symmetric)
    recurrent = step_matmul(weight_hh, B, T, False, gemm_dtype)  # h (B, H) -> h U^T (B, G)
    xps, gates, out = xp.unbind(0), buf.gates.unbind(0), buf.out.unbind(0)
    buf.cs[0].copy_(c0)
    h = h0.contiguous()
    for t in range(T):
        recurrent(h, add=xps[t], out=gates[buf.slots(t)[0]])
        step(t)
        h = out[t]
    di = buf.M[:, :, 0].mean(-1)
    df = 1.0 - buf.M[:, :, 1].mean(-1)
    return buf.out, buf.cs[buf.slots(T - 1)[2]], df, di, buf


class TorchBackCell:
    """The gate math of one backward step in PyTorch ops (the module docstring's equations),
    reading the saved :class:`ForwardBuffers` and writing ``δz_t`` into ``dG[t]``.

    ``__call__(t, dh)``: ``dh`` is ``δh_t`` from step ``t + 1`` (``None`` at the last step when
    no gradient reaches ``h_T``), to which ``dout[t]`` is added; ``dc`` holds ``δc_t`` from step
    ``t + 1`` and is turned into ``δc_{t-1}`` in place. ``level_grad`` (T, B, 2):
    ``[δdi_t, −δdf_t] / L``, or ``None``. Views and scratch are made once per sequence.
    """

    def __init__(self, buffers: ForwardBuffers, symmetric: bool, dG: Tensor, dc: Tensor,
                 dout: Tensor | None, level_grad: Tensor | None) -> None:
        buf = self.b = buffers
        T, B, H, L, C = buf.T, buf.B, buf.H, buf.L, buf.C
        new = buf.gates.new_empty
        self.symmetric, self.dc, self.dout = symmetric, dc, dout
        self.v, self.dv = buf.gate_views(buf.gates), buf.gate_views(dG)
        self.P = buf.P.unbind(0)
        self.Msw = buf.M.flip(2).unbind(0)                              # [f̃, ĩ] per step
        self.W4 = (buf.M[:, :, 0] * buf.M[:, :, 1]).view(T, B, 1, L, 1).unbind(0)   # ω
        self.hi, self.hf = buf.hat[:, :, 0].unbind(0), buf.hat[:, :, 1].unbind(0)
        self.cs, self.tc = buf.cs.unbind(0), buf.tanh_c.unbind(0)
        self.level = None if level_grad is None else level_grad.unsqueeze(-1).unbind(0)
        self.zeros = buf.gates.new_zeros(B, H) if dout is None else None   # δh_T without one
        # scratch
        self.tmp, self.ab, self.q = new(B, H), new(B, 2, H), new(B, 2, H)
        self.ab0, self.ab1, self.ab4 = self.ab[:, 0], self.ab[:, 1], self.ab.view(B, 2, L, C)
        self.s, self.qs, self.dm, self.dp, self.dzm = (new(B, 2, L) for _ in range(5))
        self.dp1, self.dm1 = self.dp[:, 1], self.dm[:, 1]
        self.dw = new(B, L)
        self.dw3 = self.dw.view(B, 1, L)
        self.ones = buf.gates.new_ones(C)
        self.sign = buf.gates.new_ones(1, 2, 1)                     # [1, −1], made on the device
        self.sign[:, 1].fill_(-1.0)

    def __call__(self, t: int, dh: Tensor | None) -> None:
        v, dv, dc, tmp, ab, s, dm, dp = (self.v, self.dv, self.dc, self.tmp, self.ab, self.s,
                                         self.dm, self.dp)
        C = self.b.C
        if self.dout is not None:
            dh = self.dout[t] if dh is None else dh.add_(self.dout[t])
        if dh is None:
            dh = self.zeros
        o, g, i_f, tc = v["o"][t], v["g"][t], v["if"][t], self.tc[t]
        # output gate; δc += δh∘o∘(1 − tanh² c_t)
        torch.mul(dh, tc, out=tmp)
        _aten.sigmoid_backward.grad_input(tmp, o, grad_input=dv["o"][t])
        torch.mul(dh, o, out=tmp)
        _aten.tanh_backward.grad_input(tmp, tc, grad_input=tmp)
        dc.add_(tmp)
        # ab = [δc∘ĉ, δc∘c_{t-1}] pairs with [i, f] and (summed per level) with [ĩ, f̃]
        torch.mul(dc, g, out=self.ab0)
        torch.mul(dc, self.cs[t], out=self.ab1)
        torch.mv(ab.view(-1, C), self.ones, out=s.view(-1))         # Σ_C ab
        torch.mul(ab, i_f, out=self.q)
        torch.mv(self.q.view(-1, C), self.ones, out=self.qs.view(-1))   # Σ_C ab∘[i, f]
        torch.sum(self.qs.sub_(s), 1, out=self.dw)                  # δω
        dzif = dv["if4"][t]
        torch.mul(self.ab4, self.W4[t], out=dzif)
        _aten.sigmoid_backward.grad_input(dzif, v["if4"][t], grad_input=dzif)  # δz_i, δz_f
        torch.mul(dc, self.hi[t], out=tmp)
        _aten.tanh_backward.grad_input(tmp, g, grad_input=dv["g"][t])         # δz_ĉ
        # δĩ, δf̃; then back through the cumulative sums and the softmax
        torch.addcmul(s, self.dw3, self.Msw[t], out=dm)
        if self.level is not None:
            dm.add_(self.level[t])
        torch.cumsum(dm, -1, out=dp)
        if self.symmetric:              # δp̃_i = cumsum(δĩ); δp̃_f ≡ δf̃ − cumsum(δf̃)
            torch.sub(self.dm1, self.dp1, out=self.dp1)
        else:                           # δp̃_i ≡ cumsum(δĩ) − δĩ; δp̃_f ≡ δf̃ − cumsum(δf̃)
            dp.sub_(dm).mul_(self.sign)
        _aten._softmax_backward_data.out(dp, self.P[t], -1, dp.dtype, grad_input=self.dzm)
        dv["m2"][t].copy_(self.dzm.view(-1, 2 * self.b.L))
        dc.mul_(self.hf[t])                                         # δc_{t-1}


TorchCell.Backward = TorchBackCell


class BackCell(Protocol):
    """What :func:`onlstm_backward_loop` runs per step: :class:`TorchBackCell`'s contract."""

    def __init__(self, buffers: ForwardBuffers, symmetric: bool, dG: Tensor, dc: Tensor,
                 dout: Tensor | None, level_grad: Tensor | None) -> None: ...

    def __call__(self, t: int, dh: Tensor | None) -> None: ...


def onlstm_backward_loop(dout: Tensor | None, dh_last: Tensor | None, dc_last: Tensor | None,
                         ddf: Tensor | None, ddi: Tensor | None, h0: Tensor, weight_hh: Tensor,
                         buf: ForwardBuffers, symmetric: bool, need_weight: bool,
                         back: type[BackCell] = TorchBackCell,
                         gemm_dtype: torch.dtype | None = None
                         ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """BPTT through the saved forward buffers (see the module docstring for the equations).

    Returns ``dxp`` (T, B, G) (= δz for every step), ``dh0``, ``dc0`` (B, H) and ``dU`` (G, H)
    (``None`` unless ``need_weight``). ``back`` is the per-step gate math
    (:class:`TorchBackCell`, or a kernel with its contract); per step it runs once, followed by
    the recurrent product ``δh_{t-1} = δz_t U``. ``gemm_dtype``: as for the forward loop (the
    weight gradient's product too).
    """
    T, B, H, L = buf.T, buf.B, buf.H, buf.L
    G = buf.gates.shape[-1]
    dG = buf.gates.new_empty(T, B, G)
    level_grad = None
    if ddf is not None or ddi is not None:          # δdf_t, δdi_t reach every level as ∓1/L
        zero = buf.M.new_zeros(T, B)
        level_grad = torch.stack(
            (zero if ddi is None else ddi, zero if ddf is None else -ddf), -1
        ).div_(L)                                   # (T, B, 2), contiguous
    contiguous = torch.contiguous_format
    dc = (buf.gates.new_zeros(B, H) if dc_last is None
          else dc_last.clone(memory_format=contiguous))
    step = back(buf, symmetric, dG, dc, dout, level_grad)
    recurrent_t = step_matmul(weight_hh, B, T, True, gemm_dtype)  # δz (B, G) -> δz U (B, H)
    # δh_{t-1} written in place by torch.mm; a packed CPU product returns its own result
    dh_out = buf.gates.new_empty(B, H) if recurrent_t.in_place else None
    dh = None if dh_last is None else dh_last.clone(memory_format=contiguous)
    dz_all = dG.unbind(0)
    for t in range(T - 1, -1, -1):
        step(t, dh)
        dh = recurrent_t(dz_all[t], out=dh_out)
    assert dh is not None
    dU = weight_grad(dG, h0, buf.out, gemm_dtype, weight_hh.dtype) if need_weight else None
    return dG, dh, dc, dU


class ONLSTMFunction(torch.autograd.Function):
    """Whole-sequence ON-LSTM recurrence: ``(xp, h0, c0, weight_hh) -> (out, h_T, c_T, df, di)``.

    ``xp`` (T, B, G) are the input projections including both biases, ``h0``, ``c0`` (B, H),
    ``weight_hh`` (G, H) (possibly a DropConnect-dropped copy; its gradient is returned).
    """

    @staticmethod
    def forward(ctx: Any, xp: Tensor, h0: Tensor, c0: Tensor, weight_hh: Tensor, n_levels: int,
                symmetric: bool, cell: CellFactory = TorchCell,
                gemm_dtype: torch.dtype | None = None
                ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        save = any(ctx.needs_input_grad[:4])
        out, c_last, df, di, buf = onlstm_forward_loop(xp, h0, c0, weight_hh, n_levels,
                                                       symmetric, save, cell, gemm_dtype)
        ctx.symmetric, ctx.gemm_dtype = symmetric, gemm_dtype
        ctx.back = getattr(cell, "Backward", TorchBackCell)
        if save:
            ctx.save_for_backward(h0, weight_hh, *buf.tensors())
        return out, out[-1].clone(), c_last.clone(), df, di

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dout: Tensor | None, dh_last: Tensor | None, dc_last: Tensor | None,
                 ddf: Tensor | None, ddi: Tensor | None) -> tuple[Tensor | None, ...]:
        h0, weight_hh, *saved = ctx.saved_tensors
        buf = ForwardBuffers.restore(tuple(saved))
        need = ctx.needs_input_grad
        # under autocast the backward may run inside the autocast region too: its own products
        # are cast explicitly (gemm_dtype), nothing else is to be cast
        with no_autocast(h0.device.type, ctx.gemm_dtype is not None):
            dG, dh0, dc0, dU = onlstm_backward_loop(
                dout, dh_last, dc_last, ddf, ddi, h0, weight_hh, buf, ctx.symmetric, need[3],
                ctx.back, ctx.gemm_dtype,
            )
        return (dG if need[0] else None, dh0 if need[1] else None, dc0 if need[2] else None,
                dU, None, None, None, None)


def onlstm_torch_sequence(x: Tensor, state: tuple[Tensor, Tensor], weight_ih: Tensor,
                          bias_ih: Tensor, weight_hh: Tensor, bias_hh: Tensor, n_levels: int,
                          master_input: str, cell: CellFactory = TorchCell,
                          xp: Tensor | None = None) -> LayerOutput:
    """Fused ON-LSTM layer: x (T, B, I), state ``(h0, c0)`` each (B, H); ``xp`` (T, B, G): the
    input part already made (:func:`treelm.kernels.sequence.input_part`; evaluation only).

    Returns ``out`` (T, B, H), ``(h_T, c_T)`` and ``{"df": (T, B), "di": (T, B)}``; all are
    differentiable (the levels included) with respect to every argument tensor.

    Under ``torch.autocast`` (for ``x``'s device; bfloat16 on CPU, bfloat16 or float16 on CUDA)
    the matrix products run in the autocast dtype and everything else in float32:

    * low precision: the input projection ``x W_ihᵀ`` (autocast's ``F.linear``, and its
      gradients), each step's ``h_{t-1} Uᵀ`` and ``δz_t U`` (operands rounded to the autocast
      dtype, :class:`treelm.kernels.gemm.CastMatmul`) and the weight gradient ``δzᵀ h``;
    * float32: the pre-activations ``z_t`` (the two products' sum), the master gates' softmax and
      cumulative sums ``p̃``, ``ĩ``, ``f̃``, the gates and ``î``, ``f̂``, the cell state ``c_t`` and
      ``tanh(c_t)``, the output ``h_t`` (returned in float32), ``df``, ``di``, and in the
      backward ``δz``, ``δh``, ``δc`` and every per-level sum. ``h0``, ``c0`` are taken as
      float32, and the weight gradient is returned in the weight's dtype.
    """
    xp, h0, c0, symmetric, low, grad = project_inputs(x, state, weight_ih, bias_ih, weight_hh,
                                                      bias_hh, master_input, xp=xp)
    with no_autocast(x.device.type, low is not None):
        if grad:
            out, h, c, df, di = ONLSTMFunction.apply(xp, h0, c0, weight_hh, n_levels, symmetric,
                                                     cell, low)
        else:
            out, c, df, di, _ = onlstm_forward_loop(xp, h0, c0, weight_hh, n_levels, symmetric,
                                                    False, cell, low)
            h = out[-1]
    return out, (h, c), {"df": df, "di": di}


def project_inputs(x: Tensor, state: tuple[Tensor, Tensor], weight_ih: Tensor, bias_ih: Tensor,
                   weight_hh: Tensor, bias_hh: Tensor, master_input: str, takes_bf16: bool = False,
                   xp: Tensor | None = None
                   ) -> tuple[Tensor, Tensor, Tensor, bool, torch.dtype | None, bool]:
    """What every fused ON-LSTM path does before its time loop
    (:func:`treelm.kernels.sequence.project_inputs`, ``xp`` given or made), with the master
    input gate's variant checked; returns ``(xp, h0, c0, symmetric, autocast dtype or None,
    whether a gradient is wanted)``."""
    symmetric = is_symmetric(master_input)
    xp, h0, c0, low, grad = project(x, state, weight_ih, bias_ih, weight_hh, bias_hh, takes_bf16,
                                    xp)
    return xp, h0, c0, symmetric, low, grad


def is_symmetric(master_input: str) -> bool:
    """Whether the master input gate is Su's symmetric one (else the paper's ``1 − cumax``);
    any other name is refused."""
    if master_input not in ("paper", "symmetric"):
        raise ValueError(f"unknown master_input {master_input!r}")
    return master_input == "symmetric"
