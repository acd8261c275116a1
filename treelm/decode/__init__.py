"""Model-agnostic decoding: sampling, greedy and beam search over a *step function*.

A decoder step is any callable

    step(tokens, state) -> (logits, state)

with ``tokens`` of shape ``(B,)`` (one symbol per sequence) or ``(T, B)`` (a prefix, e.g. a prompt
that primes the state) and ``logits`` of shape ``(B, V)``: the scores of the symbol that follows
the last one fed. ``state`` is opaque to the decoders except that beam search reorders it with
:func:`treelm.decode.state.reorder_state` (``index_select`` along the batch dimension of every
tensor in a nested tuple / list / dict); ``None`` is passed through. Language models
(:class:`LMStep`) and encoder-decoders (:class:`Seq2SeqStep`: state = decoder state + encoder
memory) plug in the same way.

The package imports nothing else of treelm but :mod:`treelm.text` (the scorer reads sentences
through a tokenizer and vocabulary) and the bottom floor's :mod:`treelm.progress` and
:mod:`treelm.threads` (the scorer's progress and threads), so that tasks decode with it (a
translation task scores BLEU on what ``treelm translate`` prints) and verbs sit above it
(``treelm generate`` and ``treelm probe`` are in :mod:`treelm.generate`, ``treelm suite`` in
:mod:`treelm.suite`).

* :mod:`treelm.decode.sampling` -- temperature, top-k and top-p (nucleus) sampling, seeded;
* :mod:`treelm.decode.greedy` -- greedy decoding (the temperature-0 limit);
* :mod:`treelm.decode.beam` -- batched beam search with ``<eos>`` and length penalty;
* :mod:`treelm.decode.lm` -- the language-model adapter (``prime`` on a model's ``step``);
* :mod:`treelm.decode.seq2seq` -- the encoder-decoder adapter (``prime`` encodes the source and
  reads ``<bos>``), and a stateless variant that recomputes the whole prefix at every step;
* :mod:`treelm.decode.score` -- whole-sentence log-probabilities, batched (the scoring that
  :mod:`treelm.suite` builds on).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Hypothesis": "beam", "beam_search": "beam", "greedy_decode": "greedy", "LMStep": "lm",
    "RecomputeStep": "seq2seq", "Seq2SeqStep": "seq2seq", "filter_logits": "sampling",
    "sample": "sampling", "sample_next": "sampling", "sample_stream": "sampling",
    "top_k_filter": "sampling", "top_p_filter": "sampling", "Step": "state",
    "reorder_state": "state", "sentence_logprobs": "score",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import lazily, so that the command line (``treelm --help``) does not load torch."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'treelm.decode' has no attribute {name!r}")
    return getattr(importlib.import_module(f"treelm.decode.{_EXPORTS[name]}"), name)
