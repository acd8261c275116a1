"""Logical inference data (Bowman, Manning & Potts 2015): pairs of propositional formulas over six
variables labelled with one of seven set relations; train on short formulas, test on long ones.

The formulas and their relations are :mod:`treelm.data.logic_formulas`'s, the pairs drawn for
``source: generate`` :mod:`treelm.data.logic_generator`'s; here the splits, generated or read from
files, and the ``data:`` section. Generated pairs are dealt out per length in the order ``DEAL``:
``test``, then ``valid``, then ``train``.

**Files.** One pair a line, ``relation TAB formula TAB formula``; every formula is parsed, every
relation symbol checked and every relation recomputed as it is read (all 249,069 lines of Bowman's
released files agree with :func:`~treelm.data.logic_formulas.relation`), a one-line
:class:`~treelm.data.corpus.CorpusError` naming the file and the line otherwise. A split given as a
directory reads its files ``<split><n>`` (``train0 … train6``, ``test0 … test12``: Bowman's
layout).

The ``data:`` section (:class:`LogicData`)::

    data:
      source: generate        # generate | files
      seed: 1                 # generate: the pairs depend on this seed only
      train_size: 12000       # generate: pairs per operator count 1..max_train_ops
      valid_size: 500         # generate: held-out pairs per operator count 1..max_train_ops
      test_size: 1000         # generate: pairs per operator count 1..max_test_ops
      max_train_ops: 6        # train and valid: pairs with at most this many operators
      max_test_ops: 12        # test: 1..this many; pairs with more count as this many
      pair_variables: 4       # generate: variables a pair is drawn over (of a..f)
      train: null             # files: a file, or a directory with train0..train<max_train_ops>
      valid: null             # files: a file or directory (valid<n>); none: every
      valid_every: 10         #   valid_every-th training pair is held out (Ordered Memory code)
      test: null              # files: a file, or a directory with test0..test<max_test_ops>
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from treelm.config import parse_section
from treelm.data.corpus import CorpusError, tsv_rows
from treelm.data.logic_formulas import (
    OMEGA,
    RELATION_NAMES,
    RELATIONS,
    VARIABLES,
    FormulaError,
    Pair,
    n_ops,
    parse,
    relation_of_masks,
    to_tokens,
    truth_mask,
)
from treelm.data.logic_generator import distinct_pairs
from treelm.data.sources import SOURCES, SPLITS, check_source, held_out
from treelm.errors import ConfigError

DEAL = ("test", "valid", "train")        # the order each length's pairs are dealt out in


@dataclass
class LogicData:
    """The ``data:`` section of the logical inference task."""

    source: str = "generate"         # generate | files
    seed: int = 1                    # generate: the pairs depend on this seed only
    train_size: int = 12000          # generate: pairs per operator count 1..max_train_ops
    valid_size: int = 500            # generate: held-out pairs per operator count (≤ train ops)
    test_size: int = 1000            # generate: pairs per operator count 1..max_test_ops
    max_train_ops: int = 6           # train and valid: at most this many operators
    max_test_ops: int = 12           # test: 1..this many; longer pairs count as this many
    pair_variables: int = 4          # generate: variables a pair is drawn over (of a..f)
    train: str | None = None         # files: a file, or a directory of train<n> files
    valid: str | None = None         # files: a file or directory; none: every valid_every-th
    valid_every: int = 10            #   training pair is held out
    test: str | None = None          # files: a file, or a directory of test<n> files

    RULES: ClassVar[dict[str, Any]] = {
        "source": SOURCES, "train_size": ">= 1", "valid_size": ">= 1", "test_size": ">= 1",
        "max_train_ops": ">= 1", "max_test_ops": ">= 1", "valid_every": ">= 1"}
    PATH_KEYS: ClassVar[tuple[str, ...]] = SPLITS

    @classmethod
    def parse(cls, d: dict[str, Any] | None) -> LogicData:
        spec = parse_section(cls, d, "data")
        check_source(spec)
        if spec.max_test_ops < spec.max_train_ops:
            raise ConfigError(f"data.max_test_ops = {spec.max_test_ops} is below data."
                              f"max_train_ops = {spec.max_train_ops}")
        if not 2 <= spec.pair_variables <= len(VARIABLES):
            raise ConfigError(f"data.pair_variables = {spec.pair_variables}: must be in "
                              f"[2, {len(VARIABLES)}]")
        return spec

    def ops_bucket(self, ops: int) -> int:
        """The operator count a pair is scored under: longer than max_test_ops counts as
        max_test_ops (Bowman's test12 holds every pair with 12 or more)."""
        return min(ops, self.max_test_ops)


def generate_split(spec: LogicData, split: str) -> list[Pair]:
    """A split of generated pairs: each length's distinct pairs dealt out test, valid, train."""
    top = spec.max_test_ops if split == "test" else spec.max_train_ops
    out: list[Pair] = []
    for n in range(1, top + 1):
        sizes = {"test": spec.test_size,
                 "valid": spec.valid_size if n <= spec.max_train_ops else 0,
                 "train": spec.train_size if n <= spec.max_train_ops else 0}
        before = sum(sizes[s] for s in DEAL[:DEAL.index(split)])
        pairs = distinct_pairs(spec.seed, n, before + sizes[split], spec.pair_variables)
        if split != "train" and len(pairs) < before + sizes[split]:
            raise ConfigError(f"only {len(pairs):,} distinct pairs have {n} operator"
                              f"{'s' * (n != 1)}; data.test_size + data.valid_size = "
                              f"{spec.test_size + spec.valid_size:,} leaves too few")
        out.extend(pairs[before:before + sizes[split]])
    return out


# ----------------------------------------------------------------------------- files

def read_pairs(path: str | Path) -> list[Pair]:
    """One Bowman-format file; blank lines are skipped."""
    p = Path(path)
    out = []
    for i, cols in tsv_rows(p, "relation<TAB>formula<TAB>formula"):
        rel = cols[0]
        if rel not in RELATIONS:
            raise CorpusError(f"{p}:{i}: unknown relation {rel!r} (known: {' '.join(RELATIONS)})")
        sides = []
        for which, text in (("first", cols[1]), ("second", cols[2])):
            try:
                f = parse(text)
            except FormulaError as e:
                raise CorpusError(f"{p}:{i}: {which} formula: {e}") from None
            sides.append(f)
        a, b = truth_mask(sides[0]), truth_mask(sides[1])
        for which, m in (("first", a), ("second", b)):
            if m in (0, OMEGA):
                raise CorpusError(f"{p}:{i}: the {which} formula is always "
                                  f"{'true' if m else 'false'}: the seven relations are defined "
                                  "only between formulas that are neither (Bowman's data has none)")
        true = relation_of_masks(a, b)
        if true != rel:
            raise CorpusError(f"{p}:{i}: relation {rel!r}, but the formulas are in relation "
                              f"{true!r} ({RELATION_NAMES[true]})")
        out.append(Pair(rel, tuple(to_tokens(sides[0])), tuple(to_tokens(sides[1])),
                        max(n_ops(sides[0]), n_ops(sides[1]))))
    return out


def split_files(path: str | Path, split: str, top: int) -> list[Path]:
    """The files a split is read from: the file itself, or a directory's ``<split>0..<top>``."""
    p = Path(path)
    if not p.is_dir():
        return [p]
    return [p / f"{split}{n}" for n in range(top + 1) if (p / f"{split}{n}").is_file()]


def read_split(path: str | Path, split: str, top: int) -> list[Pair]:
    p = Path(path)
    if not p.exists():
        raise CorpusError(f"{p}: no such file or directory")
    files = split_files(p, split, top)
    if not files:
        raise CorpusError(f"{p}: a directory without {split}0 … {split}{top}")
    pairs = [x for f in files for x in read_pairs(f)]
    if not pairs:
        raise CorpusError(f"{p}: no pairs")
    return pairs


def load_split(spec: LogicData, split: str) -> list[Pair]:
    """The pairs of a split, generated or read (train without a valid file: all but every
    ``valid_every``-th; valid: those)."""
    if spec.source == "generate":
        return generate_split(spec, split)
    if split == "test":
        return read_split(spec.test, "test", spec.max_test_ops)        # type: ignore[arg-type]
    if spec.valid is not None:
        return read_split(getattr(spec, split), split, spec.max_train_ops)
    pairs = read_split(spec.train, "train", spec.max_train_ops)        # type: ignore[arg-type]
    return held_out(pairs, spec.valid_every, split)


def data_files(spec: LogicData) -> list[str]:
    """The files a run's data comes from (none for generated data)."""
    if spec.source == "generate":
        return []
    out = []
    for split in SPLITS:
        path = getattr(spec, split)
        if path is not None:
            top = spec.max_test_ops if split == "test" else spec.max_train_ops
            out += [str(f) for f in split_files(path, split, top)]
    return out


def write_pairs(path: str | Path, pairs: list[Pair]) -> None:
    """Pairs in Bowman's format, one a line."""
    Path(path).write_text("".join(p.line() + "\n" for p in pairs), encoding="utf-8")
