"""LSTM (Hochreiter & Schmidhuber 1997, with the forget gate of Gers et al. 2000) and optional
peephole connections (Gers, Schraudolph & Schmidhuber 2002).

    i_t = σ(W_ii x_t + W_hi h_{t-1} + p_i ∘ c_{t-1} + b_i)
    f_t = σ(W_if x_t + W_hf h_{t-1} + p_f ∘ c_{t-1} + b_f)
    g_t = tanh(W_ig x_t + W_hg h_{t-1} + b_g)
    c_t = f_t ∘ c_{t-1} + i_t ∘ g_t
    o_t = σ(W_io x_t + W_ho h_{t-1} + p_o ∘ c_t + b_o)
    h_t = o_t ∘ tanh(c_t)

Parameters use ``torch.nn.LSTM``'s layout (rows ``[i | f | g | o]``, separate ``bias_ih`` and
``bias_hh``), so weights copy across. Without peepholes and with ``impl="auto"`` the whole sequence
runs in a fused kernel: PyTorch's (oneDNN on CPU, cuDNN on GPU), or under CPU autocast treelm's
C++ loop (:mod:`treelm.kernels.lstm_cxx`: bfloat16 products, float32 gates and state, which
oneDNN's bfloat16 LSTM does not keep); ``impl="reference"`` always runs the readable loop below.
State ``(h, c)``, each (B, H).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from treelm.cells.base import Cell, State
from treelm.kernels import gemm
from treelm.kernels.lstm_cxx import lstm_cxx_sequence


class LSTM(Cell):
    def __init__(
        self, input_size: int, hidden_size: int, peephole: bool = False, impl: str = "auto"
    ) -> None:
        super().__init__(input_size, hidden_size)
        self.peephole = peephole
        self.impl = impl
        self.gate_parameters(4)             # [i, f, g, o]
        if peephole:  # diagonal: one weight per cell for i, f, o
            self.weight_peep = nn.Parameter(torch.empty(3, hidden_size))
        self.init_uniform()

    def state_sizes(self) -> tuple[int, ...]:
        return (self.hidden_size, self.hidden_size)

    def step(
        self, x_t: Tensor, xp_t: Tensor | None, state: State, w: dict[str, Tensor]
    ) -> tuple[Tensor, State, dict[str, Tensor]]:
        h, c = state
        # gemm.linear = F.linear on the GEMM backend measured fastest for the loop (what the
        # peephole LSTM, which has no fused path, trains with)
        i, f, g, o = (xp_t + gemm.linear(h, w["weight_hh"], self.bias_hh)).chunk(4, 1)
        if self.peephole:
            p_i, p_f, p_o = self.weight_peep
            i, f = i + p_i * c, f + p_f * c
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        if self.peephole:
            o = o + p_o * c
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, (h, c), {}

    def kernel(self) -> Callable[..., Any] | None:
        return None if self.peephole else torch.lstm        # peepholes: the loop

    def fused(
        self, x: Tensor, state: State | None, weights: dict[str, Tensor] | None
    ) -> tuple[Tensor, State, dict[str, Tensor]] | None:
        """:meth:`Cell.fused`, except under CPU autocast, where the C++ loop runs (None where it
        cannot: the step loop runs)."""
        if self.peephole or not (x.device.type == "cpu" and torch.is_autocast_enabled("cpu")):
            return super().fused(x, state, weights)
        if state is None:
            state = self.init_state(x.size(1), x.new_empty(0, dtype=torch.float32))  # no copy of x
        w_hh = self.weight_hh if weights is None else weights["weight_hh"]
        res = lstm_cxx_sequence(x, state, self.weight_ih, self.bias_ih, w_hh, self.bias_hh)
        return None if res is None else (*res, {})
