"""A stack of recurrent layers with per-layer sizes (e.g. 400 → 1150 → 1150 → 400).

``sizes[0]`` is the input size, layer ``l`` maps ``sizes[l] → sizes[l+1]``. Between layers the
output is passed through locked dropout ``dropouth``; every layer's recurrent weights get
DropConnect ``wdrop`` (AWD-LSTM). x: (T, B, sizes[0]) -> out: (T, B, sizes[-1]).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn

from treelm.cells import State, make_cell
from treelm.nn.dropout import locked_dropout, weight_drop


@dataclass
class StackOutput:
    out: Tensor                                    # last layer, (T, B, sizes[-1]), not dropped
    states: list[State]                            # final state of every layer
    raw: list[Tensor] = field(default_factory=list)    # each layer's output before dropout
    aux: list[dict[str, Tensor]] = field(default_factory=list)  # per-layer diagnostics (T, B)


class RNNStack(nn.Module):
    def __init__(
        self,
        cell: str,
        sizes: list[int],
        dropouth: float = 0.0,
        wdrop: float = 0.0,
        cell_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if len(sizes) < 2:
            raise ValueError(f"sizes needs an input size and a layer at least, got {sizes}")
        self.sizes = list(sizes)
        self.dropouth = dropouth
        self.wdrop = wdrop
        opts = cell_options or {}
        layers: list[nn.Module] = []
        n_in = sizes[0]
        for n_out in sizes[1:]:
            layer = make_cell(cell, n_in, n_out, **opts)
            layers.append(layer)
            n_in = layer.output_size
        self.layers = nn.ModuleList(layers)

    @property
    def output_size(self) -> int:
        return self.layers[-1].output_size

    def forward(self, x: Tensor, states: list[State] | None = None, xp: Tensor | None = None
                ) -> StackOutput:
        """``xp``: the first layer's input part for ``x``, made by the caller from the layer's
        :meth:`~treelm.cells.base.Cell.input_part` (evaluation)."""
        result = StackOutput(out=x, states=[])
        for l, layer in enumerate(self.layers):
            weights = {k: weight_drop(v, self.wdrop, self.training)
                       for k, v in layer.recurrent().items()}
            state = None if states is None else states[l]
            x, state, aux = (layer(x, state, weights) if xp is None or l else
                             layer(x, state, weights, xp=xp))
            result.states.append(state)
            result.raw.append(x)
            result.aux.append(aux)
            if l < len(self.layers) - 1:
                x = locked_dropout(x, self.dropouth, self.training)
        result.out = result.raw[-1]
        return result
