"""Slot-filling data: utterances whose every word carries one IOB slot tag, and an optional intent.

Two layouts, chosen per split by what the path is:

* **a directory** with ``seq.in`` (words, space-separated, one utterance a line), ``seq.out``
  (one tag per word, aligned) and optionally ``label`` (one intent a line): the layout of the
  ATIS and SNIPS sets used since Goo et al. (2018);
* **a file** in CoNLL style: one word a line, its tag in the last whitespace-separated column
  (other columns ignored), a blank line between utterances; no intents.

Every line is checked as it is read: an utterance with no words, a tag count that differs from
the word count, a split whose ``label`` file has another number of lines: each is a one-line
:class:`~treelm.data.corpus.CorpusError` naming the file and the line.

The ``data:`` section (:class:`TaggingData`)::

    data:
      train: ../shared/data/atis/train     # directory (seq.in/seq.out[/label]) or CoNLL file
      valid: ../shared/data/atis/valid
      test: ../shared/data/atis/test
      lowercase: false                     # fold words to lower case (input at tag time too)
      min_count: 1                         # training words seen fewer times become <unk>
      unknown_labels: error                # a valid/test tag never seen in training: error |
                                           # score (kept as gold for scoring; never predicted)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from treelm.config import parse_section
from treelm.data.corpus import CorpusError, read_lines
from treelm.errors import ConfigError

SPLITS = ("train", "valid", "test")
UNKNOWN_LABELS = ("error", "score")
SEQ_FILES = ("seq.in", "seq.out", "label")     # words, tags, intents (the last optional)


@dataclass
class Utterance:
    words: list[str]
    tags: list[str]
    intent: str | None = None


@dataclass
class TaggingData:
    """The ``data:`` section of a slot-filling task."""

    train: str | None = None             # directory with seq.in/seq.out[/label], or CoNLL file
    valid: str | None = None
    test: str | None = None
    lowercase: bool = False              # fold words (and tagged input) to lower case
    min_count: int = 1                   # training words seen fewer times become <unk>
    unknown_labels: str = "error"        # valid/test tags unseen in training: error | score

    RULES: ClassVar[dict[str, Any]] = {"min_count": ">= 1", "unknown_labels": UNKNOWN_LABELS}
    PATH_KEYS: ClassVar[tuple[str, ...]] = SPLITS

    @classmethod
    def parse(cls, d: dict[str, Any] | None) -> TaggingData:
        spec = parse_section(cls, d, "data")
        missing = [k for k in SPLITS if getattr(spec, k) is None]
        if missing:
            raise ConfigError("a tagging task needs data.train, data.valid and data.test; "
                              f"missing: {', '.join('data.' + k for k in missing)}")
        return spec


def split_files(path: str | Path) -> list[Path]:
    """The files a split is read from: a CoNLL file itself, or a directory's SEQ_FILES."""
    p = Path(path)
    return [p / f for f in SEQ_FILES if (p / f).exists()] if p.is_dir() else [p]


def normalise(words: list[str], lowercase: bool) -> list[str]:
    """Words as the model reads them (training data and tagged input alike)."""
    return [w.lower() for w in words] if lowercase else list(words)


def read_seq_dir(path: Path) -> list[Utterance]:
    """``seq.in`` / ``seq.out`` / optional ``label`` of one split."""
    words_f, tags_f, label_f = (path / f for f in SEQ_FILES)
    words, tags = read_lines(words_f), read_lines(tags_f)
    if len(words) != len(tags):
        raise CorpusError(f"{tags_f}: {len(tags)} lines, but {words_f} has {len(words)}")
    intents: list[str | None] = [None] * len(words)
    if label_f.exists():
        labels = read_lines(label_f)
        if len(labels) != len(words):
            raise CorpusError(f"{label_f}: {len(labels)} lines, but {words_f} has {len(words)}")
        intents = [s.strip() or None for s in labels]
    out = []
    for i, (w, t) in enumerate(zip(words, tags, strict=True), 1):
        ws, ts = w.split(), t.split()
        if not ws:
            raise CorpusError(f"{words_f}:{i}: empty utterance")
        if len(ws) != len(ts):
            raise CorpusError(f"{tags_f}:{i}: {len(ts)} tags for {len(ws)} words")
        out.append(Utterance(ws, ts, intents[i - 1]))
    return out


def read_conll(path: Path) -> list[Utterance]:
    """One ``word ... tag`` a line, utterances separated by blank lines."""
    out: list[Utterance] = []
    cur = Utterance([], [])
    for i, line in enumerate(read_lines(path), 1):
        cols = line.split()
        if not cols:
            if cur.words:
                out.append(cur)
            cur = Utterance([], [])
            continue
        if len(cols) < 2:
            raise CorpusError(f"{path}:{i}: a word without a tag (need 'word ... tag')")
        cur.words.append(cols[0])
        cur.tags.append(cols[-1])
    if cur.words:
        out.append(cur)
    return out


def read_split(path: str | Path, lowercase: bool = False) -> list[Utterance]:
    p = Path(path)
    if not p.exists():
        raise CorpusError(f"{p}: no such file or directory")
    utts = read_seq_dir(p) if p.is_dir() else read_conll(p)
    if not utts:
        raise CorpusError(f"{p}: no utterances")
    for u in utts:
        u.words = normalise(u.words, lowercase)
    return utts


def check_labels(utts: list[Utterance], known: set[str], where: str) -> None:
    """A one-line error for the first tag of ``utts`` outside ``known``."""
    for i, u in enumerate(utts, 1):
        for t in u.tags:
            if t not in known:
                raise CorpusError(f"{where}: utterance {i}: label {t!r} does not occur in the "
                                  "training data (data.unknown_labels=score keeps it as gold "
                                  "for scoring)")
