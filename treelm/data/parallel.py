"""Parallel text for translation: pairs of aligned lines, read from files or generated in code.

**Files.** A split is two plain-text files in ``dir``, ``{stem}.{src}`` and ``{stem}.{tgt}`` (line
``i`` of one translates line ``i`` of the other), gzip-compressed ``{stem}.{lang}.gz`` read as
well: the layout of Multi30k (``train``, ``val``, ``test_2016_flickr`` for ``de`` / ``en``). Each
line is checked as it is read, and every problem is a one-line
:class:`~treelm.data.corpus.CorpusError` naming the file (and the line): a missing file, bytes
that are not UTF-8, two sides with different numbers of lines, an empty line (``empty_lines:
error``; ``skip`` drops the pair instead). Surrounding whitespace is stripped; text is otherwise
kept as it is (cased, untokenised: BLEU is computed on detokenised text against these lines).

**Synthetic tasks** (``synthetic: copy | reverse | sort``) draw source sentences of
``synthetic_lengths`` = [a, b] symbols (uniform length in a..b, symbols uniform over the first
``synthetic_vocab`` letters) and compute their target: the same sentence, the sentence reversed,
the symbols in sorted order. Each split has its own seed (``synthetic_seed`` and the split), so
valid and test are held out from training (a repeated sentence is rare: 20⁵ sentences of the
shortest length alone).

The ``data:`` section (:class:`ParallelData`)::

    data:
      dir: ../shared/data/multi30k     # {stem}.{lang} or {stem}.{lang}.gz files
      src: de                          # source language suffix
      tgt: en                          # target language suffix
      train: train                     # file stems of the three splits
      valid: val
      test: test_2016_flickr
      synthetic: null                  # copy | reverse | sort: pairs made in code, no files
      synthetic_sizes: [20000, 500, 500]   # pairs in train, valid, test
      synthetic_lengths: [5, 20]       # shortest and longest source sentence
      synthetic_vocab: 20              # symbols a, b, c, ... (at most 26)
      synthetic_seed: 1
      tokenizer: null                  # bpe | unigram | word; null: bpe for files, word for
                                       # synthetic
      vocab_size: 8000                 # bpe / unigram pieces (per model)
      joint: true                      # one piece model and vocabulary for both languages
      empty_lines: error               # error | skip (the pair is dropped)
      max_len: 100                     # training pairs longer than this (in symbols, either
                                       # side) are dropped; null keeps all
"""

from __future__ import annotations

import gzip
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from treelm.config import parse_section
from treelm.data.batching import cut_batches
from treelm.data.corpus import CorpusError
from treelm.errors import ConfigError

SPLITS = ("train", "valid", "test")
SYNTHETIC = ("copy", "reverse", "sort")
EMPTY_LINES = ("error", "skip")
LETTERS = "abcdefghijklmnopqrstuvwxyz"


