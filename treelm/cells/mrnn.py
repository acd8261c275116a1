"""The Tensor RNN and the factored Multiplicative RNN of Sutskever, Martens & Hinton (ICML 2011),
"Generating Text with Recurrent Neural Networks".

Tensor RNN (their Eq. 2): the hidden-to-hidden matrix depends on the current input symbol,

    h_t = tanh(W_hx x_t + W_hh^{(x_t)} h_{t-1} + b_h),

one H×H matrix per symbol: ``weight_hh`` is (M, H, H), M·H² recurrent parameters. For a dense input
the matrix is the mixture ``Σ_m x_t[m] W^{(m)}``, which for a one-hot ``x_t`` is the paper's
selection; one-hot input (``embedding: onehot`` in a config) takes a gather instead of the mixture.

MRNN (their Eqs. 4-5): the tensor factored through F factors,

    f_t = diag(W_fx x_t) · W_fh h_{t-1}                  (B, F)
    h_t = tanh(W_hf f_t + W_hx x_t + b_h)                (B, H)

parameters W_fx (F, M), W_fh (F, H) = ``weight_hh``, W_hf (H, F), W_hx (H, M), b_h (H): F·(M + 2H)
+ H·M + H in all. This is the exact form of the paper (not the later "mLSTM" variant); the paper
trained it with Hessian-free optimisation, treelm uses first-order methods (Adam or RMSprop with
gradient clipping), which train it well at these sizes.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from treelm.cells.base import Cell, State
from treelm.kernels import gemm

MAX_TENSOR_PARAMS = 50_000_000


class TensorRNN(Cell):
    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__(input_size, hidden_size)
        M, H = input_size, hidden_size
        if M * H * H > MAX_TENSOR_PARAMS:
            raise ValueError(
                f"Tensor RNN would need M·H² = {M}·{H}² = {M * H * H:,} recurrent parameters "
                f"(limit {MAX_TENSOR_PARAMS:,}); use a smaller alphabet or hidden size, or the "
                "factored MRNN (cell: mrnn)"
            )
        self.weight_ih = nn.Parameter(torch.empty(H, M))
        self.weight_hh = nn.Parameter(torch.empty(M, H, H))
        self.bias = nn.Parameter(torch.empty(H))
        bound = 1.0 / math.sqrt(H)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(
        self, x: Tensor, state: State | None = None, weights: dict[str, Tensor] | None = None
    ) -> tuple[Tensor, State, dict[str, Tensor]]:
        T, B, M = x.shape
        H = self.hidden_size
        h = self.init_state(B, x)[0] if state is None else state[0]
        W = self.weight_hh if weights is None else weights["weight_hh"]
        xp = gemm.linear(x, self.weight_ih, self.bias)
        onehot = bool(((x == 0) | (x == 1)).all() and (x.sum(-1) == 1).all())
        if onehot:
            symbols = x.argmax(-1)                                   # (T, B)
        else:
            Wflat = W.permute(2, 0, 1).reshape(H, M * H)             # h @ Wflat -> (B, M·H)
        outs = []
        for t in range(T):
            if onehot:
                rec = torch.bmm(W[symbols[t]], h.unsqueeze(-1)).squeeze(-1)
            else:
                rec = torch.bmm(x[t].unsqueeze(1), (h @ Wflat).view(B, M, H)).squeeze(1)
            h = torch.tanh(xp[t] + rec)
            outs.append(h)
        return torch.stack(outs), (h,), {}


class MRNN(Cell):
    def __init__(self, input_size: int, hidden_size: int, factors: int | None = None) -> None:
        super().__init__(input_size, hidden_size)
        M, H = input_size, hidden_size
        self.factors = Fn = factors or hidden_size
        self.weight_fx = nn.Parameter(torch.empty(Fn, M))
        self.weight_hh = nn.Parameter(torch.empty(Fn, H))   # W_fh
        self.weight_hf = nn.Parameter(torch.empty(H, Fn))
        self.weight_hx = nn.Parameter(torch.empty(H, M))
        self.bias = nn.Parameter(torch.empty(H))
        for p in self.parameters():
            nn.init.uniform_(p, -1.0 / math.sqrt(p.size(-1)), 1.0 / math.sqrt(p.size(-1)))

    def input_projection(self, x: Tensor) -> Tensor:
        # both input-dependent terms for all steps at once: [W_fx x_t | W_hx x_t + b]
        return torch.cat(
            [gemm.linear(x, self.weight_fx), gemm.linear(x, self.weight_hx, self.bias)], -1
        )

    def step(
        self, x_t: Tensor, xp_t: Tensor | None, state: State, w: dict[str, Tensor]
    ) -> tuple[Tensor, State, dict[str, Tensor]]:
        fx, hx = xp_t[:, : self.factors], xp_t[:, self.factors :]
        # W_fh and W_hf are fixed over the sequence: gemm.linear (= F.linear) runs both products
        # on the backend measured fastest for the loop
        f = fx * gemm.linear(state[0], w["weight_hh"])
        h = torch.tanh(gemm.linear(f, self.weight_hf) + hx)
        return h, (h,), {}
