"""``treelm.load(run_dir)``: a trained run as a Python object with the methods its task supports.

========================  ====================================================  ================
method                    what it returns                                       tasks
========================  ====================================================  ================
``parse(sentences)``      one ``nltk.Tree`` per sentence, read off the levels   lm, translation
                          ``d_f`` of one ON-LSTM layer (Shen et al. 2019): by   (ON-LSTM layers)
                          default the layer and rule of ``choice``
``levels(sentence)``      :class:`~treelm.syntax.levels.SentenceLevels`:        lm, translation
                          per-layer ``d_f``, ``d_i`` (``(layers, n)`` arrays)   (ON-LSTM layers)
``score(sentences)``      ``log p(s)`` in nats, ``<eos> w_1 … w_n <eos>``       lm
``generate(prompt)``      the continuation of ``prompt`` (sampling or beam)     lm
``probe(prefix, k)``      the ``k`` most likely next symbols with p             lm
``tag(utterances)``       words, tags, slots and intent per utterance           tagging
``translate(sentences)``  one translation per sentence (greedy or beam)         translation
``attention(src, tgt)``   the decoder's attention weights ``(layers, T, S)``    translation
``curves()``              :class:`~treelm.api.curves.Curves`: the scores of     every task
                          ``metrics.jsonl`` (loss, perplexity, tree F1 per
                          layer and rule) against tokens trained on
========================  ====================================================  ================

Beside them, the streams the verbs print from: ``levels_stream(lines)`` (``treelm parse``),
``generate_stream(prompt)`` (``treelm generate``) and ``translate_batches(lines)`` (``treelm
translate``), which read long input a chunk at a time.

The verbs ``treelm parse``, ``generate``, ``probe``, ``tag``, ``translate`` and ``suite
agreement`` are thin wrappers over these methods (and the streams beside them:
``levels_stream``, ``generate_stream``, ``translate_batches``): they open the run, call the
method and print, so a sentence gives the same answer in Python and on the command line by one
path (``tests/test_api.py`` checks each method against its verb, and that each verb calls it).
A method the run's task does not support raises :class:`UnsupportedMethodError` (a
:class:`~treelm.errors.TreelmError`) naming the task and what it does support.

The object is safe to share between threads (``treelm serve`` does): every call holds the
object's lock, runs in the run's precision (``Run.autocast``) and without gradients;
``curves`` runs no model and holds a lock of its own, so that it never waits for a computation.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING

from treelm.api.base import METHODS, TASK_METHODS, TREE_METHODS, UnsupportedMethodError
from treelm.api.curves import Curves, CurvesReader
from treelm.api.inference import TaskMethods
from treelm.api.lm import LMMethods
from treelm.api.values import (
    Attention,
    Generation,
    TreeDefaults,
    Unk,
    check_positive,
    policy_of,
    sentences_of,
    to_nltk,
)
from treelm.errors import TreelmError
from treelm.run import CHECKPOINT_HELP, CHECKPOINTS
from treelm.text.vocab import UnknownSymbolError

if TYPE_CHECKING:   # torch, nltk and the run load only when a run is opened
    import nltk

    from treelm.syntax.levels import SentenceLevels


class TreelmModel(LMMethods, TaskMethods):
    """A loaded run (:func:`load`). ``task`` is its task's name, ``supports`` the methods it
    offers, ``layers`` the 1-based numbers of its ON-LSTM layers (``()`` without master gates)
    and ``choice`` (:class:`~treelm.api.values.TreeDefaults`) the layer and rule ``parse``
    reads unless told, and why: those the run chose on labelled dev trees for the loaded
    checkpoint (``trees.json``), else the last-but-one layer and the official rule
    (``default_layer``, ``default_rule``: the same two values)."""

    def _layer(self, layer: int | None) -> int:
        if layer is None:
            assert self.default_layer is not None
            return self.default_layer
        if isinstance(layer, bool) or not isinstance(layer, int) or layer not in self.layers:
            raise TreelmError(f"layer {layer!r}: this model's ON-LSTM layers are "
                              f"{', '.join(map(str, self.layers))}")
        return layer

    def _read_levels(self, sentences: list[str], direction: str, unk: str,
                     batch_size: int) -> list[SentenceLevels]:
        from treelm.syntax.parse import note_reading, tokenize

        source = self._source(direction)
        # read as the verbs read a line (a Chinese run's segmentation and conversion included)
        tokens = [tokenize(s, source.tokenizer) for s in sentences]
        for k, t in enumerate(tokens, 1):
            if not t:
                raise TreelmError(f"sentence {k} has no symbols the run's tokenizer reads")
        levels = source.read(tokens, batch_size, "map")
        # unknown words under the verbs' policy and words (``unk="error"``: the first sentence
        # holding one, named, with what the reading did to it)
        policy = note_reading(policy_of(unk), source.tokenizer)
        for k, (t, lv) in enumerate(zip(tokens, levels), 1):
            policy.check([t[i] for i in lv.unknown], f"sentence {k}")
        return levels

    # ------------------------------------------------------------------ trees
    def parse(self, sentences: str | Sequence[str], layer: int | None = None,
              style: str | None = None, *, direction: str = "forward", unk: str = "map",
              batch_size: int = 256) -> list[nltk.Tree]:
        """The induced tree of each sentence as an ``nltk.Tree`` (constituents labelled ``X``),
        as ``treelm parse`` prints it: the levels ``d_f`` of ``layer`` (default
        ``default_layer``), split top-down by the tree rule ``style`` (``official``: the
        highest-level word opens a constituent; ``split``: a span splits before it; default
        ``default_rule``): ``choice`` says which they are and why. A
        translation run parses the source side (``direction``: its encoder's stack). Words
        outside the vocabulary are read as ``<unk>`` (``unk="map"``) or refused (``"error"``).
        A run trained on Chinese text reads each sentence as ``treelm parse`` does
        (:meth:`~treelm.text.tokenizers.Tokenizer.read_line`): unsegmented stretches cut by
        jieba, words it lacks converted to its script (Simplified to the Sinica Treebank's
        Traditional characters)."""
        from treelm.syntax.trees import TREE_STYLES

        style = self.default_rule if style is None else style
        if style not in TREE_STYLES:
            raise TreelmError(f"style must be one of {', '.join(TREE_STYLES)}, got {style!r}")
        check_positive("batch_size", batch_size)
        items = sentences_of(sentences)
        with self._calling("parse", unk):
            k = self._layer(layer)
            return [to_nltk(lv.tree(k, style))
                    for lv in self._read_levels(items, direction, unk, batch_size)]

    def levels(self, sentence: str, *, direction: str = "forward",
               unk: str = "map") -> SentenceLevels:
        """The master-gate levels of one sentence: ``.tokens``, ``.df`` and ``.di`` (arrays of
        shape ``(len(.layers), n)``, row ``i`` for ON-LSTM layer ``.layers[i]``), ``.unknown``
        (positions read as ``<unk>``) and ``.tree(layer, style)`` (the nested-list tree)."""
        if not isinstance(sentence, str):
            raise TreelmError("levels takes one sentence (a string)")
        items = sentences_of(sentence)
        with self._calling("levels", unk):
            return self._read_levels(items, direction, unk, 1)[0]

    def levels_stream(self, lines: Iterable[str], *, direction: str = "forward",
                      unk: Unk = "map", where: str = "stdin", batch_size: int = 256,
                      segment: str = "auto", normalize: bool = False,
                      single: bool = False) -> Iterator[tuple[str, SentenceLevels]]:
        """``(line, levels)`` for each line of an input (``where``: a file, ``stdin``), as
        ``treelm parse`` prints them, in order and as they are read (a pipe is parsed as it
        comes, a chunk of sentences at a time): a blank line has the levels of no words.
        ``segment``: ``auto`` reads lines as :meth:`parse` does (a Chinese run segments and
        converts them: :meth:`~treelm.text.tokenizers.Tokenizer.read_line`), ``none`` with the
        run's tokenizer alone, ``jieba`` re-segments a word run's input; ``normalize`` applies
        the PTB preprocessing; unknown words follow ``unk``, named ``where:N`` (``single``: the
        input is one sentence given as an argument, named "the sentence", that must have
        words)."""
        from treelm.syntax.parse import read_lines

        check_positive("batch_size", batch_size)
        self.require("levels")
        lines = read_lines(self._source(direction), lines, segment, normalize, batch_size,
                           policy_of(unk), where, single,
                           guard=partial(self._calling, "levels", unk))
        try:        # a named policy's error names this API's argument, as _calling does
            for text, _, lv in lines:
                yield text, lv
        except UnknownSymbolError as e:
            if not isinstance(unk, str):
                raise
            raise UnknownSymbolError(str(e).replace("--unk map", "unk='map'")) from None

    # ------------------------------------------------------------------ training curves
    def curves(self) -> Curves:
        """The run's training curves from its ``metrics.jsonl`` as it is now (a run still
        training logs on): every validation score, the training loss and, with
        ``train.eval_parse``, the tree F1 of each layer under each rule, against the tokens
        trained on (:class:`~treelm.api.curves.Curves`). Re-read only when the file changed."""
        self.require("curves")
        return self._curves.read()

    @cached_property
    def _curves(self) -> CurvesReader:
        # made on first use (two threads at once would each make one: harmless, both read the
        # same file)
        return CurvesReader(self.path)


def load(run_dir: str | Path, checkpoint: str = "best", *, precision: str = "run",
         expect: str | tuple[str, ...] | None = None) -> TreelmModel:
    """Open a trained run directory (``treelm train --out RUN``) for inference.

    ``checkpoint``: ``"best"`` (the best validation score), ``"best-trees"`` (the best dev tree
    F1 of ``train.eval_parse``; a run without one is a one-line error), ``"best-trees-split"``
    or ``"best-trees-official"`` (the same under that rule alone) or ``"last"``.
    ``precision``:
    ``"run"`` (what it trained in), ``"fp32"``, ``"bf16"`` or ``"auto"``, as the verbs'
    ``--precision``. ``expect`` (a task name or a tuple of them) refuses a run of another task
    with the verbs' one-line error. Raises :class:`~treelm.errors.TreelmError` for a path that
    is not a run."""
    from treelm.run import load_run

    if checkpoint not in CHECKPOINTS:
        raise TreelmError(f"checkpoint must be one of {', '.join(CHECKPOINTS)}, got "
                          f"{checkpoint!r}")
    if precision not in ("run", "fp32", "bf16", "auto"):
        raise TreelmError(f"precision must be run, fp32, bf16 or auto, got {precision!r}")
    run = load_run(run_dir, checkpoint, expect)
    if precision != "run":
        from treelm.kernels.precision import resolve

        run.precision = resolve(precision, "cpu").precision
    return TreelmModel(run)


__all__ = ["CHECKPOINTS", "CHECKPOINT_HELP", "METHODS", "TASK_METHODS", "TREE_METHODS",
           "Attention", "Curves", "Generation", "TreeDefaults", "TreelmModel",
           "UnsupportedMethodError", "load", "to_nltk"]
