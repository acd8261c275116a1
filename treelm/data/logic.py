"""Logical inference data (Bowman, Manning & Potts 2015): pairs of propositional formulas over six
variables labelled with one of seven set relations; train on short formulas, test on long ones.

**Formulas.** Variables ``a … f``, ``and``, ``or``, ``not``, bracketed as in Bowman's released
files: a variable is itself, a negation is ``( not X )``, a conjunction or disjunction is
``( L ( and R ) )`` / ``( L ( or R ) )`` (the operator is bracketed with its right operand, so every
binary node is two brackets deep). The *number of operators* of a formula counts its ``and``,
``or`` and ``not`` tokens; that of a pair is the larger of its two formulas' (Bowman's files
``train<n>``/``test<n>`` are named by it).

**Meaning.** With the 64 truth assignments ``w ∈ {0,1}^6`` numbered ``j = Σ_k w_k 2^k``, a formula
denotes the set ``⟦φ⟧ = {j : φ is true under w_j}``, held as a 64-bit mask: ``⟦x_k⟧`` is the mask
of the assignments whose bit k is set, ``⟦¬φ⟧ = Ω ∖ ⟦φ⟧``, ``⟦φ ∧ ψ⟧ = ⟦φ⟧ ∩ ⟦ψ⟧``,
``⟦φ ∨ ψ⟧ = ⟦φ⟧ ∪ ⟦ψ⟧`` (bitwise not, and, or). The relation of a pair ``(φ, ψ)`` with
``A = ⟦φ⟧, B = ⟦ψ⟧`` is, checked in this order:

    =  equivalence          A = B
    <  forward entailment   A ⊂ B
    >  reverse entailment   A ⊃ B
    ^  negation             A ∩ B = ∅  and  A ∪ B = Ω
    |  alternation          A ∩ B = ∅  (and A ∪ B ≠ Ω)
    v  cover                A ∪ B = Ω  (and A ∩ B ≠ ∅)
    #  independence         otherwise

These seven are mutually exclusive only when neither set is ∅ or Ω (∅ is both a subset of every
set and disjoint from it). Bowman's generator (``generate_neg_set_data.py``) draws formulas again
until neither side is always true or always false, so his data has no such formula; our generator
does the same, and :func:`relation` refuses them.

**Generator.** A formula with exactly ``n`` operators is drawn top down: with ``n = 0`` a variable;
otherwise ``( not X )`` with probability 1/3 (never directly inside another ``not``: Bowman's data
has no ``( not ( not``), else ``and``/``or`` with equal chance and the remaining ``n − 1`` operators
split uniformly between the two operands. A pair of length ``n`` draws 4 of the 6 variables (as
Bowman does, so that the formulas share variables and the relations other than ``#`` are common),
one formula with ``n`` operators and one with ``m ~ U{0..n}``, in random order. Each length has its
own random stream, seeded by ``(seed, n)``, whose distinct pairs (a pair and its mirror image count
as one) are dealt out in order: first ``test``, then ``valid``, then ``train``, so that no pair
is in two splits and a split's pairs do not change when another split's size does. A length whose
distinct pairs run out (there are 3,549 with 1 operator) gives ``train`` what is left.

**Files.** One pair a line, ``relation TAB formula TAB formula``; every formula is parsed, every
relation symbol checked and every relation recomputed as it is read (all 249,069 lines of Bowman's
released files agree with :func:`relation`), a one-line :class:`~treelm.data.corpus.CorpusError`
naming the file and the line otherwise. A split given as a directory reads its files ``<split><n>``
(``train0 … train6``, ``test0 … test12``: Bowman's layout).

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

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from treelm.config import parse_section
from treelm.data.corpus import CorpusError, tsv_rows
from treelm.data.sources import SOURCES, SPLITS, check_source, held_out
from treelm.errors import ConfigError, TreelmError

VARIABLES = ("a", "b", "c", "d", "e", "f")
BINARY = ("and", "or")
NOT = "not"
OPEN, CLOSE = "(", ")"
TOKENS = (OPEN, CLOSE, *VARIABLES, *BINARY, NOT)          # every symbol a formula may hold
RELATIONS = ("=", "<", ">", "^", "|", "v", "#")
RELATION_NAMES = {"=": "equivalence", "<": "forward entailment", ">": "reverse entailment",
                  "^": "negation", "|": "alternation", "v": "cover", "#": "independence"}
DEAL = ("test", "valid", "train")        # the order each length's pairs are dealt out in

N_WORLDS = 2 ** len(VARIABLES)                 # 64 truth assignments
OMEGA = (1 << N_WORLDS) - 1                    # the mask of all of them
# ⟦x_k⟧: bit j set iff variable k is true in assignment j (bit k of j)
VAR_MASK = {v: sum(1 << j for j in range(N_WORLDS) if j >> k & 1)
            for k, v in enumerate(VARIABLES)}

P_NOT = 1 / 3            # Bowman's generator negates a node with probability 1/3
MAX_MISSES = 2000        # draws in a row that find no new pair: the length's pairs ran out

# a variable, ("not", φ), or ("and" | "or", φ, ψ)
Formula = str | tuple[Any, ...]


class FormulaError(TreelmError):
    """A formula that does not parse; the reader adds the file and line."""


@dataclass(frozen=True)
class Pair:
    relation: str                 # one of RELATIONS
    left: tuple[str, ...]         # tokens of the first formula
    right: tuple[str, ...]
    ops: int                      # operators of the longer formula

    def line(self) -> str:
        """The pair as a line of Bowman's files (without the newline)."""
        return f"{self.relation}\t{' '.join(self.left)}\t{' '.join(self.right)}"


