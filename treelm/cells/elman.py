"""Elman simple recurrent network (Elman 1990): the recurrence comes from the hidden layer.

    h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)

Same parameters and numbers as ``torch.nn.RNN(nonlinearity="tanh")``. State ``(h,)``, (B, H).
``impl="auto"`` runs tanh and relu through PyTorch's fused RNN kernel (``torch.rnn_tanh`` /
``torch.rnn_relu``, the one behind ``nn.RNN``); ``impl="reference"`` and ``linear`` run :meth:`step`
in a loop over time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from treelm.cells.base import Cell, State
from treelm.kernels import gemm


class Elman(Cell):
    def __init__(self, input_size: int, hidden_size: int, nonlinearity: str = "tanh",
                 impl: str = "auto") -> None:
        super().__init__(input_size, hidden_size)
        if nonlinearity not in ("tanh", "relu", "linear"):
            raise ValueError(f"unknown nonlinearity {nonlinearity!r}: tanh, relu or linear")
        if impl not in ("auto", "reference"):
            raise ValueError(f"unknown impl {impl!r}: auto or reference")
        self.nonlinearity = nonlinearity
        self.impl = impl
        self.gate_parameters(1)
        self.init_uniform()

    def step(
        self, x_t: Tensor, xp_t: Tensor | None, state: State, w: dict[str, Tensor]
    ) -> tuple[Tensor, State, dict[str, Tensor]]:
        # gemm.linear = F.linear on the GEMM backend measured fastest for the loop
        pre = xp_t + gemm.linear(state[0], w["weight_hh"], self.bias_hh)
        h = {"tanh": torch.tanh, "relu": torch.relu, "linear": lambda v: v}[self.nonlinearity](pre)
        return h, (h,), {}

    def kernel(self) -> Callable[..., Any] | None:
        return {"tanh": torch.rnn_tanh, "relu": torch.rnn_relu}.get(self.nonlinearity)
