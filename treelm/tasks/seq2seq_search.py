"""The search of translation: a batch of source sentences to target ids, by the decoders every
task shares, under a length limit; what ``treelm translate`` prints and what validation scores.

An encoder-decoder of the seq2seq interface is stepped by :class:`~treelm.decode.seq2seq.
Seq2SeqStep` (its decoder state carried from step to step) or, for measurements,
:class:`~treelm.decode.seq2seq.RecomputeStep` (the whole prefix again at every step: the same
translations, slower). ``<pad>`` and ``<bos>`` are never chosen. Beam 1 is greedy
(:func:`~treelm.decode.greedy.greedy_decode`), wider beams are
:func:`~treelm.decode.beam.beam_search` with length penalty α (Wu et al. 2016). A translation
holds at most ``a · |x| + b`` symbols, ``|x|`` counting the source's symbols with its ``<eos>``,
and ends before its first ``<eos>``: the batch runs to the longest limit of its rows, and each row
is cut to its own, so that a sentence translates the same in any batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from treelm.decode.beam import beam_search
from treelm.decode.greedy import greedy_decode
from treelm.decode.seq2seq import RecomputeStep, Seq2SeqStep
from treelm.text.vocab import Vocab

Found = tuple[list[int], float | None]     # target ids without <eos>; Σ log p (beam search only)


def length_limit(source_length: int, a: float, b: int) -> int:
    """The most target symbols a source of ``source_length`` symbols (with <eos>) may get."""
    return int(a * source_length + b)


@torch.no_grad()
def search(model: nn.Module, src: Tensor, limits: Sequence[int], vocab: Vocab, beam: int,
           length_penalty: float, incremental: bool = True) -> list[Found]:
    """Target ids and log-probability of each row of ``src`` (B, S), the batch-first padded
    source ids; ``limits``: each row's length limit; ``vocab``: the target side's."""
    cls = Seq2SeqStep if incremental else RecomputeStep
    step = cls(model, vocab.bos, banned=(vocab.pad, vocab.bos))
    logits, state = step.prime(src)
    if beam == 1:
        out = greedy_decode(step, logits, state, max(limits), vocab.eos).t().tolist()
        found: list[Found] = [(ids, None) for ids in out]
    else:
        hyps = beam_search(step, logits, state, beam, max(limits), vocab.eos, length_penalty)
        found = [(h[0].tokens, h[0].logprob) for h in hyps]
    result = []
    for (ids, lp), limit in zip(found, limits, strict=True):
        ids = ids[:limit]
        if vocab.eos in ids:
            ids = ids[: ids.index(vocab.eos)]
        result.append((ids, lp))
    return result
