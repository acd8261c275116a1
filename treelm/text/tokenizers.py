"""Tokenizers: a text ↔ a list of symbols, the only place treelm splits or joins text.

    encode("the cat\\nsat")  ->  ["the", "cat", "<eos>", "sat"]        word
                             ->  ["t", "h", "e", " ", "c", ... ]       char (spaces are symbols)
    decode(encode(text)) == text   (up to whitespace for word and piece tokenizers)

A newline is the end of a sentence (``<eos>``) at every level, as in every training stream. Kinds:

* ``word``  -- whitespace-separated words (pre-tokenised text such as Mikolov's PTB);
* ``char``  -- every character, spaces included (Sutskever et al.'s character models);
* ``jieba`` -- Chinese word segmentation with the optional package ``jieba``;
* ``bpe``, ``unigram`` -- sentencepiece models (Sennrich et al. 2016; Kudo 2018) learned on the
  training side of a corpus, stored in the run directory as the model's serialized bytes.

A tokenizer is saved as a small JSON ``spec()`` plus, for sentencepiece, ``model_bytes()``; the run
directory module (:mod:`treelm.run.files`) owns the file names. ``level`` says what one symbol is,
which decides whether losses are reported as perplexity (word, piece) or bits per character.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from treelm.errors import TreelmError
from treelm.text.vocab import EOS

TOKENIZERS = ("word", "char", "jieba", "bpe", "unigram")


class Tokenizer:
    kind: ClassVar[str]
    level: ClassVar[str]            # word | char | piece
    sep: ClassVar[str] = " "        # what joins two symbols of a line

    def encode_line(self, line: str) -> list[str]:
        raise NotImplementedError

    def encode(self, text: str) -> list[str]:
        """The symbols of ``text``; each newline becomes ``<eos>``."""
        out: list[str] = []
        for k, line in enumerate(text.split("\n")):
            if k:
                out.append(EOS)
            out.extend(self.encode_line(line))
        return out

    def decode_line(self, symbols: Sequence[str]) -> str:
        return self.sep.join(symbols)

    def decode(self, symbols: Iterable[str]) -> str:
        """Text of ``symbols``; ``<eos>`` becomes a newline."""
        lines: list[list[str]] = [[]]
        for s in symbols:
            if s == EOS:
                lines.append([])
            else:
                lines[-1].append(s)
        return "\n".join(self.decode_line(ln) for ln in lines)

    def piece_text(self, symbol: str, line_start: bool) -> str:
        """The text of one symbol when symbols are written one at a time (streaming)."""
        if symbol == EOS:
            return "\n"
        return symbol if line_start or not self.sep else self.sep + symbol

    def alphabet(self) -> list[str]:
        """Symbols a vocabulary built for this tokenizer holds even if the training text never
        shows them alone (the characters a piece model falls back to); none for the others."""
        return []

    def restrict(self, vocab: Iterable[str]) -> None:
        """Emit only symbols of ``vocab`` where the segmentation can (piece models; a no-op for
        the others, whose symbols do not depend on a vocabulary)."""

    def spec(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def model_bytes(self) -> bytes | None:
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class WordTokenizer(Tokenizer):
    kind, level = "word", "word"

    def encode_line(self, line: str) -> list[str]:
        return line.split()


class CharTokenizer(Tokenizer):
    kind, level, sep = "char", "char", ""

    def encode_line(self, line: str) -> list[str]:
        return list(line.rstrip("\r"))


class JiebaTokenizer(Tokenizer):
    kind, level, sep = "jieba", "word", ""

    def __init__(self) -> None:
        try:
            import jieba
        except ImportError:
            raise TreelmError("the jieba tokenizer needs the optional package jieba: "
                              "pip install 'treelm[zh]' (or pip install jieba)") from None
        jieba.setLogLevel(logging.WARNING)
        self._jieba = jieba

    def encode_line(self, line: str) -> list[str]:
        return [w for w in self._jieba.lcut(line.strip()) if w.strip()]


class SentencePieceTokenizer(Tokenizer):
    """BPE or unigram pieces; ``▁`` marks a piece that starts a word.

    A run restricts its segmenter to its vocabulary (:meth:`restrict`, :mod:`treelm.text.spm`):
    a piece the model holds but the vocabulary never took in (a merge that training text always
    merged further) is split back into vocabulary pieces, so only characters the model itself
    does not know remain unknown. The saved model bytes stay the unrestricted ones."""

    level, sep = "piece", ""

    def __init__(self, kind: str, model: bytes) -> None:
        import sentencepiece as spm

        self.kind = kind
        self._model = model
        self.sp = spm.SentencePieceProcessor(model_proto=model)

    @classmethod
    def train(cls, lines: Iterable[str], kind: str = "bpe", vocab_size: int = 8000,
              character_coverage: float = 1.0) -> SentencePieceTokenizer:
        """Learn a model on ``lines`` (deterministic: one thread, no sampling of sentences)."""
        import sentencepiece as spm

        buf = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter([ln for ln in lines if ln.strip()]), model_writer=buf,
                model_type=kind, vocab_size=vocab_size, character_coverage=character_coverage,
                hard_vocab_limit=False, num_threads=1, unk_id=0, bos_id=-1, eos_id=-1,
                pad_id=-1, minloglevel=2)
        except RuntimeError as e:
            raise TreelmError(f"sentencepiece {kind} training failed: "
                              f"{str(e).strip().splitlines()[-1]}") from None
        return cls(kind, buf.getvalue())

    def alphabet(self) -> list[str]:
        from treelm.text.spm import single_characters

        return single_characters(self._model)

    def restrict(self, vocab: Iterable[str]) -> None:
        import sentencepiece as spm

        from treelm.text.spm import restrict

        self.sp = spm.SentencePieceProcessor(model_proto=restrict(self._model, set(vocab)))

    def encode_line(self, line: str) -> list[str]:
        return self.sp.encode(line, out_type=str)

    def decode_line(self, symbols: Sequence[str]) -> str:
        return self.sp.decode_pieces(list(symbols))

    def piece_text(self, symbol: str, line_start: bool) -> str:
        if symbol == EOS:
            return "\n"
        text = symbol.replace("\u2581", " ")
        return text.lstrip(" ") if line_start else text

    def model_bytes(self) -> bytes | None:
        return self._model


def make_tokenizer(kind: str, model: bytes | None = None) -> Tokenizer:
    """A tokenizer by kind; sentencepiece kinds need their trained ``model`` bytes."""
    if kind == "word":
        return WordTokenizer()
    if kind == "char":
        return CharTokenizer()
    if kind == "jieba":
        return JiebaTokenizer()
    if kind in ("bpe", "unigram"):
        if model is None:
            raise TreelmError(f"a {kind} tokenizer needs its trained sentencepiece model")
        return SentencePieceTokenizer(kind, model)
    raise TreelmError(f"unknown tokenizer {kind!r}; choose one of {', '.join(TOKENIZERS)}")


def tokenizer_from_spec(spec: dict[str, Any], model: bytes | None = None) -> Tokenizer:
    return make_tokenizer(str(spec.get("kind")), model)
