"""GRU (Cho et al. 2014), in the form and parameter layout of ``torch.nn.GRU``:

    r_t = σ(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)
    z_t = σ(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)
    n_t = tanh(W_in x_t + b_in + r_t ∘ (W_hn h_{t-1} + b_hn))
    h_t = (1 − z_t) ∘ n_t + z_t ∘ h_{t-1}

(Cho et al. apply r before the product, ``W_hn (r ∘ h)``; cuDNN's form above is what every fast
kernel implements.) With ``impl="auto"`` it runs PyTorch's fused kernel; ``"reference"`` the loop.
State ``(h,)``, (B, H).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from treelm.cells.base import Cell, State
from treelm.kernels import gemm


class GRU(Cell):
    def __init__(self, input_size: int, hidden_size: int, impl: str = "auto") -> None:
        super().__init__(input_size, hidden_size)
        self.impl = impl
        self.gate_parameters(3)             # [r, z, n]
        self.init_uniform()

    def step(
        self, x_t: Tensor, xp_t: Tensor | None, state: State, w: dict[str, Tensor]
    ) -> tuple[Tensor, State, dict[str, Tensor]]:
        h = state[0]
        xr, xz, xn = xp_t.chunk(3, 1)
        # gemm.linear = F.linear on the GEMM backend measured fastest for the loop
        hr, hz, hn = gemm.linear(h, w["weight_hh"], self.bias_hh).chunk(3, 1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        h = (1 - z) * torch.tanh(xn + r * hn) + z * h
        return h, (h,), {}

    def kernel(self) -> Callable[..., Any]:
        return torch.gru
