"""The step-function protocol and decoder-state helpers shared by every decoder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor

Step = Callable[[Tensor, Any], tuple[Tensor, Any]]
"""``step(tokens (B,) or (T, B) int64, state) -> (logits (B, V), state)``."""


def map_state(state: Any, fn: Callable[[Tensor], Tensor]) -> Any:
    """Apply ``fn`` to every tensor of a nested tuple / list / dict state (``None`` kept)."""
    if state is None:
        return None
    if isinstance(state, Tensor):
        return fn(state)
    if isinstance(state, tuple):
        return tuple(map_state(s, fn) for s in state)
    if isinstance(state, list):
        return [map_state(s, fn) for s in state]
    if isinstance(state, dict):
        return {k: map_state(v, fn) for k, v in state.items()}
    raise TypeError(f"cannot reorder a decoder state of type {type(state).__name__}")


def reorder_state(state: Any, index: Tensor, batch_dim: int = 0) -> Any:
    """Select rows ``index`` (N,) along ``batch_dim`` of every tensor in ``state``.

    Used by beam search to follow the surviving beams (and, with a repeated index, to expand a
    batch of B states into B·K beams). A state tensor of shape ``(B, H)`` becomes ``(N, H)``;
    with ``batch_dim=1`` an ``(L, B, H)`` state (``torch.nn.LSTM``'s layout) becomes ``(L, N, H)``.
    """
    return map_state(state, lambda t: t.index_select(batch_dim, index.to(t.device)))
