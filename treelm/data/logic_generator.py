"""New pairs for the logical inference data: formulas drawn as Bowman's generator draws them
(:mod:`treelm.data.logic_formulas` says what they are and mean).

A formula with exactly ``n`` operators is drawn top down: with ``n = 0`` a variable;
otherwise ``( not X )`` with probability 1/3 (never directly inside another ``not``: Bowman's data
has no ``( not ( not``), else ``and``/``or`` with equal chance and the remaining ``n − 1`` operators
split uniformly between the two operands. A pair of length ``n`` draws 4 of the 6 variables (as
Bowman does, so that the formulas share variables and the relations other than ``#`` are common),
one formula with ``n`` operators and one with ``m ~ U{0..n}``, in random order. Each length has its
own random stream, seeded by ``(seed, n)``, whose distinct pairs (a pair and its mirror image count
as one) are dealt out in order: first ``test``, then ``valid``, then ``train``, so that no pair
is in two splits and a split's pairs do not change when another split's size does. A length whose
distinct pairs run out (there are 3,549 with 1 operator) gives ``train`` what is left.

Here each length's stream of distinct pairs (:func:`distinct_pairs`); the dealing into splits is
:func:`treelm.data.logic.generate_split`'s.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from treelm.data.logic_formulas import (
    BINARY,
    NOT,
    OMEGA,
    VAR_MASK,
    VARIABLES,
    Formula,
    Pair,
    relation_of_masks,
    to_tokens,
)

P_NOT = 1 / 3            # Bowman's generator negates a node with probability 1/3
MAX_MISSES = 2000        # draws in a row that find no new pair: the length's pairs ran out


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
