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
directory module (:mod:`treelm.run.files`) owns the file names.

Training text is read by ``encode_line``; a user's input (``parse``, ``plot``, the API) by
``read_line``, which is the same for every run but one whose text is Chinese in a given script
(``script``, from ``data.script``; the Sinica Treebank's is ``taiwan``): there a symbol the
vocabulary lacks is converted to the run's script with OpenCC, and a word-level run trained on
segmented text (``word`` with a script) cuts an unknown stretch into words with jieba first
(:mod:`treelm.text.chinese`). ``level`` says what one symbol is,
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
#: How ``read_line`` segments input: the run's own way (``auto``), its tokenizer alone (``none``),
#: or jieba for the whole line (``jieba``, word-level runs).
SEGMENTS = ("auto", "none", "jieba")


def _has_cjk(symbol: str) -> bool:
    # CJK radicals, punctuation, kana and ideographs (U+2E80-U+9FFF), compatibility ideographs
    # (U+F900-U+FAFF) and the supplementary ideographs (U+20000 on); Latin, digits and their
    # full-width forms are neither converted nor cut
    return any("\u2e80" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" or ch >= "\U00020000"
               for ch in symbol)


class Tokenizer:
    kind: ClassVar[str]
    level: ClassVar[str]            # word | char | piece
    sep: ClassVar[str] = " "        # what joins two symbols of a line
    script: str | None = None       # the script of a Chinese run's text (text.chinese.SCRIPTS)
    _known: frozenset[str] | None = None    # the run's vocabulary, once restricted to it

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

    def read_line(self, line: str, segment: str = "auto") -> list[str]:
        """The symbols of one line of a user's input, as the tree verbs (``parse``, ``plot``,
        ``plot-tree --run``) and the API's ``parse``/``levels`` (so ``serve``'s trees) read it;
        ``score``, ``probe``, ``generate`` and ``eval --data`` still read with the training
        reader (``encode``), without conversion or jieba.

        ``segment``: ``auto`` (default) reads the line as this run does; ``none`` with its
        tokenizer alone; ``jieba`` cuts the line into words with jieba instead (Chinese text
        without spaces, word-level runs only). For a run with a ``script``, each symbol with
        Chinese characters that the vocabulary lacks is converted to that script (OpenCC), and
        under ``auto`` a word-level run (``kind`` word) that still lacks it cuts it with jieba
        and reads each piece so (a known piece as written, another converted). Symbols the run
        knows are never changed.

        Raises:
            TreelmError: ``jieba`` for a run that reads characters or pieces; jieba or
                opencc-py needed and not installed.
        """
        from treelm.text import chinese

        if segment not in SEGMENTS:
            raise TreelmError(f"segment must be one of {', '.join(SEGMENTS)}, got {segment!r}")
        line = line.strip("\r\n")
        if segment == "jieba":
            if self.level != "word":
                raise TreelmError("--segment jieba makes words; this run's model reads "
                                  "characters or pieces")
            symbols = chinese.segment(line.strip(), self.script)
        else:
            symbols = self.encode_line(line)
        if self.script is None:
            return symbols
        known = self._known or frozenset()
        cut = segment == "auto" and self.kind == "word"
        out: list[str] = []
        for s in symbols:
            if s in known or not _has_cjk(s):
                out.append(s)
                continue
            convert = chinese.converter(self.script)
            if (c := convert(s)) in known or not cut:
                out.append(c)
                continue
            out.extend(p if p in known else convert(p) for p in chinese.segment(s, self.script))
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
        """Emit only symbols of ``vocab`` where the segmentation can (piece models; the others'
        ``encode_line`` does not depend on a vocabulary). ``read_line`` knows ``vocab`` from
        here on: what a Chinese run's input conversion leaves alone."""
        self._known = frozenset(vocab)

    def spec(self) -> dict[str, Any]:
        return {"kind": self.kind, **({"script": self.script} if self.script else {})}

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

        known = frozenset(vocab)
        super().restrict(known)
        self.sp = spm.SentencePieceProcessor(model_proto=restrict(self._model, set(known)))

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


def make_tokenizer(kind: str, model: bytes | None = None, script: str | None = None
                   ) -> Tokenizer:
    """A tokenizer by kind; sentencepiece kinds need their trained ``model`` bytes. ``script``:
    the script of a Chinese run's text (:data:`treelm.text.chinese.SCRIPTS`), which
    :meth:`Tokenizer.read_line` converts input to."""
    tok: Tokenizer
    if kind == "word":
        tok = WordTokenizer()
    elif kind == "char":
        tok = CharTokenizer()
    elif kind == "jieba":
        tok = JiebaTokenizer()
    elif kind in ("bpe", "unigram"):
        if model is None:
            raise TreelmError(f"a {kind} tokenizer needs its trained sentencepiece model")
        tok = SentencePieceTokenizer(kind, model)
    else:
        raise TreelmError(f"unknown tokenizer {kind!r}; choose one of {', '.join(TOKENIZERS)}")
    if script is not None:
        from treelm.text.chinese import check_script

        tok.script = check_script(script)
    return tok


def tokenizer_from_spec(spec: dict[str, Any], model: bytes | None = None) -> Tokenizer:
    script = spec.get("script")
    return make_tokenizer(str(spec.get("kind")), model,
                          None if script is None else str(script))
