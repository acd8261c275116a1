"""The minimal pairs of Marvin & Linzen (2018), "Targeted Syntactic Evaluation of Language
Models", re-made from a lexicon of our own in Penn Treebank words.

A language model is asked to prefer the grammatical sentence of each pair; the pairs test
**subject-verb agreement** (ten constructions), **reflexive anaphora** (three) and **negative
polarity items** (two). Each construction is a template of slots (determiners, nouns, verbs,
prepositions, …) filled from the word lists of :mod:`treelm.suite.lexicon` (Penn Treebank
words); every lexical combination is used in every *condition* (the number of each noun, or the
tense for NPIs), as in the original, so that a
construction's accuracy does not lean on one number or one word. The two sentences of a pair
differ only in the **focus**: the verb that must agree (its first word, for a phrase such as
``is happy`` or ``works for a large bank in new york``), the reflexive, or, for NPIs, the
licensor ``no``/``few`` replaced by ``the`` (across a relative clause the licensor moves into
the relative clause instead: *no* X that *the* Y like … vs. *the* X that *no* Y like …, M&L's
"intrusive licensor" contrast). Generated pairs record those positions (:attr:`Pair.focus`), and
the tests check every pair against them.

How many pairs: by default as many per construction as M&L's suite has (:data:`ORIGINAL`,
counted from their ``EMNLP2018/templates``, animate and inanimate variants together, in the same
proportion), drawn from all the lexical combinations of the construction without replacement,
deterministically from ``seed``. ``max_per_construction`` asks for another number per
construction (fewer, or more up to all the combinations the lexicon makes).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from treelm.suite.lexicon import (
    ATTRACTORS,
    AUX,
    EMBEDDED_VERBS,
    GENDERS,
    LICENSORS,
    LONG_VPS,
    MAIN_VERBS,
    NUMBERS,
    PERSON_PREDICATES,
    PL,
    PREPOSITIONS,
    REFLEXIVE,
    REFLEXIVE_VERBS,
    SAY_VERBS,
    SPEAKERS,
    SUBJECTS,
    TENSES,
    THING_PREDICATES,
    THING_PREPOSITIONS,
    THING_VERBS,
    THINGS,
    other,
    reflexive,
)
from treelm.suite.pairs import Pair

# ----------------------------------------------------------------------------- templates
Segment = tuple[str, str, bool]     # (grammatical text, ungrammatical text, is the focus)


def same(text: str) -> Segment:
    return (text, text, False)


def focus(grammatical: str, ungrammatical: str) -> Segment:
    return (grammatical, ungrammatical, True)


def assemble(construction: str, condition: str, segments: Sequence[Segment]) -> Pair:
    """The pair spelled by ``segments``; the focus of a segment is its first token (the word
    that agrees in ``is happy`` / ``are happy``)."""
    good: list[str] = []
    bad: list[str] = []
    where: list[int] = []
    for g, u, is_focus in segments:
        gt, ut = g.split(), u.split()
        assert len(gt) == len(ut), (g, u)      # the two sentences stay aligned token by token
        if is_focus:
            where.append(len(good))
        good += gt
        bad += ut
    return Pair(construction, " ".join(good), " ".join(bad), condition, tuple(where))


def _cond(*numbers: str) -> str:
    """Condition name: the numbers of the nouns in the order they appear, e.g. ``sg-pl``."""
    return "-".join(numbers)


NOUN_CONDITIONS_1 = tuple((n,) for n in NUMBERS)
NOUN_CONDITIONS_2 = tuple(itertools.product(NUMBERS, NUMBERS))
TENSE_CONDITIONS = tuple((t,) for t in TENSES)

Build = Callable[[tuple, tuple], "tuple[str, list[Segment]]"]


def _simple(c: tuple, k: tuple) -> tuple[str, list[Segment]]:
    (noun, verb), (n,) = c, k
    return _cond(n), [same("the"), same(noun(n)), focus(verb(n), verb(other(n)))]


def _sent_comp(c: tuple, k: tuple) -> tuple[str, list[Segment]]:
    (speaker, say, noun, verb), (m, n) = c, k
    return _cond(m, n), [same("the"), same(speaker(m)), same(say), same("the"), same(noun(n)),
                         focus(verb(n), verb(other(n)))]


def _coord(c: tuple, k: tuple) -> tuple[str, list[Segment]]:
    (noun, first, second), (n,) = c, k
    return _cond(n), [same("the"), same(noun(n)), same(first(n)), same("and"),
                      focus(second(n), second(other(n)))]


def _prep(c: tuple, k: tuple) -> tuple[str, list[Segment]]:
    (noun, prep, attractor, verb), (n, m) = c, k
    return _cond(n, m), [same("the"), same(noun(n)), same(prep), same("the"),
                         same(attractor(m)), focus(verb(n), verb(other(n)))]


def _subj_rel(c: tuple, k: tuple) -> tuple[str, list[Segment]]:
    (noun, embedded, attractor, verb), (n, m) = c, k
    return _cond(n, m), [same("the"), same(noun(n)), same("that"), same(embedded(n)),
                         same("the"), same(attractor(m)), focus(verb(n), verb(other(n)))]


def _obj_rel(that: bool, within: bool) -> Build:
    """``the N (that) the E EV V``: across = the main verb V varies, within = the embedded EV."""

    def build(c: tuple, k: tuple) -> tuple[str, list[Segment]]:
        (noun, attractor, embedded, verb), (n, m) = c, k
        if within:
            ev, v = focus(embedded(m), embedded(other(m))), same(verb(n))
        else:
            ev, v = same(embedded(m)), focus(verb(n), verb(other(n)))
        comp = [same("that")] if that else []
        return _cond(n, m), [same("the"), same(noun(n)), *comp, same("the"),
                             same(attractor(m)), ev, v]

    return build


def _refl_simple(c: tuple, k: tuple) -> tuple[str, list[Segment]]:
    (noun, verb, gender), (n,) = c, k
    return _cond(n), [same("the"), same(noun(n)), same(verb),
                      focus(reflexive(n, gender), reflexive(other(n), gender))]


def _refl_sent_comp(c: tuple, k: tuple) -> tuple[str, list[Segment]]:
    (speaker, say, noun, verb, gender), (m, n) = c, k
    return _cond(m, n), [same("the"), same(speaker(m)), same(say), same("the"), same(noun(n)),
                         same(verb), focus(reflexive(n, gender), reflexive(other(n), gender))]


def _refl_across(c: tuple, k: tuple) -> tuple[str, list[Segment]]:
    (noun, attractor, embedded, verb, gender), (n, m) = c, k
    return _cond(n, m), [same("the"), same(noun(n)), same("that"), same("the"),
                         same(attractor(m)), same(embedded(m)), same(verb),
                         focus(reflexive(n, gender), reflexive(other(n), gender))]


def _npi_simple(c: tuple, k: tuple) -> tuple[str, list[Segment]]:
    (licensor, noun, pred), (tense,) = c, k
    return tense, [focus(licensor, "the"), same(noun(PL)), same(AUX[tense]), same("ever"),
                   same(getattr(pred, tense))]


def _npi_across(c: tuple, k: tuple) -> tuple[str, list[Segment]]:
    (licensor, noun, attractor, embedded, pred), (tense,) = c, k
    return tense, [focus(licensor, "the"), same(noun(PL)), same("that"), focus("the", licensor),
                   same(attractor(PL)), same(embedded(PL)), same(AUX[tense]), same("ever"),
                   same(getattr(pred, tense))]


@dataclass(frozen=True)
class Variant:
    """One template of a construction (M&L split some into animate and inanimate subjects)."""

    name: str                          # "animate", "inanimate" or "" when there is one
    original: int                      # its pairs in M&L's suite
    slots: tuple[Sequence, ...]        # the lexical choices of each slot
    conditions: tuple[tuple, ...]
    build: Build
    distinct: tuple[int, ...] = ()     # slots that must hold different items (two VPs)

    def size(self) -> int:
        """How many lexical combinations the slots make (the two distinct slots, when there are,
        hold the same list: the combinations with equal items are left out)."""
        n = math.prod(len(s) for s in self.slots)
        return n - n // len(self.slots[self.distinct[0]]) if self.distinct else n

    def combination(self, index: int) -> tuple:
        """The ``index``-th combination of :func:`itertools.product` over the slots."""
        out = []
        for slot in reversed(self.slots):
            index, i = divmod(index, len(slot))
            out.append(slot[i])
        return tuple(reversed(out))

    def sample(self, rng: random.Random, k: int) -> list[tuple]:
        """``k`` different combinations, drawn by ``rng``; indices are drawn rather than lists
        built, since a template makes up to 10⁵ combinations."""
        if not self.distinct:
            return [self.combination(i) for i in rng.sample(range(self.size()), k)]
        a, b = self.distinct
        combos = [c for c in itertools.product(*self.slots) if c[a] != c[b]]
        return rng.sample(combos, k)


@dataclass(frozen=True)
class Construction:
    name: str
    label: str
    phenomenon: str
    variants: tuple[Variant, ...]

    @property
    def original(self) -> int:
        return sum(v.original for v in self.variants)


AGR, REFL, NPI = "subject-verb agreement", "reflexive anaphora", "negative polarity items"
S, A, E = SUBJECTS, ATTRACTORS, EMBEDDED_VERBS

CONSTRUCTIONS: tuple[Construction, ...] = (
    Construction("simple_agrmt", "Simple", AGR, (
        Variant("", 140, (S, MAIN_VERBS), NOUN_CONDITIONS_1, _simple),)),
    Construction("sent_comp", "In a sentential complement", AGR, (
        Variant("", 1680, (SPEAKERS, SAY_VERBS, S, MAIN_VERBS), NOUN_CONDITIONS_2, _sent_comp),)),
    Construction("vp_coord", "Short VP coordination", AGR, (
        Variant("", 840, (S, MAIN_VERBS, MAIN_VERBS), NOUN_CONDITIONS_1, _coord, (1, 2)),)),
    Construction("long_vp_coord", "Long VP coordination", AGR, (
        Variant("", 400, (S, LONG_VPS, LONG_VPS), NOUN_CONDITIONS_1, _coord, (1, 2)),)),
    Construction("prep", "Across a prepositional phrase", AGR, (
        Variant("animate", 16800, (S, PREPOSITIONS, A, MAIN_VERBS), NOUN_CONDITIONS_2, _prep),
        Variant("inanimate", 5600, (THINGS, THING_PREPOSITIONS, A, THING_VERBS),
                NOUN_CONDITIONS_2, _prep))),
    Construction("subj_rel", "Across a subject relative clause", AGR, (
        Variant("", 11200, (S, E, A, MAIN_VERBS), NOUN_CONDITIONS_2, _subj_rel),)),
    *(Construction(name, label, AGR, (
        Variant("animate", 11200, (S, A, E, MAIN_VERBS), NOUN_CONDITIONS_2,
                _obj_rel(that, within)),
        Variant("inanimate", 11200, (THINGS, A, E, THING_VERBS), NOUN_CONDITIONS_2,
                _obj_rel(that, within))))
      for name, label, that, within in (
          ("obj_rel_across", "Across an object relative clause", True, False),
          ("obj_rel_no_comp_across", "Across an object relative clause (no that)", False,
           False),
          ("obj_rel_within", "In an object relative clause", True, True),
          ("obj_rel_no_comp_within", "In an object relative clause (no that)", False, True))),
    Construction("simple_reflexives", "Simple", REFL, (
        Variant("", 280, (S, REFLEXIVE_VERBS, GENDERS), NOUN_CONDITIONS_1, _refl_simple),)),
    Construction("reflexive_sent_comp", "In a sentential complement", REFL, (
        Variant("", 3360, (SPEAKERS, SAY_VERBS, S, REFLEXIVE_VERBS, GENDERS), NOUN_CONDITIONS_2,
                _refl_sent_comp),)),
    Construction("reflexives_across", "Across a relative clause", REFL, (
        Variant("", 22400, (S, A, E, REFLEXIVE_VERBS, GENDERS), NOUN_CONDITIONS_2,
                _refl_across),)),
    Construction("simple_npi", "Simple", NPI, (
        Variant("animate", 120, (LICENSORS, S, PERSON_PREDICATES), TENSE_CONDITIONS,
                _npi_simple),
        Variant("inanimate", 144, (LICENSORS, THINGS, THING_PREDICATES), TENSE_CONDITIONS,
                _npi_simple))),
    Construction("npi_across", "Across a relative clause", NPI, (
        Variant("animate", 4800, (LICENSORS, S, A, E, PERSON_PREDICATES), TENSE_CONDITIONS,
                _npi_across),
        Variant("inanimate", 5760, (LICENSORS, THINGS, A, E, THING_PREDICATES),
                TENSE_CONDITIONS, _npi_across))),
)
BY_NAME = {c.name: c for c in CONSTRUCTIONS}
ORIGINAL = {c.name: c.original for c in CONSTRUCTIONS}


# ----------------------------------------------------------------------------- generation
def variant_targets(construction: Construction, wanted: int) -> list[int]:
    """Pairs to draw from each variant: ``wanted`` split in the original proportion (the
    remainder to the first variants), each at most what its combinations make."""
    total = construction.original
    shares = [wanted * v.original // total for v in construction.variants]
    for i in range(wanted - sum(shares)):
        shares[i % len(shares)] += 1
    return [min(s, v.size() * len(v.conditions)) for s, v in zip(shares, construction.variants)]


def generate_construction(construction: Construction, seed: int = 0,
                          max_pairs: int | None = None) -> list[Pair]:
    """The pairs of one construction: ``max_pairs`` (default: as many as M&L's suite) drawn from
    all lexical combinations, each combination in every condition."""
    wanted = construction.original if max_pairs is None else max_pairs
    out: list[Pair] = []
    for variant, target in zip(construction.variants, variant_targets(construction, wanted)):
        # a string seed is hashed with SHA-512 by `random`: the same on every run and platform
        rng = random.Random(f"agreement:{seed}:{construction.name}:{variant.name}")
        chosen = variant.sample(rng, math.ceil(target / len(variant.conditions)))
        pairs = []
        for combo in chosen:
            for k in variant.conditions:
                condition, segments = variant.build(combo, k)
                if variant.name:
                    condition = f"{variant.name} {condition}"
                pairs.append(assemble(construction.name, condition, segments))
        out += pairs[:target]
    return out


def generate(seed: int = 0, max_per_construction: int | None = None,
             names: Sequence[str] | None = None) -> list[Pair]:
    """All constructions' pairs (or those of ``names``), in the order of :data:`CONSTRUCTIONS`."""
    chosen = CONSTRUCTIONS if names is None else tuple(BY_NAME[n] for n in names)
    return [p for c in chosen for p in generate_construction(c, seed, max_per_construction)]


def vocabulary() -> set[str]:
    """Every word the templates can write."""
    words = {"the", "that", "and", "ever", *AUX.values(), *LICENSORS, *REFLEXIVE.values(),
             *SAY_VERBS, *REFLEXIVE_VERBS}
    for forms in (SUBJECTS, ATTRACTORS, SPEAKERS, THINGS, MAIN_VERBS, THING_VERBS,
                  EMBEDDED_VERBS, LONG_VPS):
        for f in forms:
            words.update(f.sg.split() + f.pl.split())
    for phrase in (*PREPOSITIONS, *THING_PREPOSITIONS):
        words.update(phrase.split())
    for t in (*PERSON_PREDICATES, *THING_PREDICATES):
        words.update(t.past.split() + t.future.split())
    return words