# ----------------------------------------------------------------------------- formulas


def to_tokens(f: Formula) -> list[str]:
    """Bowman's bracketing: ``x``, ``( not X )``, ``( L ( op R ) )``."""
    if isinstance(f, str):
        return [f]
    if f[0] == NOT:
        return [OPEN, NOT, *to_tokens(f[1]), CLOSE]
    return [OPEN, *to_tokens(f[1]), OPEN, f[0], *to_tokens(f[2]), CLOSE, CLOSE]


def to_text(f: Formula) -> str:
    return " ".join(to_tokens(f))


def parse(text: str | list[str] | tuple[str, ...]) -> Formula:
    """A formula from its tokens (a string is split on whitespace); FormulaError if malformed."""
    toks = text.split() if isinstance(text, str) else list(text)
    if not toks:
        raise FormulaError("empty formula")
    for t in toks:
        if t not in TOKENS:
            raise FormulaError(f"unknown token {t!r} (known: {' '.join(TOKENS)})")
    depth = 0
    for t in toks:
        depth += (t == OPEN) - (t == CLOSE)
        if depth < 0:
            raise FormulaError("unbalanced brackets: ')' without '('")
    if depth:
        raise FormulaError(f"unbalanced brackets: {depth} '(' not closed")
    pos = 0

    def take(want: tuple[str, ...] | None = None) -> str:
        nonlocal pos
        if pos == len(toks):
            raise FormulaError("formula ends too early")
        t = toks[pos]
        if want is not None and t not in want:
            raise FormulaError(f"expected {' or '.join(repr(w) for w in want)} at token "
                               f"{pos + 1}, got {t!r}")
        pos += 1
        return t

    def expr() -> Formula:
        t = take()
        if t in VARIABLES:
            return t
        if t != OPEN:
            raise FormulaError(f"expected a variable or '(' at token {pos}, got {t!r}")
        if toks[pos:pos + 1] == [NOT]:
            take()
            inner = expr()
            take((CLOSE,))
            return (NOT, inner)
        left = expr()
        take((OPEN,))
        op = take(BINARY)
        right = expr()
        take((CLOSE,))
        take((CLOSE,))
        return (op, left, right)

    f = expr()
    if pos != len(toks):
        raise FormulaError(f"tokens after the end of the formula, from token {pos + 1}")
    return f


def n_ops(f: Formula) -> int:
    """Operators (and, or, not) in ``f``."""
    if isinstance(f, str):
        return 0
    return 1 + sum(n_ops(g) for g in f[1:])


