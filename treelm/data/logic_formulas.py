"""The formulas of the logical inference data (Bowman, Manning & Potts 2015): their tokens, their
meaning, and the relation of a pair (:mod:`treelm.data.logic` is the data; new pairs are drawn by
:mod:`treelm.data.logic_generator`).

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

"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from treelm.errors import TreelmError

VARIABLES = ("a", "b", "c", "d", "e", "f")
BINARY = ("and", "or")
NOT = "not"
OPEN, CLOSE = "(", ")"
TOKENS = (OPEN, CLOSE, *VARIABLES, *BINARY, NOT)          # every symbol a formula may hold
RELATIONS = ("=", "<", ">", "^", "|", "v", "#")
RELATION_NAMES = {"=": "equivalence", "<": "forward entailment", ">": "reverse entailment",
                  "^": "negation", "|": "alternation", "v": "cover", "#": "independence"}

N_WORLDS = 2 ** len(VARIABLES)                 # 64 truth assignments
OMEGA = (1 << N_WORLDS) - 1                    # the mask of all of them
# ⟦x_k⟧: bit j set iff variable k is true in assignment j (bit k of j)
VAR_MASK = {v: sum(1 << j for j in range(N_WORLDS) if j >> k & 1)
            for k, v in enumerate(VARIABLES)}

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
