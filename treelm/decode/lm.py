"""The step-function adapter for :class:`treelm.models.lm.RNNLM` (and any model with its
``forward(tokens (T, B), states) -> output with .logits (T, B, V) and .states``)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn


class LMStep:
    """``LMStep(model)(tokens, states) -> (logits (B, V), states)``.

    ``tokens`` (B,) feeds one symbol per sequence, (T, B) a whole prefix (the logits are then those
    after its last symbol). ``states`` is the model's per-layer list of state tuples, each tensor
    (B, ·), so beam search can reorder it along dim 0; ``None`` is the zero state.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def __call__(self, tokens: Tensor, states: Any) -> tuple[Tensor, Any]:
        if tokens.dim() == 1:
            tokens = tokens.unsqueeze(0)
        out = self.model(tokens, states)
        return out.logits[-1], out.states

    @torch.no_grad()
    def prime(self, prompts: Tensor) -> tuple[Tensor, Any]:
        """Run the prompt (T, B) from the zero state: (logits (B, V) for the next symbol, state)."""
        return self(prompts, None)
