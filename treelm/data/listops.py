"""ListOps (Nangia & Bowman 2018, *ListOps: a diagnostic dataset for latent tree learning*):
nested list operations on single digits, written in prefix form; the label is the value.

**Expressions.** A digit ``0 … 9`` is an expression; so is ``[OP e_1 … e_k ]`` with ``k ≥ 1``
expressions as arguments and one of four operators:

    [MAX  max(e_1 … e_k)          [MIN  min(e_1 … e_k)
    [SM   (e_1 + … + e_k) mod 10  [MED  ⌊median(e_1 … e_k)⌋

``MED`` is the original's ``int(np.median(args))`` (``make_data.py`` of nyu-mll/spinn): the middle
value for an odd count, and for an even count the mean of the two middle values rounded down,
``⌊(a_(k/2) + a_(k/2+1)) / 2⌋`` over the sorted arguments: ``[MED 1 4 ]`` is 2, neither the lower
(1) nor the upper (4) middle value. Every value is again a digit. The *depth* of an expression is
the nesting of its operators: 0 for a digit, ``1 + max depth(e_i)`` otherwise.

**Files.** The original TSV: one example a line, ``label TAB expression``. The original writes
the expression with round brackets that spell out its binary, left-branching tree
(``[MAX 2 9 ]`` is ``( ( ( [MAX 2 ) 9 ) ] )``): the reader accepts lines with them (which must then
be exactly that bracketing) and without them (as Long Range Arena's copy has it), and drops them
(they repeat what ``[OP`` and ``]`` say); the writer writes them unless told not to. Every label is
checked against the expression's value as it is read; a malformed line is a one-line
:class:`~treelm.data.corpus.CorpusError` naming the file and the line.

**Generator.** As the original's, but for the root, always an operator here (the original's may be
a bare digit); below it, a node at depth ``d`` (the root's arguments are at depth 2) is again an
operator with probability ``p_op`` while ``d ≤ max_depth`` (the original's ``VALUE_P`` is this
probability, 0.25; its ``MAX_DEPTH`` is our ``max_depth + 1``), else a uniform digit; an operator
takes ``k ~ U{2 … max_args}`` arguments and is one of the four with equal chance. Expressions
longer than ``max_length`` tokens (brackets not counted) are drawn again. Each split draws from its
own stream, seeded by ``(seed, split)``, and keeps distinct expressions of its own share of all
expressions: an expression belongs to test, valid or train by a hash of its text (1/10, 1/10,
8/10), so the splits never share one and a split does not change when another's size does. The test
split may go deeper (``test_depth``) than train and valid, to measure generalisation to deeper
nesting.

The ``data:`` section (:class:`ListOpsData`)::

    data:
      source: generate        # generate | files
      seed: 1                 # generate: the expressions depend on this seed only
      train_size: 20000       # generate: expressions per split
      valid_size: 1000
      test_size: 1000
      max_depth: 5            # generate: deepest nesting of train and valid
      test_depth: null        # generate: deepest nesting of test (default max_depth)
      max_args: 5             # generate: arguments per operator, 2..max_args
      max_length: 100         # generate: tokens per expression at most
      p_op: 0.25              # generate: an argument is an operator with this probability
      train: null             # files: the original TSV files
      valid: null             # files: none: every valid_every-th training example is held out
      valid_every: 10
      test: null
"""

from __future__ import annotations

import random
import statistics
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from treelm.config import parse_section
from treelm.data.corpus import CorpusError, tsv_rows
from treelm.data.sources import SOURCES, SPLITS, check_source, held_out
from treelm.errors import ConfigError, TreelmError

OPERATORS = ("[MAX", "[MIN", "[MED", "[SM")
END = "]"
DIGITS = tuple(str(d) for d in range(10))
TOKENS = (*OPERATORS, END, *DIGITS)                 # every symbol an expression may hold
BRACKETS = ("(", ")")                               # the original files' tree brackets
SHARE = {"test": (0,), "valid": (1,), "train": tuple(range(2, 10))}   # hash mod 10
MAX_MISSES = 20_000          # draws in a row that add nothing: the split's expressions ran out

# a digit, or (operator, [arguments])
Expr = int | tuple[str, list[Any]]


class ExpressionError(TreelmError):
    """An expression that does not parse; the reader adds the file and line."""


