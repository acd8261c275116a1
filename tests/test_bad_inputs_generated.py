"""Bad flag values for every flag of every verb, generated from the parsers of
:func:`treelm.cli.build_parser`: a flag added later is tried without anyone writing its case.
Each must end the command with exactly one line on stderr (no traceback) and exit status 2; the
line names the flag, or the path for a path's case.

The cases, per flag (``--help`` aside):

* **missing value**: the flag last, without its value (every flag that takes one);
* **wrong type**: ``abc`` (and ``2.5`` for an integer) for a flag with a numeric ``type``;
* **out of range**: a word outside its ``choices``; for a :class:`treelm.verb.Number`, values
  just outside its bounds, and ``nan`` and ``inf`` for a float;
* **unreadable path** (a path flag that is read): a path through a regular file
  (``plain.txt/none``, which no process can open, root included) and, for a ``FILE`` flag, a
  directory;
* **unwritable path** (a path flag that is written): a path through a regular file, and, for a
  ``FILE.<ext>`` flag, a directory.

Which flags are paths, by rule: a flag whose metavar (what ``--help`` shows) has a ``FILE``,
``PATH`` or ``DIR`` part. It is written when it is ``-o``/``--output``/``--out`` or its metavar
names a file of one kind (``FILE.png``, ``FILE.csv``), and read otherwise (``--input FILE``,
``--runs RUN_DIR``).

The first three are usage errors of the parser, tried on each verb's positionals alone. The path
cases run the verb, from the smallest valid command line in ``BASE`` (tiny runs trained once per
session, ``tests/conftest.py``); a new verb with a path flag adds its line there, and
:func:`test_every_verb_with_a_path_flag_has_a_base` says so.
"""

from __future__ import annotations

import argparse
import io
import re
from pathlib import Path
from typing import Any

import pytest

from treelm.cli import build_parser, main
from treelm.verb import Number

ROOT = Path(__file__).resolve().parents[1]

# the smallest valid command line of each verb that has a path flag, one list per flag or
# positional ({run}: a language-model run, {tag}: a tagging run, {tr}: a translation run, {tmp}:
# a fresh directory holding tiny.mrg); the flag under test is appended, so it wins over a value
# given here, and a flag of its mutually exclusive group is left out
BASE: dict[str, list[list[str]]] = {
    "train": [["--config", "configs/tiny-lm.yaml"], ["--out", "{tmp}/out"], ["--quiet"]],
    "eval": [["{run}"]],
    "gradflow": [["--cells", "elman"], ["--hidden", "4"], ["--length", "3"],
                 ["--batch-size", "2"]],
    "parse": [["{run}"]],
    "eval-parse": [["{run}"], ["--treebank", "{tmp}/tiny.mrg"]],
    "plot": [["{run}"], ["the company"], ["-o", "{tmp}/p.png"]],
    "plot-tree": [["(a b)"], ["-o", "{tmp}/t.png"]],
    "tag": [["{tag}"]],
    "suite agreement": [["{run}"]],
    "translate": [["{tr}"]],
}
# a flag that is a whole command line by itself: --resume takes the run's own config and output
ALONE = {("train", "--resume")}
RUNS = {"{run}": "lm_run", "{tag}": "tagging_run", "{tr}": "bpe_translation_run"}
STDIN = "the company said\n"        # for a verb that reads stdin when no input is named


def verbs(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
          ) -> list[tuple[str, argparse.ArgumentParser]]:
    """Each verb that runs something (``suite agreement``, not ``suite``) and its parser."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if sub.get_default("func"):
                    found.append((" ".join((*path, name)), sub))
                found += verbs(sub, (*path, name))
    return found


def flags(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]


def positionals(p: argparse.ArgumentParser) -> list[str]:
    """Placeholder words for the positionals: enough for the parser, which checks no more."""
    return [f"{a.dest}{i}" for a in p._actions if not a.option_strings
            for i in range(1 if a.nargs in (None, "?") else 2 if a.nargs in ("+", "*") else 0)]


def metavar(a: argparse.Action) -> str:
    return str(a.metavar or a.dest.upper())


def path_kind(a: argparse.Action) -> str | None:
    """``"read"``, ``"written"`` or None: the rule of the module docstring."""
    parts = re.split(r"[^A-Z]+", metavar(a))
    if a.nargs == 0 or not {"FILE", "PATH", "DIR"} & set(parts):
        return None
    named = {"-o", "--output", "--out"} & set(a.option_strings)
    return "written" if named or re.search(r"FILE\.\w+", metavar(a)) else "read"


def outside(kind: Number) -> list[str]:
    """Values just outside a :class:`Number`'s bounds (and non-finite ones for a float)."""
    step = 1 if kind.kind is int else 0.5
    values = []
    if kind.at_least is not None:
        values.append(kind.at_least - step)
    if kind.above is not None:
        values.append(kind.above)
    if kind.at_most is not None:
        values.append(kind.at_most + step)
    texts = [str(v) for v in values] + (["nan", "inf", "-inf"] if kind.kind is float else [])
    assert all(not _takes(kind, t) for t in texts), (kind, texts)
    return texts


def _takes(kind: Any, text: str) -> bool:
    try:
        kind(text)
    except (TypeError, ValueError, argparse.ArgumentTypeError):
        return False
    return True


