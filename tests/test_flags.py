"""One spelling per meaning across verbs: the table "One flag per meaning" of
docs/architecture.md, checked on the real parser. A verb that spells a listed meaning another way
(a refused spelling), uses a listed flag for something else (another destination than the
flag's everywhere else), or takes a listed flag the table does not say it takes (or lacks one it
says it takes) fails here; so does a ``treelm VERB`` command in the README, DEVELOPERS.md, docs/
or a verb's own help that passes an option the verb does not have (an old spelling left behind).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from treelm.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


def flag_table() -> list[tuple[str, list[str], list[str], list[str]]]:
    """(meaning, its flags, the verbs that take them, refused spellings) per row of the table."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## One flag per meaning", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("meaning", "---"):
            continue
        rows.append((cells[0], re.findall(r"`([^`]+)`", cells[1]),
                     [v.strip() for v in cells[2].split(",") if v.strip()],
                     re.findall(r"`([^`]+)`", cells[3])))
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
             table: list[tuple[str, list[str], list[str], list[str]]]) -> list[str]:
    bad = []
    for meaning, flags, verbs, refused in table:
        dests = {d for opts in options.values() for o, d in opts if o in flags}
        if len(dests) > 1:
            bad.append(f"{'/'.join(flags)} means several things: {sorted(dests)}")
        taking = sorted(v for v, opts in options.items() if any(o in flags for o, _ in opts))
        if taking != sorted(verbs):
            bad.append(f"{'/'.join(flags)}: the table lists {sorted(verbs)}, "
                       f"the parser has {taking}")
        for verb, opts in options.items():
            bad += [f"{verb}: {o} (spell {meaning!r} as {flags[-1]})"
                    for o, _ in opts if o in refused]
    return bad


def code_of(text: str) -> list[str]:
    """The lines of a Markdown page's code: fenced blocks and inline code spans, a line ending
    in a backslash joined with the next."""
    fenced = re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return "\n".join(fenced + inline).replace("\\\n", " ").splitlines()


def unknown_options(lines: list[str], options: dict[str, list[tuple[str, str]]]) -> list[str]:
    """Options that a ``treelm VERB …`` command in ``lines`` passes and VERB does not have."""
    bad = []
    for line in lines:
        for m in re.finditer(r"(?:^|[\s/])treelm ([a-z-]+)((?: [a-z-]+)?)(.*)", line):
            sub = f"{m[1]}{m[2]}"
            verb, rest = (sub, m[3]) if sub in options else (m[1], m[2] + m[3])
            if verb not in options:
                continue
            rest = re.split(r"\s#|\s\||\s>|&&|;", rest)[0].replace("[", " ").replace("]", " ")
            known = {o for o, _ in options[verb]}
            bad += [f"treelm {verb} {o}" for o in re.findall(r"(?<!\S)(--?[a-zA-Z][\w-]*)", rest)
                    if o not in known]
    return bad


def test_the_table_is_there_and_well_formed():
    table = flag_table()
    assert len(table) >= 10
    listed = [f for _, flags, _, refused in table for f in flags + refused]
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
    sub.choices["serve"].add_argument("--batch-size", type=int)
    found = offences(verb_options(parser), flag_table())
    assert any(f.startswith("probe: --top ") for f in found)
    assert any("--beam means several things" in f for f in found)
    assert any(f.startswith("--batch-size: the table lists") and "'serve'" in f for f in found)


def docs_and_epilogs() -> list[str]:
    """The code lines of the README, DEVELOPERS.md and docs/, and every verb's help texts."""
    lines: list[str] = []
    for page in [ROOT / "README.md", ROOT / "DEVELOPERS.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines += code_of(page.read_text(encoding="utf-8"))

    def texts(parser: argparse.ArgumentParser) -> None:
        lines.extend(f"{parser.description or ''}\n{parser.epilog or ''}".splitlines())
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    texts(sub)
    texts(build_parser())
    return lines


def test_the_documented_commands_use_the_verbs_flags():
    found = docs_and_epilogs()
    assert sum("treelm " in ln for ln in found) > 50          # the commands were found
    assert unknown_options(found, verb_options(build_parser())) == []


def test_a_documented_old_spelling_is_caught():
    options = verb_options(build_parser())
    text = "run it:\n```\ntreelm probe RUN --prefix fixi \\\n  --top 5   # old\n```\n" \
           "or `treelm suite agreement RUN --json out.json` and `treelm parse RUN --format json`"
    assert unknown_options(code_of(text), options) == [
        "treelm probe --prefix", "treelm probe --top", "treelm suite agreement --json"]


@pytest.mark.parametrize("verb", ["generate", "probe", "tag", "translate", "parse"])
def test_the_run_options_are_the_same_everywhere(verb):
    opts = dict(verb_options(build_parser())[verb])
    assert opts["--checkpoint"] == "checkpoint" and opts["--threads"] == "threads"
