"""``treelm.load(run_dir)``: a trained run as a Python object with the methods its task supports.

========================  ====================================================  ================
method                    what it returns                                       tasks
========================  ====================================================  ================
``parse(sentences)``      one ``nltk.Tree`` per sentence, read off the levels   lm, translation
                          ``d_f`` of one ON-LSTM layer (Shen et al. 2019)       (ON-LSTM layers)
``levels(sentence)``      :class:`~treelm.syntax.levels.SentenceLevels`:        lm, translation
                          per-layer ``d_f``, ``d_i`` (``(layers, n)`` arrays)   (ON-LSTM layers)
``score(sentences)``      ``log p(s)`` in nats, ``<eos> w_1 … w_n <eos>``       lm
``generate(prompt)``      the continuation of ``prompt`` (sampling or beam)     lm
``probe(prefix, k)``      the ``k`` most likely next symbols with p             lm
``tag(utterances)``       words, tags, slots and intent per utterance           tagging
``translate(sentences)``  one translation per sentence (greedy or beam)         translation
``attention(src, tgt)``   the decoder's attention weights ``(layers, T, S)``    translation
========================  ====================================================  ================

Each method calls the library function that the matching verb calls (``treelm parse``,
``generate``, ``probe``, ``tag``, ``translate``), so a sentence gives the same answer in Python
and on the command line (``tests/test_api.py`` checks each against its verb). A method the run's
task does not support raises :class:`UnsupportedMethodError` (a
:class:`~treelm.errors.TreelmError`) naming the task and what it does support.

The object is safe to share between threads (``treelm serve`` does): every call holds the
object's lock, runs in the run's precision (``Run.autocast``) and without gradients.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treelm.errors import TreelmError

if TYPE_CHECKING:   # torch, nltk and the run load only when a run is opened
    import nltk
    import numpy as np

    from treelm.run import Run
    from treelm.syntax.levels import SentenceLevels
    from treelm.syntax.sources import LevelSource

#: Every method of the API, in the order ``supports`` lists them.
METHODS = ("parse", "levels", "score", "generate", "probe", "tag", "translate", "attention")
TREE_METHODS = ("parse", "levels")
#: What each task offers; the tree methods also need ON-LSTM layers (a language model's, or a
#: translation encoder's).
TASK_METHODS: dict[str, tuple[str, ...]] = {
    "lm": ("parse", "levels", "score", "generate", "probe"),
    "translation": ("parse", "levels", "translate", "attention"),
    "tagging": ("tag",),
    "logic": (),
}


class UnsupportedMethodError(TreelmError):
    """A method the run's task (or its model) does not offer."""


@dataclass(frozen=True)
class Attention:
    """Attention of a translation: ``weights[l, t, j]`` is how much decoder layer ``l`` read
    source symbol ``source[j]`` when it predicted ``target[t]`` (each row sums to 1)."""

    weights: np.ndarray          # (layers, T, S)
    source: list[str]            # S source symbols, <eos> last
    target: list[str]            # T target symbols, <eos> last
    text: str                    # the target as text (the translation, when none was given)


def to_nltk(tree: Any, label: str = "X") -> nltk.Tree:
    """A nested-list tree (:mod:`treelm.syntax.trees`) as an ``nltk.Tree`` whose constituents
    are all labelled ``label`` (the induced trees are unlabeled); a one-token tree is
    ``Tree(label, [token])``. Built with an explicit stack: deep trees do not recurse."""
    import nltk

    if not isinstance(tree, (list, tuple)):
        return nltk.Tree(label, [tree])
    root = nltk.Tree(label, [])
    stack: list[tuple[Any, nltk.Tree]] = [(tree, root)]
    while stack:
        node, out = stack.pop()
        for child in node:
            if isinstance(child, (list, tuple)):
                sub = nltk.Tree(label, [])
                out.append(sub)
                stack.append((child, sub))
            else:
                out.append(child)
    return root


def _sentences(sentences: str | Sequence[str], what: str = "sentence") -> list[str]:
    """One string or a sequence of them, each with text."""
    items = [sentences] if isinstance(sentences, str) else list(sentences)
    if not items:
        raise TreelmError(f"no {what}s given")
    for k, s in enumerate(items, 1):
        if not isinstance(s, str):
            raise TreelmError(f"{what} {k} is a {type(s).__name__}, not text")
        if not s.strip():
            raise TreelmError(f"{what} {k} is empty")
    return items


def _positive(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value < 1):
        raise TreelmError(f"{name} must be an integer >= 1, got {value!r}")


