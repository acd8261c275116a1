"""The AWD-LSTM regularisers (Merity, Keskar & Socher, ICLR 2018, Sec. 4).

* :func:`locked_dropout` — variational dropout (Gal & Ghahramani 2016): one mask per sequence,
  shared over all time steps. x: (T, B, D).
* :func:`embedding_dropout` — drops whole rows (word types) of the embedding matrix, so that a word
  is dropped everywhere in the batch. weight: (V, E).
* :func:`weight_drop` — DropConnect (Wan et al. 2013) on hidden-to-hidden weights: one mask per
  sequence, the same at every step.
All are the identity when ``p == 0`` or not training; surviving values are scaled by 1/(1−p).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def locked_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    if not training or p == 0.0:
        return x
    mask = x.new_empty(1, *x.shape[1:]).bernoulli_(1 - p).div_(1 - p)
    return x * mask


def embedding_dropout(weight: Tensor, p: float, training: bool) -> Tensor:
    if not training or p == 0.0:
        return weight
    mask = weight.new_empty(weight.size(0), 1).bernoulli_(1 - p).div_(1 - p)
    return weight * mask


def weight_drop(weight: Tensor, p: float, training: bool) -> Tensor:
    return F.dropout(weight, p, training) if p > 0.0 else weight