@dataclass
class ParallelData:
    """The ``data:`` section of a translation task."""

    dir: str | None = None               # directory with {stem}.{lang}[.gz] files
    src: str = "de"                      # source language suffix
    tgt: str = "en"                      # target language suffix
    train: str = "train"                 # file stems of the splits
    valid: str = "val"
    test: str = "test_2016_flickr"
    synthetic: str | None = None         # copy | reverse | sort: generated pairs, no files
    synthetic_sizes: list[int] = field(default_factory=lambda: [20000, 500, 500])
    synthetic_lengths: list[int] = field(default_factory=lambda: [5, 20])
    synthetic_vocab: int = 20            # symbols: the first n letters
    synthetic_seed: int = 1
    tokenizer: str | None = None         # bpe | unigram | word (default: bpe, word if synthetic)
    vocab_size: int = 8000               # bpe / unigram pieces
    joint: bool = True                   # one piece model and vocabulary for both sides
    empty_lines: str = "error"           # error | skip
    max_len: int | None = 100            # longer training pairs are dropped; None keeps all

    RULES: ClassVar[dict[str, Any]] = {
        "synthetic": SYNTHETIC, "synthetic_sizes": ">= 1", "synthetic_lengths": ">= 1",
        "synthetic_vocab": ">= 1", "tokenizer": ("bpe", "unigram", "word"),
        "vocab_size": ">= 1", "empty_lines": EMPTY_LINES, "max_len": ">= 1"}
    PATH_KEYS: ClassVar[tuple[str, ...]] = ("dir",)

    @classmethod
    def parse(cls, d: dict[str, Any] | None) -> ParallelData:
        spec = parse_section(cls, d, "data")
        if spec.synthetic is None:
            if spec.dir is None:
                raise ConfigError("a translation task needs data.dir (with {stem}.{src} and "
                                  "{stem}.{tgt} files) or data.synthetic (copy, reverse, sort)")
            if spec.src == spec.tgt:
                raise ConfigError(f"data.src and data.tgt are both {spec.src!r}")
            return spec
        if spec.dir is not None:
            raise ConfigError("data.dir and data.synthetic contradict each other: the pairs come "
                              "from files or are generated (data.dir=null removes the first)")
        if len(spec.synthetic_sizes) != 3:
            raise ConfigError(f"data.synthetic_sizes = {spec.synthetic_sizes}: expected three "
                              "sizes, [train, valid, test]")
        lo_hi = spec.synthetic_lengths
        if len(lo_hi) != 2 or lo_hi[0] > lo_hi[1]:
            raise ConfigError(f"data.synthetic_lengths = {lo_hi}: expected [shortest, longest]")
        if not 2 <= spec.synthetic_vocab <= len(LETTERS):
            raise ConfigError(f"data.synthetic_vocab = {spec.synthetic_vocab}: must be 2 to "
                              f"{len(LETTERS)} (the symbols are letters)")
        return spec

    @property
    def tokenizer_kind(self) -> str:
        return self.tokenizer or ("word" if self.synthetic else "bpe")


@dataclass
class Pairs:
    """Aligned source and target sentences of one split (text, as read)."""

    src: list[str]
    tgt: list[str]
    where: str                      # what the pairs came from, for messages
    skipped: int = 0                # pairs dropped for an empty side (empty_lines: skip)

    def __len__(self) -> int:
        return len(self.src)


def side_file(spec: ParallelData, split: str, lang: str) -> Path:
    """``{dir}/{stem}.{lang}``, or its ``.gz`` when only that exists."""
    return stem_file(Path(str(spec.dir)) / str(getattr(spec, split)), lang)


