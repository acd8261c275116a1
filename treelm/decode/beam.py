"""Beam search over a step function, batched over beams (and over a batch of inputs).

Each of ``B`` inputs keeps ``K`` hypotheses; all ``B·K`` run through ``step`` as one batch. At
every step each hypothesis is extended by every symbol, and the ``K`` best of the ``K·V``
candidates survive; the decoder state follows its hypothesis by ``index_select`` along the batch
dimension of every state tensor (:func:`treelm.decode.state.reorder_state`, any nesting of
tuples / lists / dicts).

* ``<eos>`` ends a hypothesis: it stays in the beam with its score frozen (its only continuation is
  a free padding ``<eos>``) and competes with the live ones; the search stops when all ``K`` beams
  of every input have ended, or after ``max_len`` symbols.
* Length handling: hypotheses are ranked by ``log p(y) / lp(|y|)`` with the length penalty of Wu et
  al. (2016), ``lp(n) = ((5 + n) / 6)^α``. ``α = 0`` (default) ranks by the plain log-probability,
  i.e. searches for the most probable sequence; ``α > 0`` favours longer outputs. ``min_len``
  forbids ``<eos>`` before that many symbols.

Beam search with ``K = 1`` is greedy decoding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from treelm.decode.state import Step, reorder_state


@dataclass
class Hypothesis:
    tokens: list[int]       # the decoded symbols, the final <eos> included when it ended
    logprob: float          # Σ log p(y_i | y_<i, prefix), natural log
    score: float            # ranking score logprob / lp(len(tokens))
    finished: bool          # ended with <eos> (else cut at max_len)


def length_penalty(length: Tensor, alpha: float) -> Tensor:
    """``lp(n) = ((5 + n) / 6)^α`` (Wu et al. 2016, GNMT); 1 when ``α = 0``."""
    return ((5.0 + length.float()) / 6.0).pow(alpha)


@torch.no_grad()
def beam_search(
    step: Step,
    logits: Tensor,
    state: Any,
    beam_size: int,
    max_len: int,
    eos: int | None = None,
    alpha: float = 0.0,
    min_len: int = 0,
    n_best: int | None = None,
    batch_dim: int = 0,
) -> list[list[Hypothesis]]:
    """Beam search from primed ``logits`` (B, V) and ``state`` (batch size B along ``batch_dim``).

    Returns, for each of the B inputs, up to ``n_best`` (default ``beam_size``) hypotheses, best
    first. ``state`` is expanded to B·K rows (input-major: rows ``b·K … b·K + K − 1`` are the beams
    of input ``b``) and ``step`` is always called with ``tokens`` (B·K,).
    """
    if beam_size < 1:
        raise ValueError(f"beam size must be >= 1, got {beam_size}")
    B, V = logits.shape
    K = beam_size
    dev = logits.device
    expand = torch.arange(B, device=dev).repeat_interleave(K)
    state = reorder_state(state, expand, batch_dim)
    logits = logits.index_select(0, expand)
    scores = torch.full((B, K), float("-inf"), device=dev)
    scores[:, 0] = 0.0                  # only the first copy is live at the start
    lengths = torch.zeros(B * K, dtype=torch.long, device=dev)
    finished = torch.zeros(B * K, dtype=torch.bool, device=dev)
    tokens = torch.zeros(B * K, 0, dtype=torch.long, device=dev)
    pad_row = None
    if eos is not None:
        pad_row = torch.full((V,), float("-inf"), device=dev)
        pad_row[eos] = 0.0
    base = (torch.arange(B, device=dev) * K).unsqueeze(1)            # (B, 1)
    for i in range(max_len):
        logp = logits.float().log_softmax(-1)                          # (B·K, V)
        if eos is not None:
            if i < min_len:
                logp[:, eos] = float("-inf")
            logp = torch.where(finished.unsqueeze(1), pad_row, logp)
        cand = scores.view(-1, 1) + logp                               # raw log-probs
        new_len = lengths + (~finished).long()
        rank = cand if alpha == 0 else cand / length_penalty(new_len, alpha).unsqueeze(1)
        top = rank.view(B, K * V).topk(K, dim=-1)
        src = (base + top.indices // V).view(-1)                        # (B·K,) rows followed
        tok = (top.indices % V).view(-1)
        scores = cand.view(B, K * V).gather(-1, top.indices)
        lengths = new_len.index_select(0, src)
        tokens = torch.cat([tokens.index_select(0, src), tok.unsqueeze(1)], 1)
        finished = finished.index_select(0, src) | torch.isinf(scores.view(-1))
        if eos is not None:
            finished = finished | (tok == eos)
        if bool(finished.all()) or i + 1 == max_len:
            break
        state = reorder_state(state, src, batch_dim)
        logits, state = step(tok, state)
    lp = length_penalty(lengths, alpha)
    results: list[list[Hypothesis]] = []
    flat_scores = scores.view(-1)
    for b in range(B):
        hyps = []
        for r in range(b * K, (b + 1) * K):
            lpr = float(flat_scores[r])
            if lpr == float("-inf"):
                continue
            n = int(lengths[r])
            seq = tokens[r, :n].tolist()
            ended = eos is not None and n > 0 and seq[-1] == eos
            hyps.append(Hypothesis(seq, lpr, lpr / float(lp[r]), ended))
        hyps.sort(key=lambda h: h.score, reverse=True)
        results.append(hyps[: n_best or K])
    return results
