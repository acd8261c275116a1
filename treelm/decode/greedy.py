"""Greedy decoding: the most likely next symbol at every step (beam search with one beam, and the
temperature-0 limit of sampling)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from treelm.decode.state import Step


@torch.no_grad()
def greedy_decode(
    step: Step, logits: Tensor, state: Any, length: int, eos: int | None = None
) -> Tensor:
    """Decode up to ``length`` symbols from primed ``logits`` (B, V) and ``state``.

    Returns (L, B) int64, ``L <= length``. With ``eos`` set, a sequence that produced ``eos`` is
    finished: it keeps emitting ``eos`` (padding) and decoding stops once every sequence is done.
    """
    out: list[Tensor] = []
    done = torch.zeros(logits.size(0), dtype=torch.bool, device=logits.device)
    for i in range(length):
        tok = logits.argmax(-1)
        if eos is not None:
            tok = tok.masked_fill(done, eos)
            done = done | (tok == eos)
        out.append(tok)
        if i + 1 == length or bool(done.all()):
            break
        logits, state = step(tok, state)
    if not out:
        return torch.empty(0, logits.size(0), dtype=torch.long, device=logits.device)
    return torch.stack(out)
