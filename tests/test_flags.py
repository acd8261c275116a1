"""One spelling per meaning across verbs: the table "One flag per meaning" of
docs/architecture.md, checked on the real parser. A verb that spells a listed meaning another way
(a refused spelling), or uses a listed flag for something else (another destination than the
flag's everywhere else), fails here.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from treelm.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


def flag_table() -> list[tuple[str, list[str], list[str]]]:
    """(meaning, its flags, refused spellings) per row of the table."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## One flag per meaning", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("meaning", "---"):
            continue
        rows.append((cells[0], re.findall(r"`([^`]+)`", cells[1]),
                     re.findall(r"`([^`]+)`", cells[2])))
    return rows


def verb_options(parser: argparse.ArgumentParser, name: str = ""
                 ) -> dict[str, list[tuple[str, str]]]:
    """Every verb (sub-commands included) -> its (option string, destination) pairs."""
    out: dict[str, list[tuple[str, str]]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for verb, sub in action.choices.items():
                out.update(verb_options(sub, f"{name} {verb}".strip()))
        elif action.option_strings and name:
            out.setdefault(name, []).extend((o, action.dest) for o in action.option_strings)
    return out


def offences(options: dict[str, list[tuple[str, str]]],
             table: list[tuple[str, list[str], list[str]]]) -> list[str]:
    bad = []
    for meaning, flags, refused in table:
        dests = {d for opts in options.values() for o, d in opts if o in flags}
        if len(dests) > 1:
            bad.append(f"{'/'.join(flags)} means several things: {sorted(dests)}")
        for verb, opts in options.items():
            bad += [f"{verb}: {o} (spell {meaning!r} as {flags[-1]})"
                    for o, _ in opts if o in refused]
    return bad


def test_the_table_is_there_and_well_formed():
    table = flag_table()
    assert len(table) >= 10
    listed = [f for _, flags, refused in table for f in flags + refused]
    assert len(listed) == len(set(listed)), "a spelling in two rows"
    assert all(f.startswith("-") for f in listed)


def test_every_verb_spells_each_meaning_one_way():
    assert offences(verb_options(build_parser()), flag_table()) == []


def test_a_second_spelling_is_caught():
    """The check can fail: a verb given a refused spelling, and a listed flag used for
    something else, are both reported."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices["probe"].add_argument("--top", type=int)
    sub.choices["tag"].add_argument("--beam", dest="width", type=int)
    found = offences(verb_options(parser), flag_table())
    assert any(f.startswith("probe: --top ") for f in found)
    assert any("--beam means several things" in f for f in found)


@pytest.mark.parametrize("verb", ["generate", "probe", "tag", "translate", "parse"])
def test_the_run_options_are_the_same_everywhere(verb):
    opts = dict(verb_options(build_parser())[verb])
    assert opts["--checkpoint"] == "checkpoint" and opts["--threads"] == "threads"
