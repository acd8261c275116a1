"""Where a run's master-gate levels come from: a language model's own layers over its words
(:mod:`treelm.syntax.levels`), or a translation encoder's over the source symbols
(:mod:`treelm.syntax.source_levels`). :func:`level_source` is the one place that tells the two
kinds of run apart, so that ``parse``, ``plot``, the API and the page never do; it sits above both
modules, which do not import each other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from treelm.errors import TreelmError
from treelm.syntax.levels import DIRECTIONS, SentenceLevels, onlstm_layers, sentence_levels
from treelm.syntax.source_levels import encoder_layers, source_sentence_levels


@dataclass(frozen=True)
class LevelSource:
    """Where a run's levels come from (:func:`level_source`).

    Attributes:
        layers: 1-based numbers of the layers with master gates.
        tokenizer: the run's tokenizer of the text the model reads (:mod:`treelm.text`).
        read: ``read(sentences, batch_size, unk)``: the :class:`SentenceLevels` of tokenised
            sentences, in input order.
    """

    layers: tuple[int, ...]
    tokenizer: Any
    read: Callable[[Sequence[Sequence[str]], int, str], list[SentenceLevels]]


def level_source(run: Any, direction: str = "forward") -> LevelSource:
    """The levels of a loaded run (:func:`treelm.run.load_run`).

    A model that reads a source sentence (``encoder_cells()``: a translation encoder) gives its
    encoder's levels over the source symbols, read by the task's source tokenizer and vocabulary
    (:mod:`treelm.syntax.source_levels`); any other model, its language-model levels (this
    module). ``direction`` picks the stack of a bidirectional encoder.

    Raises:
        NoMasterGatesError: the model (the encoder) has no ON-LSTM layer.
        TreelmError: ``direction`` is ``"backward"`` and the model reads left to right only.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; choose one of {DIRECTIONS}")
    model = run.model
    if callable(getattr(model, "encoder_cells", None)):
        task = run.task
        return LevelSource(encoder_layers(model, direction), task.src_tok,
                           partial(source_sentence_levels, model, task.src_vocab,
                                   direction=direction))
    layers = onlstm_layers(model)
    if direction != "forward":
        raise TreelmError("direction 'backward' needs a translation run with a bidirectional "
                          "encoder; this run's model reads left to right only")
    return LevelSource(layers, run.tokenizer, partial(sentence_levels, model, run.vocab))
