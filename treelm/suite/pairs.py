"""Minimal pairs: a grammatical sentence and an ungrammatical one that differ in a word or two.

Generated pairs (:mod:`treelm.suite.agreement`) carry their construction, the condition (which
nouns are singular or plural, or the tense) and ``focus``: the token positions of the word(s)
meant to differ. Pairs of one's own come from a tab-separated file, one pair a line::

    construction<TAB>grammatical<TAB>ungrammatical

with an optional first line ``construction<TAB>grammatical<TAB>ungrammatical`` (a header, skipped).
Blank lines are skipped; anything else that is not three non-empty fields is a one-line error
naming the file and the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from treelm.errors import TreelmError

HEADER = ("construction", "grammatical", "ungrammatical")


@dataclass(frozen=True)
class Pair:
    construction: str
    grammatical: str
    ungrammatical: str
    condition: str = ""
    focus: tuple[int, ...] = ()     # token positions meant to differ (generated pairs only)
    line: int = 0                   # line of its --pairs file (0: a generated pair)


class PairsError(TreelmError):
    """A ``--pairs`` file that cannot be read as minimal pairs."""


def parse_pairs(lines: list[str], where: str) -> list[Pair]:
    """Pairs of the lines of a ``--pairs`` file (see the module docstring); ``where`` names the
    file in errors."""
    out = []
    for i, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split("\t")]
        if i == 1 and tuple(f.lower() for f in fields) == HEADER:
            continue
        if len(fields) != 3:
            raise PairsError(f"{where}:{i}: expected 3 tab-separated fields (construction, "
                             f"grammatical, ungrammatical), got {len(fields)}")
        for name, value in zip(HEADER, fields):
            if not value:
                raise PairsError(f"{where}:{i}: the {name} field is empty")
        out.append(Pair(*fields, line=i))
    if not out:
        raise PairsError(f"{where}: no pairs (one pair a line: construction, grammatical, "
                         "ungrammatical, separated by tabs)")
    return out


def read_pairs(path: str | Path) -> list[Pair]:
    """The pairs of a ``--pairs`` file; a missing, unreadable or malformed file is a
    :class:`PairsError` naming it (and the line)."""
    p = Path(path)
    if p.is_dir():
        raise PairsError(f"{path}: is a directory, not a file of pairs")
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PairsError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise PairsError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise PairsError(f"{path}: cannot read ({e.strerror})") from None
    return parse_pairs(text.split("\n"), str(path))