class TreelmModel:
    """A loaded run (:func:`load`). ``task`` is its task's name, ``supports`` the methods it
    offers, ``layers`` the 1-based numbers of its ON-LSTM layers (``()`` without master gates)
    and ``default_layer`` the one ``parse`` reads unless told (the last-but-one)."""

    def __init__(self, run: Run) -> None:
        from treelm.syntax.levels import NoMasterGatesError, default_layer
        from treelm.syntax.sources import level_source

        self.run = run
        self.task: str = run.task.name
        self.path: Path = run.path
        self._lock = threading.RLock()
        self._sources: dict[str, LevelSource] = {}
        self._no_trees = ""          # why the tree methods are missing, when they are
        offered = TASK_METHODS.get(self.task, ())
        self.layers: tuple[int, ...] = ()
        if any(m in offered for m in TREE_METHODS):
            try:
                self._sources["forward"] = level_source(run, "forward")
                self.layers = self._sources["forward"].layers
            except NoMasterGatesError as e:
                self._no_trees = str(e)
        self.default_layer: int | None = default_layer(self.layers) if self.layers else None
        self.supports: tuple[str, ...] = tuple(
            m for m in METHODS if m in offered and (m not in TREE_METHODS or self.layers))

    def __repr__(self) -> str:
        return f"TreelmModel({str(self.path)!r}, task={self.task!r}, supports={self.supports})"

    # ------------------------------------------------------------------ plumbing
    def require(self, method: str) -> None:
        """Raise :class:`UnsupportedMethodError` unless ``method`` is in ``supports``."""
        if method in self.supports:
            return
        why = (f" ({self._no_trees})" if method in TREE_METHODS and self._no_trees else "")
        offers = ", ".join(self.supports) if self.supports else "no method of this API"
        raise UnsupportedMethodError(f"{method}: not supported by this {self.task!r} run{why}; "
                                     f"it supports {offers}")

    @contextmanager
    def _calling(self, method: str) -> Iterator[None]:
        """One call at a time, in the run's precision, without gradients; an unknown symbol's
        error names this API's ``unk`` argument."""
        import torch

        from treelm.text.vocab import UnknownSymbolError

        self.require(method)
        try:
            with self._lock, self.run.autocast(), torch.no_grad():
                yield
        except UnknownSymbolError as e:      # the library's hint names the verbs' option
            raise UnknownSymbolError(str(e).replace("--unk map", "unk='map'")) from None

    def _source(self, direction: str) -> LevelSource:
        from treelm.syntax.levels import DIRECTIONS
        from treelm.syntax.sources import level_source

        if direction not in DIRECTIONS:
            raise TreelmError(f"direction must be one of {', '.join(DIRECTIONS)}, "
                              f"got {direction!r}")
        if direction not in self._sources:
            self._sources[direction] = level_source(self.run, direction)
        return self._sources[direction]

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
        from treelm.syntax.parse import tokenize

        source = self._source(direction)
        tokens = [tokenize(s, source.tokenizer) for s in sentences]
        for k, t in enumerate(tokens, 1):
            if not t:
                raise TreelmError(f"sentence {k} has no symbols the run's tokenizer reads")
        return source.read(tokens, batch_size, unk)

    # ------------------------------------------------------------------ trees
    def parse(self, sentences: str | Sequence[str], layer: int | None = None,
              style: str = "official", *, direction: str = "forward", unk: str = "map",
              batch_size: int = 256) -> list[nltk.Tree]:
        """The induced tree of each sentence as an ``nltk.Tree`` (constituents labelled ``X``),
        as ``treelm parse`` prints it: the levels ``d_f`` of ``layer`` (default
        ``default_layer``), split top-down by the tree rule ``style`` (``official``: the
        highest-level word opens a constituent; ``split``: a span splits before it). A
        translation run parses the source side (``direction``: its encoder's stack). Words
        outside the vocabulary are read as ``<unk>`` (``unk="map"``) or refused (``"error"``)."""
        from treelm.syntax.trees import TREE_STYLES

        if style not in TREE_STYLES:
            raise TreelmError(f"style must be one of {', '.join(TREE_STYLES)}, got {style!r}")
        _positive("batch_size", batch_size)
        items = _sentences(sentences)
        with self._calling("parse"):
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
        items = _sentences(sentence)
        with self._calling("levels"):
            return self._read_levels(items, direction, unk, 1)[0]

    # ------------------------------------------------------------------ language models
    def score(self, sentences: str | Sequence[str], *, batch_size: int = 128) -> list[float]:
        """``log p(s)`` in nats of each sentence, read as ``<eos> w_1 … w_n <eos>`` (the final
        ``<eos>`` included; :mod:`treelm.decode.score`, as ``treelm suite`` scores); symbols
        outside the vocabulary count as ``<unk>``."""
        from treelm.decode.score import sentence_logprobs

        _positive("batch_size", batch_size)
        items = _sentences(sentences)
        with self._calling("score"):
            logp, _ = sentence_logprobs(self.run.model, self.run.vocab, self.run.tokenizer,
                                        items, batch_size)
            return [float(x) for x in logp]

    def _prime(self, text: str, unk: str, what: str) -> tuple[Any, Any, Any]:
        """``<eos>`` + ``text`` through the model from the zero state (as ``treelm generate``
        reads a prompt): the step function, the next-symbol logits and the state."""
        import torch

        from treelm.decode.lm import LMStep

        vocab = self.run.vocab
        ids = [vocab.eos, *vocab.encode(self.run.tokenizer.encode(text), unk, what=what)]
        device = next(self.run.model.parameters()).device
        step = LMStep(self.run.model)
        logits, state = step.prime(torch.tensor(ids, device=device).unsqueeze(1))
        return step, logits, state

    def generate(self, prompt: str = "", length: int = 50, *, temperature: float = 1.0,
                 top_k: int | None = None, top_p: float | None = None, seed: int = 0,
                 beam: int | None = None, alpha: float = 0.0, unk: str = "map") -> str:
        """The text that follows ``prompt`` (not repeated), ``length`` symbols, as ``treelm
        generate`` writes it after the prompt: sampled from softmax(logits / ``temperature``)
        (``0``: greedy), optionally cut to the ``top_k`` symbols or the ``top_p`` nucleus, from
        a generator seeded with ``seed``; or, with ``beam``, the most probable continuation found
        by beam search (ranked by log p / ((5+n)/6)^``alpha``, stopping at ``<eos>``). A prompt
        symbol outside the vocabulary is read as ``<unk>`` (``unk="error"`` refuses it)."""
        import torch

        from treelm.decode.beam import beam_search
        from treelm.decode.sampling import sample_stream

        if not isinstance(prompt, str):
            raise TreelmError("prompt must be text")
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise TreelmError(f"length must be an integer >= 0, got {length!r}")
        if not 0 <= temperature < math.inf:
            raise TreelmError(f"temperature must be a finite number >= 0, got {temperature}")
        _positive("top_k", top_k)
        if top_p is not None and not 0 < top_p <= 1:
            raise TreelmError(f"top_p must be in (0, 1], got {top_p}")
        _positive("beam", beam)
        with self._calling("generate"):
            step, logits, state = self._prime(prompt, unk, "prompt symbol")
            vocab, tok = self.run.vocab, self.run.tokenizer
            if beam is not None:
                best = beam_search(step, logits, state, beam, length, eos=vocab.eos,
                                   alpha=alpha)[0][0]
                symbols = vocab.decode(best.tokens)
            else:
                gen = torch.Generator(device=logits.device).manual_seed(seed)
                symbols = [vocab.itos[int(t[0])] for t in
                           sample_stream(step, logits, state, length, temperature, top_k,
                                         top_p, gen)]
            line_start = prompt == "" or prompt.endswith("\n")
            out = []
            for s in symbols:
                piece = tok.piece_text(s, line_start)
                out.append(piece)
                line_start = piece.endswith("\n")
            return "".join(out)

    def probe(self, prefix: str, k: int = 5, *, unk: str = "map") -> list[tuple[str, float]]:
        """The ``k`` most likely symbols after ``prefix`` (read as the start of a line) with
        their probabilities, most likely first (``treelm probe``)."""
        if not isinstance(prefix, str):
            raise TreelmError("prefix must be text")
        _positive("k", k)
        with self._calling("probe"):
            _, logits, _ = self._prime(prefix, unk, "prefix symbol")
            probs = logits[0].float().softmax(-1)
            p, i = probs.topk(min(k, probs.numel()))
            return [(self.run.vocab.itos[j], float(q)) for q, j in zip(p.tolist(), i.tolist())]

    # ------------------------------------------------------------------ tagging
    def tag(self, utterances: str | Sequence[str], *,
            batch_size: int | None = None) -> list[dict[str, Any]]:
        """Per utterance (words separated by whitespace) a dict as ``treelm tag --format json``
        prints it: ``words``, ``tags`` (one per word, IOB), ``slots`` (``type``, ``text``,
        ``start``, ``end`` exclusive: the chunks conlleval counts) and ``intent``."""
        from treelm.tasks.conlleval import chunks
        from treelm.text.tokenizers import WordTokenizer

        _positive("batch_size", batch_size)
        items = _sentences(utterances, "utterance")
        words = [WordTokenizer().encode_line(u) for u in items]
        with self._calling("tag"):
            tagged = self.run.task.tag(self.run.model, words, batch_size)
        return [{"words": t.words, "tags": t.tags,
                 "slots": [{"type": kind, "text": " ".join(t.words[a:b]), "start": a, "end": b}
                           for kind, a, b in sorted(chunks(t.tags), key=lambda c: c[1])],
                 "intent": t.intent} for t in tagged]

    # ------------------------------------------------------------------ translation
    def _check_source(self, items: list[str], unk: str) -> None:
        """Source symbols outside the vocabulary under the verbs' policy (``text.inputs``)."""
        from treelm.text.inputs import UnknownSymbols

        if unk not in ("map", "error"):
            raise TreelmError(f"unk must be map or error, got {unk!r}")
        policy = UnknownSymbols(unk, "the run's source vocabulary")
        for k, s in enumerate(items, 1):
            policy.check(self.run.task.unknown_source(s), f"sentence {k}")

    def _translations(self, items: list[str], beam: int, alpha: float | None,
                      batch_size: int | None, unk: str) -> list[Any]:
        _positive("beam", beam)
        _positive("batch_size", batch_size)
        if alpha is not None and not (math.isfinite(alpha) and alpha >= 0):
            raise TreelmError(f"alpha must be a finite number >= 0, got {alpha}")
        self._check_source(items, unk)
        return self.run.task.translate(self.run.model, items, beam, alpha, batch_size)

    def translate(self, sentences: str | Sequence[str], beam: int = 5,
                  alpha: float | None = None, *, batch_size: int | None = None,
                  unk: str = "map") -> list[str]:
        """One translation per sentence, by the search ``treelm translate`` runs: greedy
        (``beam=1``) or beam search with length penalty ``alpha`` (default: the run's config).
        Source symbols outside the vocabulary are read as ``<unk>`` (``unk="map"``, the verbs'
        default) or refused (``"error"``)."""
        items = _sentences(sentences)
        with self._calling("translate"):
            return [t.text for t in self._translations(items, beam, alpha, batch_size, unk)]

    def attention(self, source: str, target: str | None = None, *, beam: int = 5,
                  unk: str = "map") -> Attention:
        """The attention of the decoder reading ``source`` while it is forced to produce
        ``target`` (text in the target language; default: the model's own translation with
        ``beam``), one ``(T, S)`` matrix per attending decoder layer
        (``treelm translate -o FILE.png`` draws the same)."""
        from treelm.tasks.translation import Translation

        items = _sentences(source, "source sentence")
        if len(items) != 1:
            raise TreelmError("attention takes one source sentence")
        if target is not None and not isinstance(target, str):
            raise TreelmError("target must be text")
        with self._calling("attention"):
            task = self.run.task
            if target is None:
                t = self._translations(items, beam, None, None, unk)[0]
            else:
                self._check_source(items, unk)
                t = Translation(items[0], target, task.tgt_tok.encode_line(target))
            weights, src, tgt = task.attention_map(self.run.model, t)
            return Attention(weights.numpy(), list(src), list(tgt), t.text)


def load(run_dir: str | Path, checkpoint: str = "best", *,
         precision: str = "run") -> TreelmModel:
    """Open a trained run directory (``treelm train --out RUN``) for inference.

    ``checkpoint``: ``"best"`` (the best validation score) or ``"last"``. ``precision``:
    ``"run"`` (what it trained in), ``"fp32"``, ``"bf16"`` or ``"auto"``, as the verbs'
    ``--precision``. Raises :class:`~treelm.errors.TreelmError` for a path that is not a run."""
    from treelm.run import load_run

    if checkpoint not in ("best", "last"):
        raise TreelmError(f"checkpoint must be 'best' or 'last', got {checkpoint!r}")
    if precision not in ("run", "fp32", "bf16", "auto"):
        raise TreelmError(f"precision must be run, fp32, bf16 or auto, got {precision!r}")
    run = load_run(run_dir, checkpoint)
    if precision != "run":
        from treelm.kernels.precision import resolve

        run.precision = resolve(precision, "cpu").precision
    return TreelmModel(run)


__all__ = ["Attention", "TreelmModel", "UnsupportedMethodError", "load", "to_nltk"]
