"""Whole-sentence log-probabilities under a trained language model, many sentences at a time.

A sentence ``w_1 … w_n`` is read as a training line is: after an ``<eos>`` (every line of the
training stream follows one) and closed by one, so its score is

    log p(s) = Σ_{t=1..n+1} log p(w_t | <eos>, w_1 … w_{t−1}),      w_{n+1} = <eos>,

in nats, the final ``<eos>`` included: "the sentence ends here" is part of what the model says
about it (Marvin & Linzen 2018 likewise score the sentence-final symbol). Symbols come from the
run's tokenizer; one outside the vocabulary is read as ``<unk>`` and counted, so a caller can say
how many of its sentences the model saw only in part.

Batching: sentences are sorted by length and cut into batches of ``batch_size``; each batch is
padded *on the right* and goes through one forward pass ``(T, B) -> logits (T, B, V)`` from the
zero state. A recurrent model reads left to right, so padding after a sentence's closing
``<eos>`` never reaches the positions that are kept; the padded positions are masked out of the
sums. The log-softmax is taken as ``logit[target] − logsumexp(logits)`` in float32 and summed in
float64, so that two sentences that differ in one word are compared without rounding noise from
the rest. The model is the run's :class:`~treelm.models.lm.RNNLM` in eval mode (no dropout); its
``forward`` gives the logits of every position at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from treelm.progress import Ticker
from treelm.text import Tokenizer, Vocab
from treelm.threads import recurrence_threads


def encode_sentences(tokenizer: Tokenizer, vocab: Vocab,
                     sentences: Sequence[str]) -> tuple[list[list[int]], list[int]]:
    """Per sentence ``<eos> w_1 … w_n <eos>`` as ids, and how many of the ``w_t`` were outside the
    vocabulary (read as ``<unk>``)."""
    ids, unks = [], []
    for s in sentences:
        symbols = tokenizer.encode(s)
        unks.append(len(vocab.unknown(symbols)))
        ids.append([vocab.eos, *vocab.encode(symbols, "map"), vocab.eos])
    return ids, unks


@torch.no_grad()
def sentence_logprobs(model: nn.Module, vocab: Vocab, tokenizer: Tokenizer,
                      sentences: Sequence[str], batch_size: int = 128) -> tuple[Tensor, Tensor]:
    """``(log p(s) per sentence (N,) float64 in nats, <unk> symbols per sentence (N,) int64)``.

    See the module docstring for what is summed; the order of the results is that of
    ``sentences``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    ids, unks = encode_sentences(tokenizer, vocab, sentences)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = torch.zeros(len(ids), dtype=torch.float64)
    # length order: a batch holds sentences of (nearly) one length, so little is padding
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    try:
        tick = Ticker("scoring", len(ids), "sentences")
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            lengths = torch.tensor([len(ids[i]) for i in rows])
            grid = torch.full((int(lengths.max()), len(rows)), vocab.eos, dtype=torch.long)
            for b, i in enumerate(rows):
                grid[: len(ids[i]), b] = torch.tensor(ids[i])
            grid = grid.to(device)
            inputs, targets = grid[:-1], grid[1:]                       # (T, B) each
            with recurrence_threads(model, len(rows)):      # small steps: one thread
                logits = model(inputs).logits.float()                   # (T, B, V)
            logp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - logits.logsumexp(-1)
            # position t predicts symbol t+1: a sentence of L ids has L-1 predictions
            keep = torch.arange(inputs.size(0), device=device).unsqueeze(1) < (
                lengths.to(device) - 1).unsqueeze(0)
            sums = torch.where(keep, logp, torch.zeros_like(logp)).double().sum(0)
            out[torch.tensor(rows)] = sums.cpu()
            tick.update(len(rows))
        tick.close()
    finally:
        model.train(was_training)
    return out, torch.tensor(unks, dtype=torch.long)