def split_files(spec: ParallelData) -> list[Path]:
    """Every file the data comes from (none for a synthetic task)."""
    if spec.synthetic:
        return []
    return [side_file(spec, s, lang) for s in SPLITS for lang in (spec.src, spec.tgt)]


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file (``.gz`` decompressed), stripped; one-line errors naming
    the file, and the line for bytes that are not UTF-8."""
    if path.is_dir():
        raise CorpusError(f"{path}: is a directory")
    if not path.exists():
        raise CorpusError(f"{path}: no such file (nor {path.name}.gz)")
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError) as e:
        raise CorpusError(f"{path}: cannot read ({e})") from None
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":          # the newline that ends the last line
        lines.pop()
    out = []
    for i, b in enumerate(lines, 1):
        try:
            out.append(b.decode("utf-8").strip())
        except UnicodeDecodeError as e:
            raise CorpusError(f"{path}:{i}: not UTF-8 text ({e.reason} at byte {e.start} of "
                              "the line)") from None
    return out


def stem_file(stem: str | Path, lang: str) -> Path:
    """``{stem}.{lang}``, or its ``.gz`` when only that exists."""
    plain = Path(f"{stem}.{lang}")
    gz = plain.with_name(plain.name + ".gz")
    return gz if not plain.exists() and gz.exists() else plain


def read_pairs(spec: ParallelData, split: str) -> Pairs:
    """The checked pairs of a split from its two files."""
    return read_pair_files(side_file(spec, split, spec.src), side_file(spec, split, spec.tgt),
                           spec.empty_lines)


def read_stem(stem: str | Path, spec: ParallelData) -> Pairs:
    """The checked pairs of ``{stem}.{src}`` / ``{stem}.{tgt}`` (plain or ``.gz``), as a split's
    files are read: ``treelm eval --data STEM``. A path to one side's file instead of the stem is
    a one-line error saying so."""
    sf, tf = stem_file(stem, spec.src), stem_file(stem, spec.tgt)
    if not sf.exists() and not tf.exists():
        name = str(stem)
        for lang in (spec.src, spec.tgt):
            for end in (f".{lang}", f".{lang}.gz"):
                if name.endswith(end):
                    raise CorpusError(f"{name}: give the file stem, {name[: -len(end)]} "
                                      f"({name[: -len(end)]}.{spec.src} and "
                                      f"{name[: -len(end)]}.{spec.tgt} are read)")
        raise CorpusError(f"{sf}: no such file (nor {sf.name}.gz); --data takes a file stem "
                          f"STEM with STEM.{spec.src} and STEM.{spec.tgt}")
    return read_pair_files(sf, tf, spec.empty_lines)


def read_pair_files(sf: Path, tf: Path, empty_lines: str = "error") -> Pairs:
    """The checked pairs of two aligned files (module docstring)."""
    src, tgt = read_lines(sf), read_lines(tf)
    if len(src) != len(tgt):
        raise CorpusError(f"{tf}: {len(tgt)} lines, but {sf} has {len(src)} (the two sides of "
                          "a split must be aligned line by line)")
    pairs = Pairs([], [], f"{sf} / {tf}")
    for i, (s, t) in enumerate(zip(src, tgt, strict=True), 1):
        if not s or not t:
            if empty_lines == "error":
                raise CorpusError(f"{sf if not s else tf}:{i}: empty line (data.empty_lines: "
                                  "skip drops such pairs)")
            pairs.skipped += 1
            continue
        pairs.src.append(s)
        pairs.tgt.append(t)
    if not pairs.src:
        raise CorpusError(f"{sf}: no sentence pairs")
    return pairs


def synthetic_target(kind: str, words: list[str]) -> list[str]:
    if kind == "copy":
        return list(words)
    if kind == "reverse":
        return words[::-1]
    if kind == "sort":
        return sorted(words)
    raise ValueError(f"unknown synthetic task {kind!r}")


def synthetic_pairs(spec: ParallelData, split: str) -> Pairs:
    """``n`` generated pairs of the split (deterministic in ``synthetic_seed`` and the split)."""
    n = spec.synthetic_sizes[SPLITS.index(split)]
    rng = random.Random(f"{spec.synthetic_seed}/{spec.synthetic}/{split}")
    symbols = LETTERS[: spec.synthetic_vocab]
    lo, hi = spec.synthetic_lengths
    pairs = Pairs([], [], f"synthetic {spec.synthetic} ({split})")
    for _ in range(n):
        words = [rng.choice(symbols) for _ in range(rng.randint(lo, hi))]
        pairs.src.append(" ".join(words))
        pairs.tgt.append(" ".join(synthetic_target(str(spec.synthetic), words)))
    return pairs


def load_pairs(spec: ParallelData, split: str) -> Pairs:
    return synthetic_pairs(spec, split) if spec.synthetic else read_pairs(spec, split)


def token_batches(src_lens: list[int], tgt_lens: list[int], max_tokens: int,
                  rng: random.Random | None = None, pool: int = 0) -> list[list[int]]:
    """Pair indices cut into batches of at most ``max_tokens`` padded tokens, ``n · max(longest
    source, longest target) <= max_tokens`` (a pair longer than that alone is a batch of its own).

    With ``rng`` (training): the pairs are shuffled, sorted by length within pools of ``pool``
    pairs (0: all of them), cut into batches and the batches shuffled, so that a batch holds pairs
    of similar length (little padding) and the order of batches is random; ties in length are
    broken by the shuffle. Without ``rng`` (evaluation): sorted by length, in order. Every index
    appears in exactly one batch; the result is a function of ``rng``'s state alone, so a
    position in it is all that a resume needs.
    """
    idx = list(range(len(src_lens)))
    if rng is not None:
        rng.shuffle(idx)
    batches = cut_batches(idx, max_tokens=max_tokens, window=pool,
                          lengths=[max(s, t) for s, t in zip(src_lens, tgt_lens, strict=True)],
                          keys=list(zip(src_lens, tgt_lens, strict=True)))
    if rng is not None:
        rng.shuffle(batches)
    return batches
