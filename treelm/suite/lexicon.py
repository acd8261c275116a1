"""The lexicon of the minimal pairs of ``treelm suite agreement`` (:mod:`treelm.suite.agreement`,
whose templates it fills): nouns and verb phrases in their singular and plural forms, the
reflexives, the NPI licensors and predicates, each list chosen for its slot.

Why a lexicon of our own: the models treelm trains are Penn Treebank word models (Mikolov's
10k-word vocabulary, lower case, no punctuation), and many of Marvin & Linzen's words are not in
it (*laughs, smiles, swims, dancer, mechanic, admires, …*): they would all be ``<unk>``, and a
pair whose verbs are both ``<unk>`` cannot be told apart. Every word here occurs in PTB's
training text (``tests/test_agreement.py`` checks). Sentences have no final period, as PTB has
none; the scorer closes each with ``<eos>``.
"""

from __future__ import annotations

from dataclasses import dataclass

SG, PL = "sg", "pl"
NUMBERS = (SG, PL)


def other(number: str) -> str:
    return PL if number == SG else SG


@dataclass(frozen=True)
class Form:
    """A noun, or a verb phrase whose first word agrees, in its singular and plural forms."""

    sg: str
    pl: str

    def __call__(self, number: str) -> str:
        return self.sg if number == SG else self.pl


@dataclass(frozen=True)
class Tensed:
    """An NPI sentence's predicate after ``have ever`` (past) or ``will ever`` (future)."""

    past: str
    future: str


def _forms(*specs: str) -> tuple[Form, ...]:
    """``"lawyer/lawyers"`` -> Form("lawyer", "lawyers"); ``"works/work for a bank"`` -> the
    verb phrase with its tail shared by both forms."""
    out = []
    for spec in specs:
        head, _, tail = spec.partition(" ")
        sg, pl = head.split("/")
        out.append(Form(f"{sg} {tail}".strip(), f"{pl} {tail}".strip()))
    return tuple(out)


# Animate subjects of the main clause, and a disjoint set of animate nouns that sit between the
# subject and its verb (attractors: in PPs and relative clauses); disjoint so that no sentence
# names the same noun twice.
SUBJECTS = _forms(
    "executive/executives", "analyst/analysts", "lawyer/lawyers", "banker/bankers",
    "trader/traders", "investor/investors", "economist/economists", "broker/brokers",
    "director/directors", "official/officials", "worker/workers", "student/students",
    "doctor/doctors", "writer/writers", "engineer/engineers", "citizen/citizens")
ATTRACTORS = _forms(
    "judge/judges", "dealer/dealers", "partner/partners", "employee/employees",
    "buyer/buyers", "reporter/reporters", "critic/critics", "scientist/scientists",
    "player/players", "leader/leaders", "member/members", "voter/voters", "owner/owners",
    "resident/residents", "agent/agents", "candidate/candidates")
# Subjects of the verb that takes a sentential complement ("the spokesmen said the lawyer …").
SPEAKERS = _forms("spokesman/spokesmen", "chairman/chairmen", "president/presidents",
                  "woman/women")
SAY_VERBS = ("said", "thought", "knew", "believed", "argued")
# Inanimate subjects.
THINGS = _forms(
    "plan/plans", "report/reports", "program/programs", "product/products", "car/cars",
    "book/books", "movie/movies", "bill/bills", "proposal/proposals", "contract/contracts",
    "law/laws", "computer/computers")

# Verbs of the main clause (the agreeing verb of most constructions): intransitive verbs and
# copular predicates, for animate and for inanimate subjects.
MAIN_VERBS = _forms(
    "works/work", "agrees/agree", "complains/complain", "speaks/speak", "wins/win",
    "is/are happy", "is/are young", "is/are busy")
THING_VERBS = _forms(
    "is/are important", "is/are expensive", "is/are cheap", "is/are safe", "is/are popular",
    "is/are new", "is/are wrong", "works/work")
# Transitive verbs of relative clauses (and the agreeing verb of "in an object relative clause"),
# disjoint from the main verbs so that the tests can tell which verb a pair varies.
EMBEDDED_VERBS = _forms(
    "likes/like", "knows/know", "meets/meet", "supports/support", "needs/need", "helps/help",
    "pays/pay", "fears/fear", "visits/visit", "trusts/trust")
# Long verb phrases for long VP coordination (the agreeing word is the first).
LONG_VPS = _forms(
    "works/work for a large bank in new york", "owns/own a small house near the city",
    "reads/read the newspaper every morning", "writes/write for a weekly magazine",
    "plays/play golf with friends every week", "has/have three children and two dogs")
PREPOSITIONS = ("near", "behind", "with", "next to", "close to", "across from")
THING_PREPOSITIONS = ("by", "from", "about", "for")
# Past tense, so that the verb itself does not agree and only the reflexive does.
REFLEXIVE_VERBS = ("hurt", "blamed", "praised", "protected", "defended", "injured",
                   "criticized", "killed")
GENDERS = ("m", "f")
REFLEXIVE = {(SG, "m"): "himself", (SG, "f"): "herself", (PL, "m"): "themselves",
             (PL, "f"): "themselves"}
LICENSORS = ("no", "few")          # NPI licensors; "the" licenses nothing
AUX = {"past": "have", "future": "will"}
TENSES = ("past", "future")
PERSON_PREDICATES = (Tensed("been happy", "be happy"), Tensed("been rich", "be rich"),
                     Tensed("been successful", "be successful"),
                     Tensed("been interested", "be interested"))
THING_PREDICATES = (Tensed("been sold", "be sold"), Tensed("been approved", "be approved"),
                    Tensed("been used", "be used"), Tensed("been published", "be published"))


def reflexive(number: str, gender: str) -> str:
    return REFLEXIVE[(number, gender)]
