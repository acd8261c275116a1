"""Jordan simple recurrent network (Jordan 1986): the recurrence comes from the previous step's
*output* layer, not the hidden layer.

    h_t = σ_h(W_ih x_t + W_hy y_{t-1} + b_h)       hidden, (B, H)
    y_t = σ_y(W_yh h_t + b_y)                      output, (B, O)

``σ_h = sigmoid`` as in Jordan's and Mesnil et al.'s (2013) slot-filling nets; ``σ_y`` is ``tanh``
for use inside a stack or ``softmax`` for the original form in which the fed-back context is the
previous output distribution. The recurrent weight that DropConnect may drop is ``weight_hh``
(= W_hy, (H, O)). State ``(y,)``; output size ``O`` (``output_size``, default ``H``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from treelm.cells.base import Cell, State
from treelm.kernels import gemm

OUTPUT_ACTIVATIONS = {"tanh": torch.tanh, "sigmoid": torch.sigmoid,
                      "softmax": lambda v: F.softmax(v, -1)}


class Jordan(Cell):
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        output_size: int | None = None,
        output_activation: str = "tanh",
    ) -> None:
        super().__init__(input_size, hidden_size)
        if output_activation not in OUTPUT_ACTIVATIONS:
            raise ValueError(
                f"unknown output_activation {output_activation!r}: {sorted(OUTPUT_ACTIVATIONS)}"
            )
        self._out = output_size or hidden_size
        self.output_activation = output_activation
        self.weight_ih = nn.Parameter(torch.empty(hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, self._out))
        self.bias_ih = nn.Parameter(torch.empty(hidden_size))
        self.weight_ho = nn.Parameter(torch.empty(self._out, hidden_size))
        self.bias_ho = nn.Parameter(torch.empty(self._out))
        self.init_uniform()

    @property
    def output_size(self) -> int:
        return self._out

    def state_sizes(self) -> tuple[int, ...]:
        return (self._out,)

    def step(
        self, x_t: Tensor, xp_t: Tensor | None, state: State, w: dict[str, Tensor]
    ) -> tuple[Tensor, State, dict[str, Tensor]]:
        # both products are by weights fixed over the sequence: gemm.linear (= F.linear) runs them
        # on the GEMM backend measured fastest for the loop
        h = torch.sigmoid(xp_t + gemm.linear(state[0], w["weight_hh"]))
        y = OUTPUT_ACTIVATIONS[self.output_activation](
            gemm.linear(h, self.weight_ho, self.bias_ho))
        return y, (y,), {}
