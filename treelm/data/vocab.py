"""Vocabulary: symbols ↔ ids, with ``<unk>`` and ``<eos>``.

Unknown-symbol policy (``unk``): ``"map"`` replaces a symbol outside the vocabulary by ``<unk>``,
``"error"`` refuses it with a message naming the symbol.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

UNK, EOS = "<unk>", "<eos>"
UNK_POLICIES = ("map", "error")


class Vocab:
    def __init__(self, itos: list[str], level: str = "word") -> None:
        if level not in ("word", "char"):
            raise ValueError(f"unknown vocabulary level {level!r}: word or char")
        self.itos = list(itos)
        self.level = level
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("vocabulary has duplicate symbols")

    @classmethod
    def build(cls, streams: Iterable[Iterable[str]], level: str = "word",
              min_count: int = 1) -> Vocab:
        counts: Counter[str] = Counter()
        for s in streams:
            counts.update(s)
        for special in (UNK, EOS):
            counts.pop(special, None)
        # frequency order, ties alphabetical: the same corpus always gives the same ids
        body = sorted((w for w, c in counts.items() if c >= min_count),
                      key=lambda w: (-counts[w], w))
        return cls([EOS, UNK, *body], level)

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def eos(self) -> int:
        return self.stoi[EOS]

    @property
    def unk(self) -> int:
        return self.stoi[UNK]

    def encode(self, symbols: Iterable[str], unk: str = "map") -> list[int]:
        if unk not in UNK_POLICIES:
            raise ValueError(f"unknown token policy {unk!r}; choose one of {UNK_POLICIES}")
        out = []
        for s in symbols:
            i = self.stoi.get(s)
            if i is None:
                if unk == "error":
                    raise KeyError(f"symbol {s!r} is not in the vocabulary ({len(self)} symbols)")
                i = self.unk
            out.append(i)
        return out

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]

    def tokenize(self, line: str) -> list[str]:
        """Split one line of text into this vocabulary's symbols (no ``<eos>``)."""
        return line.split() if self.level == "word" else list(line.strip())

    def join(self, symbols: Iterable[str]) -> str:
        if self.level == "word":
            return " ".join(symbols)
        return "".join("\n" if s == EOS else s for s in symbols)

    def to_json(self) -> str:
        return json.dumps({"level": self.level, "itos": self.itos}, ensure_ascii=False)

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(d["itos"], d["level"])
