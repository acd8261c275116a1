"""Reading sentences for the syntax verbs and parsing them in batches.

Input lines come from an argument, a file or stdin (:func:`input_lines`); each is read by the run's
tokenizer (:func:`tokenize`, :mod:`treelm.text`), optionally re-segmented with jieba or normalised
as the PTB text was; :func:`read_lines` runs them through the model ``CHUNK`` sentences at a time
and yields the levels of each (``treelm parse`` reads them through the API,
:meth:`treelm.api.model.TreelmModel.levels_stream`); :func:`parse_lines` formats them. The
tokenizer and the levels come from the run's :class:`~treelm.syntax.sources.LevelSource` (a
language model's, or a translation encoder's over the source side).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from treelm.errors import TreelmError
from treelm.progress import Ticker

if TYPE_CHECKING:
    from treelm.syntax.levels import SentenceLevels
    from treelm.text.inputs import UnknownSymbols

CHUNK = 2048   # sentences read (and parsed) at a time from a file or stdin


def tokenize(text: str, tokenizer: Any, segment: str = "auto",
             normalize: bool = False) -> list[str]:
    """The tokens of one input line, read by the run's tokenizer as input
    (:meth:`treelm.text.tokenizers.Tokenizer.read_line`).

    ``segment``: ``auto`` (the run's own reading: a run trained on segmented Chinese text cuts
    unsegmented input with jieba), ``none`` (the tokenizer alone) or ``jieba`` (jieba for the
    whole line, a word-level run). A run whose text is Chinese in one script converts the words it
    lacks to that script (OpenCC) in every case. ``normalize`` applies the PTB preprocessing of
    the treebank reader (lower-case, digit runs -> ``N``) to every token.
    """
    tokens = tokenizer.read_line(text, segment)
    if normalize:
        from treelm.data.treebank import normalize_word

        tokens = [normalize_word(t) for t in tokens]
    return tokens


def note_reading(policy: UnknownSymbols, tokenizer: Any) -> UnknownSymbols:
    """``policy``, told how ``tokenizer`` reads input where its report should say so: a Chinese
    run's unknown words were converted to its script before lookup."""
    script = getattr(tokenizer, "script", None)
    if script is not None:
        from treelm.text.chinese import conversion_note

        policy.add_note(conversion_note(script))
    return policy


def input_lines(sentence: str | None, file: str | None,
                what: str = "the sentence") -> list[str] | Iterator[str]:
    """The SENTENCE argument, or the lines of ``file`` or stdin (SENTENCE absent or ``-``), read
    and checked by :mod:`treelm.text.inputs`: input without text is a one-line error."""
    from treelm.text.inputs import input_lines as read_lines
    from treelm.text.inputs import require_sentence

    if sentence is not None and sentence != "-":
        if file:
            raise TreelmError("give a sentence or --input, not both")
        return [require_sentence(sentence, what)]
    return read_lines(file)


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def read_lines(source: Any, lines: Iterable[str], segment: str = "auto",
               normalize: bool = False, batch_size: int = 256,
               policy: UnknownSymbols | None = None, where: str = "stdin", single: bool = False,
               guard: Callable[[], AbstractContextManager[Any]] = nullcontext,
               ) -> Iterator[tuple[str, list[str], SentenceLevels]]:
    """(line, tokens, levels) per input line, in order, with the levels of ``source`` (a
    :class:`~treelm.syntax.sources.LevelSource`), read ``CHUNK`` lines at a time, each chunk's
    forward passes inside ``guard()``. Unknown words follow ``policy`` (default: read as
    ``<unk>``), lines named ``where:N`` in its messages; a blank line has no tokens.
    ``single``: the lines are one sentence given as an argument, which must not be empty."""
    from treelm.text.inputs import UnknownSymbols

    policy = note_reading(policy or UnknownSymbols("map"), source.tokenizer)
    n = 0
    total = len(lines) if isinstance(lines, Sized) else None
    with Ticker("parsing", total, "sentences") as tick:
        for chunk in chunks(lines, CHUNK):
            tokens = [tokenize(t, source.tokenizer, segment, normalize) for t in chunk]
            if single and not tokens[0]:
                raise TreelmError("no input: the sentence is empty")
            with guard():
                levels = source.read(tokens, batch_size, "map")
            for text, toks, lv in zip(chunk, tokens, levels):
                n += 1
                policy.check([toks[i] for i in lv.unknown],
                             "the sentence" if single else f"{where}:{n}")
                yield text, toks, lv
            tick.update(len(chunk))


def parse_lines(source: Any, lines: Iterable[str], layers: Sequence[int], fmt: str, style: str,
                segment: str = "auto", normalize: bool = False, batch_size: int = 256,
                unk: str = "map", single: bool = False, policy: UnknownSymbols | None = None,
                where: str = "stdin") -> Iterator[tuple[str, list[str]]]:
    """(formatted parse, unknown words) per input line, in order (:func:`read_lines`; unknown
    words follow ``policy``, default the ``unk`` policy)."""
    from treelm.syntax.report import format_parse
    from treelm.text.inputs import UnknownSymbols

    for text, toks, lv in read_lines(source, lines, segment, normalize, batch_size,
                                     policy or UnknownSymbols(unk), where, single):
        yield format_parse(toks, lv, layers, fmt, style, text), [toks[i] for i in lv.unknown]
