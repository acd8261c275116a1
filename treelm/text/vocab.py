"""Vocabulary: symbols ↔ ids, with configurable special symbols.

The specials come first, in the order given: a language model uses ``("<eos>", "<unk>")`` (ids 0
and 1, as every treelm run so far), a translation model ``("<pad>", "<bos>", "<eos>", "<unk>")``,
a label vocabulary none at all. The body follows in frequency order, ties alphabetical, so the same
corpus always gives the same ids.

Unknown-symbol policy (``unk``), the one rule every verb follows: ``"map"`` reads a symbol outside
the vocabulary as ``<unk>``; ``"error"`` raises :class:`UnknownSymbolError`, a one-line
:class:`~treelm.errors.TreelmError` naming the symbol. A vocabulary without ``<unk>`` (labels)
always refuses unknown symbols.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import overload

from treelm.errors import TreelmError

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
LM_SPECIALS = (EOS, UNK)
UNK_POLICIES = ("map", "error")


class UnknownSymbolError(TreelmError):
    """A symbol is not in the vocabulary and the policy (or a vocabulary without ``<unk>``) does
    not allow reading it as ``<unk>``."""


def check_unk_policy(unk: str) -> None:
    if unk not in UNK_POLICIES:
        raise TreelmError(f"unknown token policy {unk!r}; choose one of {', '.join(UNK_POLICIES)}")


class _SpecialId:
    """A read-only attribute of :class:`Vocab`: the id of the special ``symbol``, or an
    :class:`UnknownSymbolError` where the vocabulary has none (a label vocabulary's ``unk``)."""

    def __init__(self, symbol: str) -> None:
        self.symbol = symbol
        self.__doc__ = f"The id of {symbol}."

    @overload
    def __get__(self, vocab: None, owner: type[Vocab]) -> _SpecialId: ...
    @overload
    def __get__(self, vocab: Vocab, owner: type[Vocab]) -> int: ...
    def __get__(self, vocab: Vocab | None, owner: type[Vocab]) -> int | _SpecialId:
        if vocab is None:
            return self
        i = vocab.stoi.get(self.symbol)
        if i is None or self.symbol not in vocab.specials:
            raise UnknownSymbolError(f"this vocabulary has no {self.symbol} symbol "
                                     f"(specials: {', '.join(vocab.specials) or 'none'})")
        return i

    def __set__(self, vocab: Vocab, value: int) -> None:
        raise AttributeError(f"the id of {self.symbol} is the vocabulary's")    # as a property


class Vocab:
    def __init__(self, itos: Sequence[str], specials: Sequence[str] = LM_SPECIALS) -> None:
        self.itos = list(itos)
        self.specials = tuple(specials)
        if self.itos[: len(self.specials)] != list(self.specials):
            raise ValueError(f"the vocabulary must start with its specials {self.specials}")
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("vocabulary has duplicate symbols")

    @classmethod
    def build(cls, streams: Iterable[Iterable[str]], specials: Sequence[str] = LM_SPECIALS,
              min_count: int = 1, extra: Iterable[str] = ()) -> Vocab:
        """Specials, then the symbols of ``streams`` seen ``min_count`` times or more, then the
        ``extra`` symbols not already in (a piece model's characters: see
        :meth:`~treelm.text.tokenizers.Tokenizer.alphabet`), in their order."""
        counts: Counter[str] = Counter()
        for s in streams:
            counts.update(s)
        for special in specials:
            counts.pop(special, None)
        body = sorted((w for w, c in counts.items() if c >= min_count),
                      key=lambda w: (-counts[w], w))
        seen = {*specials, *body}
        tail = [w for w in dict.fromkeys(extra) if w not in seen]
        return cls([*specials, *body, *tail], specials)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, symbol: str) -> bool:
        return symbol in self.stoi

    pad = _SpecialId(PAD)
    bos = _SpecialId(BOS)
    eos = _SpecialId(EOS)
    unk = _SpecialId(UNK)

    def unknown(self, symbols: Iterable[str]) -> list[int]:
        """Positions of the symbols outside the vocabulary."""
        return [i for i, s in enumerate(symbols) if s not in self.stoi]

    def encode(self, symbols: Iterable[str], unk: str = "map", what: str = "symbol") -> list[int]:
        """Ids of ``symbols``; an unknown one follows ``unk`` (see the module docstring).
        ``what`` names the symbols in the error ("word", "prompt symbol", "label")."""
        check_unk_policy(unk)
        has_unk = UNK in self.specials
        out = []
        for s in symbols:
            i = self.stoi.get(s)
            if i is None:
                if unk == "error" or not has_unk:
                    hint = "; use --unk map to read it as <unk>" if has_unk else ""
                    raise UnknownSymbolError(
                        f"{what} {s!r} is not in the vocabulary ({len(self)} symbols){hint}")
                i = self.stoi[UNK]
            out.append(i)
        return out

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]

    def to_json(self) -> str:
        return json.dumps({"specials": list(self.specials), "itos": self.itos},
                          ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Vocab:
        d = json.loads(text)
        # runs written before the text layer stored {"level", "itos"} with <eos>, <unk> first
        return cls(d["itos"], d.get("specials", LM_SPECIALS))

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        return cls.from_json(Path(path).read_text(encoding="utf-8"))