def truth_mask(f: Formula) -> int:
    """⟦f⟧: bit j set iff ``f`` is true under assignment j (64 bits)."""
    if isinstance(f, str):
        return VAR_MASK[f]
    if f[0] == NOT:
        return OMEGA ^ truth_mask(f[1])
    a, b = truth_mask(f[1]), truth_mask(f[2])
    return a & b if f[0] == "and" else a | b


def relation_of_masks(a: int, b: int) -> str:
    """The relation of two denotations, neither ∅ nor Ω (see the module docstring)."""
    if a in (0, OMEGA) or b in (0, OMEGA):
        raise ValueError("a formula that is always true or always false has no single relation "
                         "(Bowman's data, like ours, has none)")
    if a == b:
        return "="
    if a & ~b == 0:
        return "<"
    if b & ~a == 0:
        return ">"
    disjoint, covering = a & b == 0, a | b == OMEGA
    if disjoint:
        return "^" if covering else "|"
    return "v" if covering else "#"


def relation(f: Formula, g: Formula) -> str:
    return relation_of_masks(truth_mask(f), truth_mask(g))


# ----------------------------------------------------------------------------- generator


def random_formula(rng: random.Random, n: int, variables: tuple[str, ...] | list[str],
                   negate: bool = True) -> tuple[Formula, int]:
    """A formula with exactly ``n`` operators over ``variables`` and its mask; ``negate=False``
    forbids a ``not`` at the top (used directly under a ``not``)."""
    if n == 0:
        v = rng.choice(variables)
        return v, VAR_MASK[v]
    if negate and rng.random() < P_NOT:
        inner, m = random_formula(rng, n - 1, variables, negate=False)
        return (NOT, inner), OMEGA ^ m
    k = rng.randint(0, n - 1)
    op = rng.choice(BINARY)
    left, a = random_formula(rng, k, variables)
    right, b = random_formula(rng, n - 1 - k, variables)
    return (op, left, right), (a & b if op == "and" else a | b)


def _contingent(rng: random.Random, n: int, variables: list[str]) -> tuple[Formula, int]:
    """A formula with ``n`` operators that is neither always true nor always false."""
    while True:
        f, m = random_formula(rng, n, variables)
        if m not in (0, OMEGA):
            return f, m


def random_pair(rng: random.Random, n: int, pair_variables: int = 4) -> Pair:
    """A pair whose longer formula has exactly ``n`` operators (the other: 0..n)."""
    variables = rng.sample(VARIABLES, pair_variables)
    f, a = _contingent(rng, n, variables)
    g, b = _contingent(rng, rng.randint(0, n), variables)
    if rng.random() < 0.5:
        f, a, g, b = g, b, f, a
    return Pair(relation_of_masks(a, b), tuple(to_tokens(f)), tuple(to_tokens(g)), n)


@dataclass
class _Stream:
    """One length's stream of distinct pairs, drawn as far as asked so far."""

    rng: random.Random
    pairs: list[Pair]
    seen: set[tuple[tuple[str, ...], tuple[str, ...]]]
    misses: int = 0


# each split of a run asks for a prefix of the same streams: draw each pair once per process
_STREAMS: dict[tuple[int, int, int], _Stream] = {}


def distinct_pairs(seed: int, n: int, count: int, pair_variables: int = 4) -> list[Pair]:
    """The first ``count`` distinct pairs of length ``n`` of the stream seeded by ``(seed, n)``
    (fewer when the stream finds no new pair ``MAX_MISSES`` times in a row). A pair and its
    mirror image are the same pair."""
    key = (seed, n, pair_variables)
    if key not in _STREAMS:
        _STREAMS[key] = _Stream(random.Random(f"treelm-logic:{seed}:{n}:{pair_variables}"),
                                [], set())
    st = _STREAMS[key]
    rng, seen, out = st.rng, st.seen, st.pairs
    while len(out) < count and st.misses < MAX_MISSES:
        p = random_pair(rng, n, pair_variables)
        pk = (p.left, p.right) if p.left <= p.right else (p.right, p.left)
        if pk in seen:
            st.misses += 1
            continue
        st.misses = 0
        seen.add(pk)
        out.append(p)
    return out[:count]


# ----------------------------------------------------------------------------- the data section


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