@dataclass(frozen=True)
class Example:
    label: int                    # the value, 0..9
    tokens: tuple[str, ...]       # prefix tokens, without the tree brackets
    depth: int

    def line(self, brackets: bool = True) -> str:
        """The example as a line of the original TSV (without the newline)."""
        expr = to_text(parse(self.tokens)) if brackets else " ".join(self.tokens)
        return f"{self.label}\t{expr}"


# ----------------------------------------------------------------------------- expressions


def value(e: Expr) -> int:
    if isinstance(e, int):
        return e
    op, args = e[0], [value(a) for a in e[1]]
    if op == "[MAX":
        return max(args)
    if op == "[MIN":
        return min(args)
    if op == "[SM":
        return sum(args) % 10
    return int(statistics.median(args))         # [MED: exact halves, so int() is ⌊·⌋


def depth(e: Expr) -> int:
    return 0 if isinstance(e, int) else 1 + max(depth(a) for a in e[1])


def to_tokens(e: Expr) -> list[str]:
    if isinstance(e, int):
        return [str(e)]
    return [e[0], *(t for a in e[1] for t in to_tokens(a)), END]


def to_text(e: Expr) -> str:
    """The original's bracketing: ``[OP a b ]`` is ``( ( ( [OP a ) b ) ] )``."""
    if isinstance(e, int):
        return str(e)
    s = e[0]
    for part in [*(to_text(a) for a in e[1]), END]:
        s = f"( {s} {part} )"
    return s


def parse(text: str | list[str] | tuple[str, ...]) -> Expr:
    """An expression from its prefix tokens (a string is split on whitespace; the tree brackets
    must not be in it); ExpressionError if malformed."""
    toks = text.split() if isinstance(text, str) else list(text)
    if not toks:
        raise ExpressionError("empty expression")
    for i, t in enumerate(toks, 1):
        if t not in TOKENS:
            raise ExpressionError(f"unknown token {t!r} at token {i} (known: {' '.join(TOKENS)})")
    pos = 0

    def expr() -> Expr:                 # called with pos < len(toks)
        nonlocal pos
        t, start = toks[pos], pos + 1
        pos += 1
        if t in DIGITS:
            return int(t)
        if t == END:
            raise ExpressionError(f"']' at token {start} closes no operator")
        args = []
        while pos < len(toks) and toks[pos] != END:
            args.append(expr())
        if pos == len(toks):
            raise ExpressionError(f"{t} at token {start} is never closed by ']'")
        if not args:
            raise ExpressionError(f"{t} at token {start} has no arguments")
        pos += 1
        return (t, args)

    e = expr()
    if pos != len(toks):
        raise ExpressionError(f"tokens after the end of the expression, from token {pos + 1}")
    return e


# ----------------------------------------------------------------------------- generator


def random_expression(rng: random.Random, max_depth: int, max_args: int = 5,
                      p_op: float = 0.25, level: int = 1) -> Expr:
    """An operator at depth ``level`` whose arguments are operators with probability ``p_op``
    while they are at most ``max_depth`` deep, digits otherwise (module docstring)."""
    args: list[Expr] = []
    for _ in range(rng.randint(2, max_args)):
        if level < max_depth and rng.random() < p_op:
            args.append(random_expression(rng, max_depth, max_args, p_op, level + 1))
        else:
            args.append(rng.randrange(10))
    return (rng.choice(OPERATORS), args)


def share(tokens: list[str] | tuple[str, ...]) -> str:
    """The split an expression belongs to, by a hash of its text."""
    h = zlib.crc32(" ".join(tokens).encode()) % 10
    return next(s for s, hs in SHARE.items() if h in hs)


# ----------------------------------------------------------------------------- the data section


