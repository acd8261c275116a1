"""Sampling from a step function: temperature, top-k and top-p (nucleus) truncation.

Given logits ``z`` (B, V), the next symbol is drawn from ``softmax(z / τ)`` restricted to

* the ``k`` most likely symbols (top-k; Fan, Lewis & Dauphin 2018), and/or
* the *nucleus*: the smallest set of most likely symbols whose total probability reaches ``p``
  (top-p; Holtzman, Buys, Du, Forbes & Choi, "The Curious Case of Neural Text Degeneration",
  ICLR 2020), renormalised.

``τ = 0`` is greedy decoding (argmax); ``τ → 0`` approaches it, ``τ = 1`` samples the model's own
distribution as in the character-level samples of Sutskever, Martens & Hinton (ICML 2011). Draws
use an explicit ``torch.Generator``, so a seed reproduces a sample exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from treelm.decode.state import Step


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Set all but the ``k`` largest logits of each row (B, V) to ``-inf``."""
    if k < 1:
        raise ValueError(f"top-k needs k >= 1, got {k}")
    if k >= logits.size(-1):
        return logits
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Keep, per row of ``logits`` (B, V), the smallest set of most likely symbols whose
    probability reaches ``p`` (Holtzman et al. 2020); the others become ``-inf``.

    A symbol is kept when the probability of the symbols ranked above it is still below ``p``, so
    the most likely symbol is always kept and ``p = 1`` keeps everything.
    """
    if not 0.0 < p <= 1.0:
        raise ValueError(f"top-p needs 0 < p <= 1, got {p}")
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(-1)
    before = probs.cumsum(-1) - probs                      # mass ranked strictly above
    drop_sorted = before >= p
    drop = drop_sorted.scatter(-1, order, drop_sorted)     # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def filter_logits(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> Tensor:
    """``logits / temperature`` (B, V), then top-k, then top-p truncation (``-inf`` outside)."""
    if temperature <= 0:
        raise ValueError(f"filter_logits needs temperature > 0, got {temperature}")
    z = logits.float() / temperature
    if top_k is not None:
        z = top_k_filter(z, top_k)
    if top_p is not None:
        z = top_p_filter(z, top_p)
    return z


def sample_next(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """One symbol per row of ``logits`` (B, V) -> (B,) int64. ``temperature == 0``: argmax."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return logits.argmax(-1)
    probs = filter_logits(logits, temperature, top_k, top_p).softmax(-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def sample_stream(
    step: Step,
    logits: Tensor,
    state: Any,
    length: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Iterator[Tensor]:
    """Yield ``length`` symbols (each (B,)) one at a time, starting from the primed ``logits``
    (B, V) and ``state`` (e.g. after feeding a prompt through ``step``). ``<eos>`` does not stop
    the stream: a language model simply starts a new line."""
    for i in range(length):
        tok = sample_next(logits, temperature, top_k, top_p, generator)
        yield tok
        if i + 1 < length:
            logits, state = step(tok, state)


def sample(step: Step, logits: Tensor, state: Any, length: int, **options: Any) -> Tensor:
    """All of :func:`sample_stream` at once: (length, B) int64; ``options`` are its own
    (``temperature``, ``top_k``, ``top_p``, ``generator``)."""
    toks = list(sample_stream(step, logits, state, length, **options))
    if not toks:
        return torch.empty(0, logits.size(0), dtype=torch.long, device=logits.device)
    return torch.stack(toks)
