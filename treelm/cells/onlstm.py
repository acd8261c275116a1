"""ON-LSTM: the LSTM with ordered neurons (Shen, Tan, Sordoni & Courville, ICLR 2019).

The hidden units are split into ``L = hidden_size / chunk_size`` levels. Two *master gates* over the
levels decide which part of the cell state is erased and which is written (paper Sec. 4):

    cumax(x) = cumsum(softmax(x))                                             (Eq. 6)
    f̃_t = cumax(W_f̃ x_t + U_f̃ h_{t-1} + b_f̃)         master forget gate    (Eq. 9)
    ĩ_t = 1 − cumax(W_ĩ x_t + U_ĩ h_{t-1} + b_ĩ)     master input gate     (Eq. 10)
    ω_t = f̃_t ∘ ĩ_t                                   overlap               (Eq. 11)
    f̂_t = f_t ∘ ω_t + (f̃_t − ω_t),  î_t = i_t ∘ ω_t + (ĩ_t − ω_t)          (Eq. 12-13)
    c_t = f̂_t ∘ c_{t-1} + î_t ∘ ĉ_t                                        (Eq. 14)

which is ``c_t = ω∘(f∘c_{t-1} + i∘ĉ) + (f̃−ω)∘c_{t-1} + (ĩ−ω)∘ĉ``. Each master-gate value is repeated
``chunk_size`` times, so level k covers neurons ``k*chunk_size … (k+1)*chunk_size - 1``; low levels
hold short-lived information, high levels long-lived. f, i, o, ĉ are the usual LSTM gates.

``master_input="symmetric"`` replaces Eq. 10 by the right-to-left cumulative softmax
``ĩ_k = Σ_{j ≥ k} softmax(x)_j`` (Su Jianlin, "ON-LSTM: 用有序神经元表达层次结构", 2019),
which unlike ``1 − cumax`` can write the top level.

Per step the cell reports the master-gate levels used for tree induction (the ``distance`` of the
official code): ``df = 1 − mean_k f̃_t(k)`` and ``di = mean_k ĩ_t(k)``, each ``(B,)``.

Parameter layout (as the official code): rows of ``weight_ih`` (G, I) and ``weight_hh`` (G, H),
``G = 4H + 2L``: ``[ĩ logits (L) | f̃ logits (L) | o (H) | ĉ (H) | i (H) | f (H)]``.
State: ``(h, c)``, each ``(B, H)``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from treelm.cells.base import Cell, State
from treelm.kernels.precision import up

MASTER_INPUT = ("paper", "symmetric")


def cumax(x: Tensor, dim: int = -1) -> Tensor:
    """Cumulative softmax (paper Eq. 6): monotone non-decreasing along ``dim``, in [0, 1]."""
    return torch.cumsum(F.softmax(x, dim=dim), dim=dim)


def rcumax(x: Tensor, dim: int = -1) -> Tensor:
    """Right-to-left cumulative softmax: ``out_k = Σ_{j ≥ k} softmax(x)_j``; non-increasing."""
    return torch.flip(cumax(torch.flip(x, (dim,)), dim), (dim,))


def master_gates(
    lin: Tensor, lf: Tensor, master_input: str
) -> tuple[Tensor, Tensor]:
    """Master input and forget gates ``(ĩ, f̃)``, each (B, L), from their logits (B, L)."""
    mf = cumax(lf)
    mi = 1.0 - cumax(lin) if master_input == "paper" else rcumax(lin)
    return mi, mf


def onlstm_update(
    gates: Tensor, c: Tensor, n_levels: int, master_input: str
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Eqs. 6-14 plus ``h_t = o ∘ tanh(c_t)``.

    ``gates`` (B, G) are the pre-activations; ``c`` (B, H). Returns ``h, c, df, di`` with
    ``df, di`` of shape (B,).
    """
    B, H = c.shape
    L = n_levels
    mi, mf = master_gates(gates[:, :L], gates[:, L : 2 * L], master_input)
    o, g, i, f = gates[:, 2 * L :].view(B, 4, L, H // L).unbind(1)
    o, g, i, f = torch.sigmoid(o), torch.tanh(g), torch.sigmoid(i), torch.sigmoid(f)
    c3 = c.view(B, L, H // L)
    mi3, mf3 = mi.unsqueeze(-1), mf.unsqueeze(-1)
    w = mf3 * mi3                                   # ω, (B, L, 1)
    f_hat = f * w + (mf3 - w)
    i_hat = i * w + (mi3 - w)
    c_new = (f_hat * c3 + i_hat * g).view(B, H)
    h_new = o.reshape(B, H) * torch.tanh(c_new)
    return h_new, c_new, 1.0 - mf.mean(-1), mi.mean(-1)


class ONLSTM(Cell):
    """One ON-LSTM layer (reference, readable per-step implementation).

    x: (T, B, input_size) -> out: (T, B, hidden_size); state ``(h, c)``; aux ``df``, ``di`` (T, B).
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        chunk_size: int = 10,
        master_input: str = "paper",
        impl: str = "auto",
        cuda_graphs: bool = True,
        cuda_graphs_max: int = 64,
    ) -> None:
        super().__init__(input_size, hidden_size)
        if hidden_size % chunk_size:
            raise ValueError(
                f"ON-LSTM hidden size {hidden_size} is not a multiple of chunk_size {chunk_size}"
            )
        if master_input not in MASTER_INPUT:
            raise ValueError(f"unknown master_input {master_input!r}; choose one of {MASTER_INPUT}")
        self.chunk_size = chunk_size
        self.n_levels = hidden_size // chunk_size
        self.master_input = master_input
        self.impl = impl  # "reference" (this file), "fused" (treelm.kernels) or "auto"
        # on CUDA, training steps (forward + backward) and inference (evaluation, decoding: the
        # forward alone) replayed from CUDA graphs (treelm.kernels.graphs), under autocast too;
        # no effect on the CPU; False: always the eager fused path
        self.cuda_graphs = cuda_graphs
        # sequence lengths captured at most (variable BPTT draws many; the others run eagerly):
        # each graph keeps its sequence's buffers on the GPU (treelm.kernels.graphs)
        self.cuda_graphs_max = cuda_graphs_max
        self._graphs: Any = None
        self.gate_parameters(4, extra=2 * self.n_levels)       # G = 4H + 2L rows, as above
        self.init_uniform()

    def state_sizes(self) -> tuple[int, ...]:
        return (self.hidden_size, self.hidden_size)

    def input_projection(self, x: Tensor) -> Tensor:
        return up(F.linear(x, self.weight_ih, self.bias_ih))    # one GEMM for all steps

    def step(
        self, x_t: Tensor, xp_t: Tensor | None, state: State, w: dict[str, Tensor]
    ) -> tuple[Tensor, State, dict[str, Tensor]]:
        h, c = state
        # plain F.linear on purpose (not gemm.linear): this loop is the oracle the fused kernels,
        # whose products go through treelm.kernels.gemm, are tested against
        # (under autocast the products' results come back to float32: gates and state stay so)
        gates = xp_t + up(F.linear(h, w["weight_hh"], self.bias_hh))
        h, c, df, di = onlstm_update(gates, c, self.n_levels, self.master_input)
        return h, (h, c), {"df": df, "di": di}

    def input_part(self, x: Tensor) -> Tensor | None:
        from treelm.kernels import onlstm_input_part

        if self.impl == "reference":    # its loop adds b_hh at each step: no part to hand over
            return None
        return onlstm_input_part(x, self.weight_ih, self.bias_ih, self.bias_hh, self.impl)

    def fused(
        self, x: Tensor, state: State | None, weights: dict[str, Tensor] | None,
        xp: Tensor | None = None,
    ) -> tuple[Tensor, State, dict[str, Tensor]]:
        from treelm.kernels import onlstm_sequence  # fused CPU / Triton paths, same numbers

        if state is None:
            state = self.init_state(x.size(1), x)
        w_hh = self.weight_hh if weights is None else weights["weight_hh"]
        if self.cuda_graphs and x.is_cuda and xp is None:
            if self._graphs is None:
                from treelm.kernels.graphs import GraphCache

                self._graphs = GraphCache(max_graphs=self.cuda_graphs_max)
            return self._graphs(
                x, state, self.weight_ih, self.bias_ih, w_hh, self.bias_hh,
                self.n_levels, self.master_input, impl=self.impl,
            )
        return onlstm_sequence(
            x, state, self.weight_ih, self.bias_ih, w_hh, self.bias_hh,
            self.n_levels, self.master_input, impl=self.impl, xp=xp,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.input_size}, {self.hidden_size}, chunk_size={self.chunk_size}, "
            f"master_input={self.master_input!r}"
        )