def usage_cases() -> list[Any]:
    """(verb, argv, flag) for every parse-time case of every flag of every verb."""
    cases = []
    for verb, p in verbs(build_parser()):
        words = [*verb.split(), *positionals(p)]
        for a in flags(p):
            if a.nargs == 0:      # a switch: nothing to get wrong
                continue
            name = a.option_strings[-1]
            tried = [("missing", [name])]
            if a.type in (int, float) or isinstance(a.type, Number):
                kind = a.type.kind if isinstance(a.type, Number) else a.type
                tried += [("type", [name, "abc"])]
                tried += [("type", [name, "2.5"])] if kind is int else []
            if a.choices:
                tried.append(("range", [name, "no-such-choice"]))
            if isinstance(a.type, Number):
                tried += [("range", [name, v]) for v in outside(a.type)]
            for what, args in tried:
                cases.append(pytest.param(verb, [*words, *args], a,
                                          id=f"{verb}-{'-'.join(args).lstrip('-')}-{what}"))
    return cases


def path_cases() -> list[Any]:
    """(verb, flag, bad path) for every path flag of every verb."""
    cases = []
    for verb, p in verbs(build_parser()):
        for a in flags(p):
            kind = path_kind(a)
            if kind is None:
                continue
            suffix = m[0][4:] if (m := re.search(r"FILE(\.\w+)", metavar(a))) else ""
            bad = [f"{{tmp}}/plain.txt/none{suffix}"]
            if metavar(a).startswith("FILE"):
                bad.append("{tmp}")
            for value in bad:
                cases.append(pytest.param(verb, a.option_strings[-1], value, id=(
                    f"{verb}-{a.option_strings[-1].lstrip('-')}-"
                    f"{'unwritable' if kind == 'written' else 'unreadable'}-"
                    f"{'dir' if value == '{tmp}' else 'through-a-file'}")))
    return cases


def one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``treelm ARGV`` in this process; its error line (checked to be alone, exit 2)."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as e:       # a usage error of the parser
        code = e.code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, f"exit {code}: {err}"
    assert len(lines) == 1 and "Traceback" not in err, err
    assert re.match(r"treelm( [\w-]+)*: error: ", lines[0]), lines[0]
    return lines[0]


@pytest.mark.parametrize(("verb", "argv", "action"), usage_cases())
def test_a_bad_flag_value_is_one_line_naming_the_flag(verb, argv, action, capsys):
    line = one_line_exit_2(argv, capsys)
    assert line.startswith(f"treelm {verb}: error: argument {'/'.join(action.option_strings)}"
                           f": "), line


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "plain.txt").write_text("a regular file, so nothing can be under it\n")
    (tmp_path / "tiny.mrg").write_text("( (S (NP (DT the) (NN company)) (VP (VBD said))) )\n")
    return tmp_path


@pytest.mark.parametrize(("verb", "flag", "value"), path_cases())
def test_a_bad_path_is_one_line_naming_it(verb, flag, value, tmp, capsys, monkeypatch,
                                          request):
    p = dict(verbs(build_parser()))[verb]
    action = next(a for a in flags(p) if flag in a.option_strings)
    group = next((g._group_actions for g in p._mutually_exclusive_groups
                  if action in g._group_actions), [])
    others = {o for a in group if a is not action for o in a.option_strings}
    base = [] if (verb, flag) in ALONE else [w for unit in BASE[verb] if unit[0] not in others
                                             for w in unit]
    argv = [*verb.split(), *base, flag, value]
    fill = {"{tmp}": str(tmp)}
    for key, fixture in RUNS.items():
        if any(key in w for w in argv):
            fill[key] = str(request.getfixturevalue(fixture))
    for key, v in fill.items():
        argv = [w.replace(key, v) for w in argv]
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr("sys.stdin", io.StringIO(STDIN))
    line = one_line_exit_2(argv, capsys)
    named = re.escape(value.replace("{tmp}", str(tmp)))
    if value == "{tmp}":        # the directory itself, not a path under it (such as --out's)
        named += r"(?![/\w])"
    assert re.search(named, line), line


def test_every_verb_with_a_path_flag_has_a_base():
    missing = sorted({c.values[0] for c in path_cases()} - set(BASE))
    assert not missing, f"add the smallest valid command line of {missing} to BASE"


def test_every_numeric_flag_declares_its_range():
    """A flag typed ``int`` or ``float`` has no range the parser checks and this test could
    try: it is a :class:`treelm.verb.Number` instead."""
    plain = sorted(f"{verb} {a.option_strings[-1]}" for verb, p in verbs(build_parser())
                   for a in flags(p) if a.type in (int, float))
    assert plain == [], plain


def test_the_generated_cases_cover_every_flag_of_every_verb():
    """Each flag that takes a value has its cases; each switch has nothing to get wrong; the
    numeric and path flags are found (the rules have not gone blind)."""
    covered = {(c.values[0], c.values[2].option_strings[-1]) for c in usage_cases()}
    every = {(verb, a.option_strings[-1]) for verb, p in verbs(build_parser())
             for a in flags(p) if a.nargs != 0}
    assert covered == every
    assert len(covered) >= 100 and len(usage_cases()) >= 300
    paths = {(c.values[0], c.values[1]) for c in path_cases()}
    assert {("train", "--config"), ("train", "--out"), ("plot", "--output"),
            ("gradflow", "--csv"), ("tag", "--input"), ("suite agreement", "--pairs")} <= paths


def test_a_number_refuses_what_is_outside_its_range():
    top_p = Number(float, above=0, at_most=1)
    assert top_p("0.5") == 0.5 and top_p("1") == 1.0
    for text in ("0", "1.5", "nan", "inf", "1e999"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"must be a number in \(0, 1\]"):
            top_p(text)
    with pytest.raises(ValueError):
        Number(int, at_least=1)("2.5")
    assert Number(int, at_least=1)("9" * 30) == int("9" * 30)      # no float in the way
    assert Number(float)("-3") == -3.0 and Number(float).says == "a finite number"
    with pytest.raises(argparse.ArgumentTypeError, match="must be a finite number, got nan"):
        Number(float)("nan")