@dataclass
class ListOpsData:
    """The ``data:`` section of the ListOps task."""

    source: str = "generate"         # generate | files
    seed: int = 1
    train_size: int = 20000
    valid_size: int = 1000
    test_size: int = 1000
    max_depth: int = 5               # train and valid
    test_depth: int | None = None    # test; default max_depth
    max_args: int = 5
    max_length: int = 100
    p_op: float = 0.25
    train: str | None = None
    valid: str | None = None
    valid_every: int = 10
    test: str | None = None

    RULES: ClassVar[dict[str, Any]] = {
        "source": SOURCES, "train_size": ">= 1", "valid_size": ">= 1",
        "test_size": ">= 1", "max_depth": ">= 1", "test_depth": ">= 1", "max_args": ">= 1",
        "max_length": ">= 1", "p_op": "[0, 1)", "valid_every": ">= 1"}
    PATH_KEYS: ClassVar[tuple[str, ...]] = SPLITS

    @classmethod
    def parse(cls, d: dict[str, Any] | None) -> ListOpsData:
        spec = parse_section(cls, d, "data")
        check_source(spec)
        if spec.test_depth is not None and spec.test_depth < spec.max_depth:
            raise ConfigError(f"data.test_depth = {spec.test_depth} is below data.max_depth = "
                              f"{spec.max_depth}")
        for key, low in (("max_args", 2), ("valid_every", 2)):
            if getattr(spec, key) < low:
                raise ConfigError(f"data.{key} = {getattr(spec, key)}: must be at least {low}")
        if spec.max_length < 4:
            raise ConfigError(f"data.max_length = {spec.max_length}: the shortest expression "
                              "([OP a b ]) has 4 tokens")
        return spec

    def deepest(self, split: str) -> int:
        return (self.test_depth or self.max_depth) if split == "test" else self.max_depth


def generate_split(spec: ListOpsData, split: str) -> list[Example]:
    """``<split>_size`` distinct expressions of the split's share, drawn from its own stream."""
    want = getattr(spec, f"{split}_size")
    rng = random.Random(f"treelm-listops:{spec.seed}:{split}")
    seen: set[tuple[str, ...]] = set()
    out: list[Example] = []
    misses = 0
    while len(out) < want:
        e = random_expression(rng, spec.deepest(split), spec.max_args, spec.p_op)
        toks = tuple(to_tokens(e))
        if len(toks) > spec.max_length or toks in seen or share(toks) != split:
            misses += 1
            if misses == MAX_MISSES:
                raise ConfigError(f"only {len(out):,} distinct {split} expressions found (data."
                                  f"{split}_size = {want:,}); allow deeper or longer ones")
            continue
        misses = 0
        seen.add(toks)
        out.append(Example(value(e), toks, depth(e)))
    return out


# ----------------------------------------------------------------------------- files


def read_examples(path: str | Path) -> list[Example]:
    """One original-format TSV file; blank lines are skipped."""
    p = Path(path)
    out = []
    for i, cols in tsv_rows(p, "label<TAB>expression"):
        if i == 1 and cols == ["Source", "Target"]:
            raise CorpusError(f"{p}:1: a 'Source<TAB>Target' header (Long Range Arena's layout, "
                              "expression first); expected the original 'label<TAB>expression'")
        label, text = cols[0], cols[1].split()
        if label not in DIGITS:
            raise CorpusError(f"{p}:{i}: label {label!r} is not a digit 0-9")
        toks = [t for t in text if t not in BRACKETS]
        try:
            e = parse(toks)
        except ExpressionError as err:
            raise CorpusError(f"{p}:{i}: {err}") from None
        if len(toks) != len(text) and text != to_text(e).split():
            raise CorpusError(f"{p}:{i}: the round brackets are not the original's bracketing "
                              f"of this expression ({to_text(e)})")
        if value(e) != int(label):
            raise CorpusError(f"{p}:{i}: label {label}, but the expression's value is {value(e)}")
        out.append(Example(int(label), tuple(toks), depth(e)))
    if not out:
        raise CorpusError(f"{p}: no examples")
    return out


def write_examples(path: str | Path, examples: list[Example], brackets: bool = True) -> None:
    """Examples in the original format, one a line (``brackets``: the original's tree brackets)."""
    Path(path).write_text("".join(x.line(brackets) + "\n" for x in examples), encoding="utf-8")


def load_split(spec: ListOpsData, split: str) -> list[Example]:
    """A split's examples, generated or read (train without a valid file: all but every
    ``valid_every``-th; valid: those)."""
    if spec.source == "generate":
        return generate_split(spec, split)
    if split == "test" or spec.valid is not None:
        return read_examples(getattr(spec, split))
    return held_out(read_examples(spec.train), spec.valid_every, split)  # type: ignore[arg-type]


def data_files(spec: ListOpsData) -> list[str]:
    """The files a run's data comes from (none for generated data)."""
    return [] if spec.source == "generate" else [v for k in SPLITS if (v := getattr(spec, k))]
