"""The language-modelling task: batches over a token stream, the AWD-LSTM loss, evaluation.

Loss per batch (Merity et al. 2018, Sec. 4.6):

    L = CE(logits, targets) + α · mean(h_dropped²) + β · mean((h_t − h_{t−1})²)

with AR on the last layer's dropped output and TAR on its raw output. Evaluation carries the hidden
state through the whole split (batch ``eval_batch_size``) and returns the mean loss per token in
nats; perplexity ``exp(loss)`` for words, bits per character ``loss / ln 2`` for characters.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from treelm.cells import State
from treelm.data.batching import BPTTSchedule, batchify, get_batch


@dataclass
class Batch:
    inputs: Tensor        # (T, B)
    targets: Tensor       # (T, B)
    row: int              # first row of this batch in the batched stream
    lr_scale: float       # seq_len / bptt


def detach_states(states: list[State] | None) -> list[State] | None:
    if states is None:
        return None
    return [tuple(s.detach() for s in st) for st in states]


def lm_loss(model: nn.Module, batch: Batch, states: list[State] | None, alpha: float,
            beta: float) -> tuple[Tensor, Tensor, list[State]]:
    """(total loss with AR/TAR, plain cross-entropy, new states)."""
    out = model(batch.inputs, states)
    ce = F.cross_entropy(out.logits.reshape(-1, out.logits.size(-1)), batch.targets.reshape(-1))
    loss = ce
    if alpha:
        loss = loss + alpha * out.dropped.pow(2).mean()
    if beta:
        raw = out.raw[-1]
        loss = loss + beta * (raw[1:] - raw[:-1]).pow(2).mean()
    return loss, ce, out.states


def iterate(data: Tensor, schedule: BPTTSchedule, start_row: int = 0) -> Iterator[Batch]:
    i = start_row
    while i < data.size(0) - 2:
        seq_len = schedule.next_len()
        x, y = get_batch(data, i, seq_len)
        yield Batch(x, y, i, x.size(0) / schedule.bptt)
        i += x.size(0)


@torch.no_grad()
def evaluate_lm(model: nn.Module, data: Tensor, batch_size: int, bptt: int) -> float:
    """Mean cross-entropy per token (nats) over the whole stream ``data`` (N,)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    source = batchify(data, batch_size).to(device)
    states = None
    total, count = 0.0, 0
    for i in range(0, source.size(0) - 1, bptt):
        x, y = get_batch(source, i, bptt)
        out = model(x, states)
        states = out.states
        total += F.cross_entropy(out.logits.reshape(-1, out.logits.size(-1)), y.reshape(-1),
                                 reduction="sum").item()
        count += y.numel()
    model.train(was_training)
    return total / count


def metric(loss: float, level: str) -> tuple[str, float]:
    """('ppl', exp(loss)) for words, ('bpc', loss / ln 2) for characters."""
    if level == "char":
        return "bpc", loss / math.log(2)
    return "ppl", math.exp(min(loss, 50.0))
