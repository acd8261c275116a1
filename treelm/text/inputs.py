"""What every verb that reads text does with it: one reader, one empty-input rule, one policy for
symbols outside a run's vocabulary.

**Reading** (:func:`input_lines`). A file named by the user is read whole (so that a progress
bar can count it): UTF-8 text, or a one-line error naming the file and the line (bytes that are
not UTF-8, a NUL byte: a binary file). Standard input is read as it comes, line by line (a pipe
starts printing before it ends), with the same checks naming ``stdin``.

**Empty input** (:func:`require_text`). Input without any non-blank line (an empty or all-blank
file or stdin, an empty sentence argument) is the one-line error ``no input: … is empty``
(exit 2), before anything is printed, in every verb. Inside non-empty input a blank line is kept:
the verbs that print one result a line (``parse``, ``translate``, ``tag``) print an empty result
for it, so the output stays aligned with the input; record files (``suite --pairs``, ``eval
--data``) skip blank lines.

**Unknown symbols** (:class:`UnknownSymbols`). A symbol the run's vocabulary does not hold (after
the run's tokenizer; a piece model's segmenter emits only vocabulary pieces, so for BPE and
unigram runs only characters the model never saw) follows ``--unk``:

* ``map`` (the default of every verb): read as ``<unk>``; the verb prints one line on stderr
  at the end, ``treelm: N symbol(s) outside the run's vocabulary read as <unk>: 'a', 'b'``;
* ``error``: the first input line holding one stops the verb with one line naming the line and
  its unknown symbols.

Both say how the input was read where that changed it (:meth:`UnknownSymbols.add_note`): a run
trained on Chinese text converts the words it lacks to its script first
(:mod:`treelm.text.chinese`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from treelm.errors import TreelmError, decode_text, read_text
from treelm.text.vocab import UNK_POLICIES, UnknownSymbolError, check_unk_policy

if TYPE_CHECKING:
    import argparse

SHOWN = 10          # unknown symbols named in a message


class NoInputError(TreelmError):
    """The input holds no text at all."""


def file_lines(path: str) -> list[str]:
    """The lines of a UTF-8 file (line ends removed); one-line errors naming the file."""
    if not Path(path).exists():
        raise TreelmError(f"{path}: no such file")
    # split at newlines only (str.splitlines also splits at U+2028, form feeds, …: the output
    # would no longer be aligned with the file's lines)
    lines = read_text(path, "file").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln.rstrip("\r") for ln in lines]


def stdin_lines(stream: TextIO | None = None) -> Iterator[str]:
    """The lines of stdin as they come (line ends removed); bytes that are not UTF-8 or a NUL
    byte are a one-line error naming the line."""
    stream = sys.stdin if stream is None else stream
    raw = getattr(stream, "buffer", None)
    if raw is None:                       # a text stream (tests, embedding programs)
        for n, line in enumerate(stream, 1):
            if "\0" in line:
                raise TreelmError(f"stdin:{n}: binary data (a NUL byte), not text")
            yield line.rstrip("\r\n")
        return
    for n, b in enumerate(raw, 1):
        try:
            yield decode_text(b, "stdin").rstrip("\r\n")
        except TreelmError as e:          # name the line of stdin, not of the one-line chunk
            raise TreelmError(str(e).replace("stdin:1:", f"stdin:{n}:", 1)) from None


def input_lines(path: str | None) -> list[str] | Iterator[str]:
    """A file's lines (a list, read whole), or stdin's as they come; empty input is an error
    (:func:`require_text`) before the first line is given out."""
    if path is not None and path != "-":
        lines = file_lines(path)
        if not any(ln.strip() for ln in lines):
            raise NoInputError(f"no input: {path} is empty")
        return lines
    return require_text(stdin_lines(), "stdin")


def source_name(path: str | None) -> str:
    """How messages name an input: the file, or ``stdin``."""
    return "stdin" if path is None or path == "-" else path


def require_text(lines: Iterable[str], where: str) -> Iterator[str]:
    """``lines`` unchanged, but an input without a non-blank line is a :class:`NoInputError`
    raised before any line is given out (leading blank lines are held back until text comes)."""
    held: list[str] = []
    it = iter(lines)
    for line in it:
        held.append(line)
        if line.strip():
            break
    else:
        raise NoInputError(f"no input: {where} is empty")
    yield from held
    yield from it


def require_sentence(text: str, what: str = "the sentence") -> str:
    if not text.strip():
        raise NoInputError(f"no input: {what} is empty")
    return text


def unk_help(what: str = "symbol") -> str:
    """The help text of ``--unk``, the same in every verb."""
    return (f"a {what} outside the run's vocabulary: map (default) reads it as <unk> and counts "
            "them on stderr; error stops with one line naming the input line")


def add_unk_option(p: argparse.ArgumentParser, what: str = "symbol") -> None:
    """``--unk map|error`` on a verb's parser, with the one default and help text."""
    p.add_argument("--unk", choices=UNK_POLICIES, default="map", help=unk_help(what))


def shown(symbols: Sequence[str]) -> str:
    names = list(dict.fromkeys(symbols))
    more = f", … ({len(names) - SHOWN} more)" if len(names) > SHOWN else ""
    return ", ".join(repr(s) for s in names[:SHOWN]) + more


class UnknownSymbols:
    """The ``--unk`` policy of one verb's run over all its input (module docstring)."""

    def __init__(self, unk: str = "map", vocabulary: str = "the run's vocabulary") -> None:
        check_unk_policy(unk)
        self.unk, self.vocabulary = unk, vocabulary
        self.counts: dict[str, int] = {}
        self.notes: list[str] = []

    def add_note(self, note: str) -> None:
        """Something the report and the error add about how the input was read (a Chinese
        run's conversion, :mod:`treelm.text.chinese`); once."""
        if note not in self.notes:
            self.notes.append(note)

    def _noted(self) -> str:
        return "".join(f" ({n})" for n in self.notes)

    def check(self, unknown: Sequence[str], where: str) -> None:
        """``unknown``: the symbols of one input line (named by ``where``, e.g. ``stdin:3``)
        outside the vocabulary. ``error`` refuses them; ``map`` counts them."""
        if not unknown:
            return
        if self.unk == "error":
            raise UnknownSymbolError(f"{where}: {shown(unknown)} not in {self.vocabulary}"
                                     f"{self._noted()}; --unk map reads such symbols as <unk>")
        for s in unknown:
            self.counts[s] = self.counts.get(s, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def note(self) -> str | None:
        """The one stderr line of ``map`` (None when every symbol was known)."""
        if not self.counts:
            return None
        return (f"treelm: {self.total} symbol(s) outside {self.vocabulary} read as <unk>: "
                f"{shown(list(self.counts))}{self._noted()}")

    def report(self, file: TextIO | None = None) -> None:
        line = self.note()
        if line:
            print(line, file=sys.stderr if file is None else file, flush=True)
