"""The step function of a language model, for the decoders of :mod:`treelm.decode`.

Any model with ``step(tokens, states) -> (logits (B, V), states)`` (incremental decoding, e.g.
:meth:`treelm.models.lm.RNNLM.step`) plugs in; this adapter only adds ``prime``.
"""

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
        return self.model.step(tokens, states)

    @torch.no_grad()
    def prime(self, prompts: Tensor) -> tuple[Tensor, Any]:
        """Run the prompt (T, B) from the zero state: (logits (B, V) for the next symbol, state)."""
        return self(prompts, None)
