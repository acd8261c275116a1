"""The tagging and translation methods of :class:`~treelm.api.model.TreelmModel`: ``tag`` (what
``treelm tag`` prints), ``translate`` and ``translate_batches`` (what ``treelm translate``
prints, batch by batch) and ``attention`` (what ``treelm translate -o FILE.png`` draws).

Python callers give sentences (each with text); a verb gives the lines of its input and names it
(``where``): a blank line then gets an empty result without running the model, so that the
output stays aligned with the input, and unknown symbols are named ``where:N``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from treelm.api.base import ModelBase
from treelm.api.values import Attention, Unk, check_positive, sentences_of
from treelm.errors import TreelmError

if TYPE_CHECKING:
    from treelm.tasks.translation import Translation

CHUNK = 8         # batches translated together (sorting by length works within a chunk)
SOURCE_VOCABULARY = "the run's source vocabulary"


def _lines(lines: Iterable[str], what: str, where: str | None) -> list[str]:
    """A verb's input lines as they are (blank ones kept), or a caller's checked sentences."""
    return list(lines) if where is not None else sentences_of(lines, what)


class TaskMethods(ModelBase):
    """``tag`` (task ``tagging``); ``translate``, ``translate_batches``, ``attention`` (task
    ``translation``)."""

    # ------------------------------------------------------------------ tagging
    def tag(self, utterances: str | Sequence[str], *, batch_size: int | None = None,
            unk: Unk = "map", where: str | None = None) -> list[dict[str, Any]]:
        """Per utterance (words separated by whitespace) a dict as ``treelm tag --format json``
        prints it: ``words``, ``tags`` (one per word, IOB), ``slots`` (``type``, ``text``,
        ``start``, ``end`` exclusive: the chunks conlleval counts) and ``intent``. Words outside
        the vocabulary are read as ``<unk>`` (``unk="map"``) or refused (``"error"``), all
        before any is tagged; ``where`` (a verb's input) allows blank lines."""
        from treelm.tasks.conlleval import chunks
        from treelm.tasks.tagging import Tagged
        from treelm.text.tokenizers import WordTokenizer

        check_positive("batch_size", batch_size)
        if isinstance(utterances, str):
            utterances = [utterances]
        items = _lines(utterances, "utterance", where)
        self.require("tag")
        words = [WordTokenizer().encode_line(u) for u in items]
        for n, w in enumerate(words, 1):
            self._check("tag", unk, self.run.task.unknown_words(w),
                        f"{where}:{n}" if where is not None else f"utterance {n}")
        todo = [w for w in words if w]
        with self._calling("tag", unk):
            found = iter(self.run.task.tag(self.run.model, todo, batch_size) if todo else [])
        tagged = [next(found) if w else Tagged([], [], None) for w in words]
        return [{"words": t.words, "tags": t.tags,
                 "slots": [{"type": kind, "text": " ".join(t.words[a:b]), "start": a, "end": b}
                           for kind, a, b in sorted(chunks(t.tags), key=lambda c: c[1])],
                 "intent": t.intent} for t in tagged]

    # ------------------------------------------------------------------ translation
    def _check_source(self, items: Sequence[str], unk: Unk, where: str | None = None,
                      first: int = 1) -> None:
        """Source symbols outside the vocabulary under ``unk`` (``text.inputs``)."""
        if isinstance(unk, str) and unk not in ("map", "error"):
            raise TreelmError(f"unk must be map or error, got {unk!r}")
        for k, s in enumerate(items, first):
            self._check("translate", unk, self.run.task.unknown_source(s),
                        f"{where}:{k}" if where is not None else f"sentence {k}",
                        SOURCE_VOCABULARY)

    @staticmethod
    def _check_search(beam: int, alpha: float | None, batch_size: int | None) -> None:
        check_positive("beam", beam)
        check_positive("batch_size", batch_size)
        if alpha is not None and not (math.isfinite(alpha) and alpha >= 0):
            raise TreelmError(f"alpha must be a finite number >= 0, got {alpha}")

    def _search(self, items: list[str], beam: int, alpha: float | None,
                batch_size: int | None) -> list[Translation]:
        return self.run.task.translate(self.run.model, items, beam, alpha, batch_size)

    def translate(self, sentences: str | Sequence[str], beam: int = 5,
                  alpha: float | None = None, *, batch_size: int | None = None,
                  unk: str = "map") -> list[str]:
        """One translation per sentence, by the search ``treelm translate`` runs: greedy
        (``beam=1``) or beam search with length penalty ``alpha`` (default: the run's config).
        Source symbols outside the vocabulary are read as ``<unk>`` (``unk="map"``, the verbs'
        default) or refused (``"error"``)."""
        items = sentences_of(sentences)
        self.require("translate")
        self._check_search(beam, alpha, batch_size)
        self._check_source(items, unk)
        with self._calling("translate", unk):
            return [t.text for t in self._search(items, beam, alpha, batch_size)]

    def translate_batches(self, lines: Iterable[str], beam: int = 5,
                          alpha: float | None = None, *, batch_size: int | None = None,
                          unk: Unk = "map", where: str = "stdin",
                          chunk: int | None = None) -> Iterator[list[Translation]]:
        """The translations of ``lines`` (of input ``where``: blank lines give empty ones),
        ``chunk`` sentences at a time (default ``CHUNK`` batches), each chunk's
        :class:`~treelm.tasks.translation.Translation`\\ s (``source``, ``text``,
        ``symbols``) as soon as it is done, in input order: memory stays bounded however long
        the input (``treelm translate`` streams a pipe). Each chunk's unknown source symbols
        follow ``unk`` before it is translated; the task's own progress is silent (the caller
        counts the chunks)."""
        from itertools import islice

        from treelm.progress import reporting

        check_positive("chunk", chunk)
        self.require("translate")
        self._check_search(beam, alpha, batch_size)
        size = chunk or (batch_size or self.run.task.options.eval_batch_size) * CHUNK
        it, done = iter(lines), 0
        while block := list(islice(it, size)):
            self._check_source(block, unk, where, done + 1)
            done += len(block)
            with self._calling("translate", unk), reporting(quiet=True):
                found = self._search(block, beam, alpha, batch_size)
            yield found

    def attention(self, source: str, target: str | Translation | None = None, *,
                  beam: int = 5, unk: str = "map") -> Attention:
        """The attention of the decoder reading ``source`` while it is forced to produce
        ``target`` (text in the target language, or a translation of ``translate_batches``,
        its symbols as found; default: the model's own translation with ``beam``), one
        ``(T, S)`` matrix per attending decoder layer (``treelm translate -o FILE.png`` draws
        the same)."""
        from treelm.tasks.translation import Translation

        self.require("attention")
        task = self.run.task
        if isinstance(target, Translation):
            t = target
        else:
            items = sentences_of(source, "source sentence")
            if len(items) != 1:
                raise TreelmError("attention takes one source sentence")
            if target is not None and not isinstance(target, str):
                raise TreelmError("target must be text")
            self._check_search(beam, None, None)
            self._check_source(items, unk)
            if target is None:
                with self._calling("attention", unk):
                    t = self._search(items, beam, None, None)[0]
            else:
                t = Translation(items[0], target, task.tgt_tok.encode_line(target))
        with self._calling("attention", unk):
            weights, src, tgt = task.attention_map(self.run.model, t)
        return Attention(weights.numpy(), list(src), list(tgt), t.text)
