"""Label-smoothed cross-entropy (Szegedy et al. 2016), the training loss of translation.

A model trained on one-hot targets is pushed towards ever larger logits for the reference symbol;
spreading a mass ε of each target uniformly over the V symbols keeps its probabilities calibrated
and is the usual regulariser of sequence-to-sequence training. Over the N positions whose target
is not padding:

    L = (1/N) Σ_t [ (1 − ε) · −log p(y_t | y_<t, x)  +  ε · (1/V) Σ_v −log p(v | y_<t, x) ]

The plain ``−log p(y_t | …)`` mean is returned beside it: that is what is logged and what the
perplexity of a translation run is computed from, whatever ε is.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def smoothed_loss(logits: Tensor, target: Tensor, pad: int, eps: float
                  ) -> tuple[Tensor, Tensor, int]:
    """Label-smoothed cross-entropy (module docstring): (mean smoothed loss, mean plain
    −log p, number of non-padding positions) over ``target`` (…) with ``logits`` (…, V)."""
    logp = F.log_softmax(logits.float(), -1)
    keep = target.ne(pad)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)[keep]
    n = int(keep.sum())
    if eps == 0.0:
        return nll.mean(), nll.mean(), n
    uniform = -logp.mean(-1)[keep]
    return ((1.0 - eps) * nll + eps * uniform).mean(), nll.mean(), n
