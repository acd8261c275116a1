"""Bad values for every flag and argument of every verb, generated from the parsers of
:func:`treelm.cli.build_parser`: a flag added later is tried without anyone writing its case.
Each must end the command with exactly one line on stderr (no traceback) and exit status 2; the
line names the flag, or the value (a path, a layer, a cell) for a case the verb finds running.

The cases (``--help`` aside; a switch has nothing to get wrong), each where it applies
(:func:`applicable` says which, and :func:`test_the_generated_cases_cover_every_flag_of_every_verb`
that each is there):

* **missing**: a flag last, without its value; a required positional left out;
* **type**: a value of the wrong kind: ``abc`` (and ``2.5`` for an integer) for a numeric flag;
  for a flag whose text has a form (``FORMS``, by metavar), text outside it (``--layer abc``);
* **range**: a value of the right kind outside what is allowed: a word outside ``choices``; for
  a :class:`treelm.verb.Number`, values just outside its bounds, and ``nan`` and ``inf`` for a
  float; for a ``FORMS`` flag, values the parser or the verb refuses (``--layer 0``, a layer the
  run lacks, a cell or a label that does not exist, a host that cannot be listened on);
* **unreadable** (a path that is read, a run directory included): a path through a regular file
  (``plain.txt/none``, which no process can open, root included) and a directory where a file
  (``FILE``) or a run (a positional ``RUN_DIR``) is read;
* **unwritable** (a path that is written): a path through a regular file, and, for a
  ``FILE.<ext>`` flag, a directory.

Which arguments are paths, by rule: those whose metavar (what ``--help`` shows) has a ``FILE``,
``PATH``, ``DIR`` or ``RUN`` part. One is written when it is ``-o``/``--output``/``--out`` or its
metavar names a file of one kind (``FILE.png``, ``FILE.csv``), and read otherwise (``--input
FILE``, ``--runs RUN_DIR``, the ``RUN_DIR`` of ``treelm eval``). Every other flag that takes
text (not a number, not one of ``choices``) has a form with bad values in ``FORMS`` or accepts
any text, which ``FREE_TEXT`` says, with the reason.

A case is a usage error of the parser (tried on placeholders for the positionals), or the verb
finds it running: the path cases and the ``FORMS`` cases marked ``RUN`` run the verb from the
smallest valid command line in ``BASE`` (tiny runs trained once per session,
``tests/conftest.py``); a new verb with such a case adds its line there, and
:func:`test_every_verb_that_runs_a_case_has_a_base` says so.
"""

from __future__ import annotations

import argparse
import io
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from treelm.cli import build_parser, main
from treelm.parsing.commands import LayerArg, label_list
from treelm.verb import Number

ROOT = Path(__file__).resolve().parents[1]

# the smallest valid command line of each verb that has a case it finds running, one list per
# flag or positional ({run}: a language-model run, {tag}: a tagging run, {tr}: a translation run,
# {tmp}: a fresh directory holding tiny.mrg); the words that do not start with "-" are the
# positionals, in order. A flag under test is appended, so it wins over a value given here, and a
# flag of its mutually exclusive group is left out; a positional under test takes the place of
# its own
BASE: dict[str, list[list[str]]] = {
    "train": [["--config", "configs/tiny-lm.yaml"], ["--out", "{tmp}/out"], ["--quiet"]],
    "eval": [["{run}"]],
    "generate": [["{run}"], ["--length", "3"]],
    "probe": [["{run}"], ["--prompt", "the"]],
    "gradflow": [["--cells", "elman"], ["--hidden", "4"], ["--length", "3"],
                 ["--batch-size", "2"]],
    "parse": [["{run}"]],
    "eval-parse": [["{run}"], ["--treebank", "{tmp}/tiny.mrg"]],
    "ensemble": [["{run}"], ["--treebank", "{tmp}/tiny.mrg"]],
    "teacher-trees": [["{run}"], ["--corpus", "{tmp}/plain.txt"], ["--exclude", "none"],
                      ["-o", "{tmp}/teacher.txt"]],
    "plot": [["{run}"], ["the company"], ["-o", "{tmp}/p.png"]],
    "plot-tree": [["(a b)"], ["-o", "{tmp}/t.png"]],
    "tag": [["{tag}"]],
    "suite agreement": [["{run}"]],
    "translate": [["{tr}"]],
    "serve": [["{run}"], ["--port", "0"]],
    "study": [["{tmp}/study.yaml"], ["--status"]],     # --status: nothing trains
}
# what a flag's case needs beyond its verb's BASE: plot-tree's layer is a run's
NEEDS: dict[tuple[str, str], list[list[str]]] = {("plot-tree", "--layer"): [["--run", "{run}"]]}
# a flag that is a whole command line by itself: --resume takes the run's own config and output
ALONE = {("train", "--resume")}
RUNS = {"{run}": "lm_run", "{tag}": "tagging_run", "{tr}": "bpe_translation_run"}
STDIN = "the company said\n"        # for a verb that reads stdin when no input is named

PARSE, RUN = "parse", "run"      # a usage error of the parser; or found by the verb running


@dataclass(frozen=True)
class Bad:
    """A bad value of a ``FORMS`` flag: its case, the text, when it is found and what the error
    line says (a regular expression; for a ``PARSE`` case, after ``argument FLAG: ``)."""

    case: str
    value: str
    when: str
    says: str


# the bad values of the flags and positionals whose text has a form, by metavar (the lm_run is
# a 2-layer ON-LSTM, so 99 is a layer it lacks)
FORMS: dict[str, list[Bad]] = {
    "K|all": [Bad("type", "abc", PARSE, "must be a layer number or 'all', got abc"),
              Bad("range", "0", PARSE, "layers are numbered from 1, got 0"),
              Bad("range", "99", RUN, "--layer 99: this model's ON-LSTM layers are 1, 2")],
    "K": [Bad("type", "abc", PARSE, "must be a layer number, got abc"),
          Bad("range", "0", PARSE, "layers are numbered from 1, got 0"),
          Bad("range", "all", PARSE, "'all' is not possible here"),
          Bad("range", "99", RUN, "--layer 99: this model's ON-LSTM layers are 1, 2")],
    "CELL": [Bad("range", "nosuch", RUN, "unknown cell 'nosuch'; choose from elman, ")],
    "LABELS": [Bad("type", ",", PARSE, "give one label or more"),
               Bad("range", "NOSUCH", RUN, "is labelled NOSUCH; its labels are NP")],
    # an address of TEST-NET-1 (RFC 5737), which no machine has: bind() fails at once, with no
    # name to look up
    "HOST": [Bad("range", "192.0.2.1", RUN, r"cannot listen on 192\.0\.2\.1:0 ")],
    "key=value": [Bad("type", "seed", RUN, "'seed' is not of the form key=value"),
                  Bad("type", "train.lr=abc", RUN, "train.lr = 'abc': expected a finite number"),
                  Bad("range", "nosuch.x=1", RUN, "the key must start with one of"),
                  Bad("range", "train.nosuch=1", RUN, r"unknown train options \['nosuch'\]"),
                  Bad("range", "train.lr=-1", RUN, r"train.lr = -1\.0: must be > 0")],
    "TREE|SENTENCE": [Bad("type", "(a b", RUN, r"malformed tree: 1 unclosed '\('")],
    # ensemble's sources: a run, RUN:LAYER:RULE or a tree file
    "SOURCE": [Bad("unreadable", "{tmp}/plain.txt/none", RUN, "no such run directory, "
                   "RUN:LAYER:RULE"),
               Bad("range", "{run}:99:official", RUN, "layer 99: this model's ON-LSTM layers "
                   "are 1, 2"),
               Bad("range", "{run}:2:nosuch", RUN, "no such run directory, RUN:LAYER:RULE"),
               Bad("type", "{tmp}/plain.txt", RUN, r"plain\.txt:1: malformed tree: 9 trees side "
                   "by side")],
    "TREEBANK": [Bad("unreadable", "{tmp}/plain.txt/none", RUN,
                     r"--exclude .*plain\.txt/none.*\(--exclude none keeps every sentence\)")],
    "W1,W2,...": [Bad("type", "a,b", PARSE, "give one number >= 0 per source"),
                  Bad("range", "1,-1", PARSE, "give one number >= 0 per source"),
                  Bad("range", "1,2", RUN, "2 weights for 1 sources")],
}
# the arguments that take any text, each with the reason ("VERB NAME": a flag, or a positional's
# metavar); one that is not here and has no form in FORMS fails the coverage test
FREE_TEXT: dict[str, str] = {
    "generate --prompt": "any text starts the sample, the empty one included (the default)",
    "probe --prompt": "any text is a prefix; words outside the vocabulary follow --unk",
    "parse SENTENCE": "any text is a sentence; words outside the vocabulary follow --unk",
    "plot SENTENCE": "any text is a sentence; words outside the vocabulary follow --unk",
    "plot --title": "any text is a title; '' draws none",
    "plot-tree --title": "any text is a title; '' draws none",
    "study --partition": "any text names a Slurm partition; sbatch says which it does not know",
}


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


def arguments(p: argparse.ArgumentParser) -> list[argparse.Action]:
    """The flags, then the positionals (in order)."""
    return [*flags(p), *p._get_positional_actions()]


def name(a: argparse.Action) -> str:
    """A flag's long name, or a positional's metavar: how the cases and FREE_TEXT call it."""
    return a.option_strings[-1] if a.option_strings else metavar(a)


def positionals(p: argparse.ArgumentParser) -> list[str]:
    """Placeholder words for the positionals: enough for the parser, which checks no more."""
    return [f"{a.dest}{i}" for a in p._get_positional_actions()
            for i in range(1 if a.nargs in (None, "?") else 2 if a.nargs in ("+", "*") else 0)]


def required_flags(p: argparse.ArgumentParser) -> list[str]:
    """The required flags of a verb, each with a value its parser takes."""
    words = []
    for a in flags(p):
        if a.required:
            value = "1" if numeric(a) else str(next(iter(a.choices))) if a.choices else "x"
            words += [a.option_strings[-1], *([value] if a.nargs != 0 else [])]
    return words


def metavar(a: argparse.Action) -> str:
    """What ``--help`` shows for the value, in capitals for a positional without a metavar
    (``run_dir`` is a RUN_DIR like any other)."""
    return str(a.metavar or a.dest.upper())


def numeric(a: argparse.Action) -> bool:
    return a.type in (int, float) or isinstance(a.type, Number)


def path_kind(a: argparse.Action) -> str | None:
    """``"read"``, ``"written"`` or None: the rule of the module docstring."""
    parts = re.split(r"[^A-Z]+", metavar(a))
    if a.nargs == 0 or not {"FILE", "PATH", "DIR", "RUN"} & set(parts):
        return None
    named = {"-o", "--output", "--out"} & set(a.option_strings)
    return "written" if named or re.search(r"FILE\.\w+", metavar(a)) else "read"


def needs_form(a: argparse.Action) -> bool:
    """An argument that takes text which is neither a number, one of ``choices`` nor a path:
    it has a form in FORMS or is FREE_TEXT."""
    return a.nargs != 0 and not numeric(a) and not a.choices and path_kind(a) is None


def applicable(a: argparse.Action) -> set[str]:
    """The cases that apply to an argument (module docstring)."""
    if a.option_strings and a.nargs == 0:      # a switch
        return set()
    cases = {"missing"} if a.option_strings or a.nargs in (None, "+") else set()
    if numeric(a):
        cases |= {"type", "range"}
    if a.choices:
        cases.add("range")
    if path_kind(a):
        cases.add("unreadable" if path_kind(a) == "read" else "unwritable")
    if needs_form(a):
        cases |= {b.case for b in FORMS.get(metavar(a), [])}
    return cases


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


@dataclass(frozen=True)
class Case:
    """One bad value of one argument: ``value`` None is the missing case."""

    verb: str
    action: argparse.Action
    case: str
    value: str | None
    says: str = ""

    @property
    def name(self) -> str:
        return name(self.action)

    def param(self) -> Any:
        shown = "none" if self.value is None else re.sub(r"[^\w.]+", "_", self.value)
        return pytest.param(self, id=f"{self.verb}-{self.name.lstrip('-')}-{shown}-{self.case}")


def usage_cases() -> list[Any]:
    """Every case of every argument of every verb that the parser finds."""
    cases = []
    for verb, p in verbs(build_parser()):
        for a in arguments(p):
            if a.option_strings and a.nargs == 0:      # a switch: nothing to get wrong
                continue
            tried: list[Case] = []
            if "missing" in applicable(a):
                tried.append(Case(verb, a, "missing", None))
            if numeric(a):
                kind = a.type.kind if isinstance(a.type, Number) else a.type
                tried += [Case(verb, a, "type", "abc")]
                tried += [Case(verb, a, "type", "2.5")] if kind is int else []
            if a.choices:
                tried.append(Case(verb, a, "range", "no-such-choice"))
            if isinstance(a.type, Number):
                tried += [Case(verb, a, "range", v) for v in outside(a.type)]
            if needs_form(a):
                tried += [Case(verb, a, b.case, b.value, b.says)
                          for b in FORMS.get(metavar(a), []) if b.when == PARSE]
            cases += [c.param() for c in tried]
    return cases


def run_cases() -> list[Any]:
    """Every case of every argument of every verb that the verb finds running: bad paths, and
    the FORMS values marked RUN."""
    cases = []
    for verb, p in verbs(build_parser()):
        for a in arguments(p):
            kind = path_kind(a)
            if kind is not None:
                suffix = m[0][4:] if (m := re.search(r"FILE(\.\w+)", metavar(a))) else ""
                bad = [f"{{tmp}}/plain.txt/none{suffix}"]
                if metavar(a).startswith("FILE") or (not a.option_strings and kind == "read"):
                    bad.append("{tmp}")     # a directory, where a file or a run is read
                case = "unwritable" if kind == "written" else "unreadable"
                cases += [Case(verb, a, case, v).param() for v in bad]
            elif needs_form(a):
                cases += [Case(verb, a, b.case, b.value, b.says).param()
                          for b in FORMS.get(metavar(a), []) if b.when == RUN]
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


@pytest.mark.parametrize("case", usage_cases())
def test_a_bad_value_the_parser_finds_is_one_line_naming_the_flag(case, capsys):
    a = case.action
    p = dict(verbs(build_parser()))[case.verb]
    if not a.option_strings:
        # a required positional left out, and the other positionals with it; the required flags
        # are given, for the parser says those first
        line = one_line_exit_2([*case.verb.split(), *required_flags(p)], capsys)
        assert re.match(rf"treelm {case.verb}: error: the following arguments are required: "
                        rf".*(?<![\w|]){re.escape(a.metavar or a.dest)}(?![\w|])", line), line
        return
    value = [] if case.value is None else [case.value]
    line = one_line_exit_2([*case.verb.split(), *positionals(p), case.name, *value], capsys)
    prefix = f"treelm {case.verb}: error: argument {'/'.join(a.option_strings)}: "
    assert line.startswith(prefix), line
    assert re.search(case.says, line[len(prefix):]), line


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "plain.txt").write_text("a regular file, so nothing can be under it\n")
    (tmp_path / "tiny.mrg").write_text("( (S (NP (DT the) (NN company)) (VP (VBD said))) )\n")
    (tmp_path / "study.yaml").write_text(f"config: configs/tiny-lm.yaml\nruns: {tmp_path}/runs\n"
                                         f"record: {tmp_path}/record.json\n")
    return tmp_path


def command(case: Case) -> list[str]:
    """The verb's BASE (and the flag's NEEDS) with the bad value in its place."""
    p = dict(verbs(build_parser()))[case.verb]
    if (case.verb, case.name) in ALONE:
        return [*case.verb.split(), case.name, str(case.value)]
    group = next((g._group_actions for g in p._mutually_exclusive_groups
                  if any(case.name in a.option_strings for a in g._group_actions)), [])
    others = {o for a in group if case.name not in a.option_strings for o in a.option_strings}
    units = [u for u in [*BASE[case.verb], *NEEDS.get((case.verb, case.name), [])]
             if u[0] not in others]
    given = [u for u in units if not u[0].startswith("-")]
    options = [u for u in units if u[0].startswith("-")]
    if case.action.option_strings:
        options.append([case.name, str(case.value)])
    else:                       # a positional takes the place of its own
        i = [a.dest for a in p._get_positional_actions()].index(case.action.dest)
        given[i:i + 1] = [[str(case.value)]]
    return [*case.verb.split(), *(w for u in [*given, *options] for w in u)]


@pytest.mark.parametrize("case", run_cases())
def test_a_bad_value_the_verb_finds_is_one_line_naming_it(case, tmp, capsys, monkeypatch,
                                                          request):
    argv = command(case)
    fill = {"{tmp}": str(tmp)}
    for key, fixture in RUNS.items():
        if any(key in w for w in argv):
            fill[key] = str(request.getfixturevalue(fixture))
    for key, v in fill.items():
        argv = [w.replace(key, v) for w in argv]
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr("sys.stdin", io.StringIO(STDIN))
    if case.verb == "serve":    # a host or run that should have been refused must not hang here
        def never(*_: Any, **__: Any) -> None:
            pytest.fail(f"treelm {' '.join(argv)} started serving")

        monkeypatch.setattr("treelm.serve.server.Server.serve_forever", never)
    line = one_line_exit_2(argv, capsys)
    if case.says:
        assert re.search(case.says, line), line
        return
    named = re.escape(str(case.value).replace("{tmp}", str(tmp)))
    if case.value == "{tmp}":    # the directory itself, not a path under it (such as --out's)
        named += r"(?![/\w])"
    assert re.search(named, line), line


def test_layers_and_labels_that_hold_are_taken(lm_run, tmp, capsys, monkeypatch):
    """The checks of the FORMS flags refuse no good value."""
    assert LayerArg()("all") == "all" and LayerArg(allow_all=False)("2") == "2"
    assert label_list(" NP , VP,") == ["NP", "VP"]
    monkeypatch.chdir(ROOT)
    capsys.readouterr()
    assert main(["eval-parse", str(lm_run), "--treebank", str(tmp / "tiny.mrg"), "--layer", "1",
                 "--labels", "NP", "--seeds", "1"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert any(line.split()[-1:] == ["NP"] for line in table), table
    assert main(["parse", str(lm_run), "the company said", "--layer", "all"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in out] == ["layer 1", "layer 2"], out


def test_every_verb_that_runs_a_case_has_a_base():
    missing = sorted({c.values[0].verb for c in run_cases()} - set(BASE))
    assert not missing, f"add the smallest valid command line of {missing} to BASE"


def test_every_numeric_flag_declares_its_range():
    """A flag typed ``int`` or ``float`` has no range the parser checks and this test could
    try: it is a :class:`treelm.verb.Number` instead."""
    plain = sorted(f"{verb} {a.option_strings[-1]}" for verb, p in verbs(build_parser())
                   for a in flags(p) if a.type in (int, float))
    assert plain == [], plain


def test_every_text_argument_has_a_form_or_is_free_text():
    """An argument that takes text (not a number, a choice or a path) gives its bad values in
    FORMS or is declared FREE_TEXT, with the reason: none is tried for its missing value alone
    without anyone having said why."""
    text = {f"{verb} {name(a)}": metavar(a) for verb, p in verbs(build_parser())
            for a in arguments(p) if needs_form(a)}
    undeclared = sorted(k for k, m in text.items() if m not in FORMS and k not in FREE_TEXT)
    assert not undeclared, ("give their bad values in FORMS, or say in FREE_TEXT why any text "
                            f"is right: {undeclared}")
    assert not sorted(k for k, m in text.items() if m in FORMS and k in FREE_TEXT)
    assert not sorted(set(FREE_TEXT) - set(text)), "FREE_TEXT names what no verb has"
    assert not sorted(set(FORMS) - set(text.values())), "FORMS has a form no argument has"
    assert all(FORMS.values()) and all(FREE_TEXT.values())


def test_the_generated_cases_cover_every_flag_of_every_verb():
    """Every argument of every verb has exactly the cases that apply to it, each at least once
    (a switch: none, having nothing to get wrong); the rules say what they should of arguments
    of each kind (they have not gone blind)."""
    tried: defaultdict[str, set[str]] = defaultdict(set)
    for param in [*usage_cases(), *run_cases()]:
        case = param.values[0]
        tried[f"{case.verb} {case.name}"].add(case.case)
    every = {f"{verb} {name(a)}": a for verb, p in verbs(build_parser()) for a in arguments(p)}
    wrong = {k: (sorted(applicable(a)), sorted(tried.get(k, set()))) for k, a in every.items()
             if tried.get(k, set()) != applicable(a)}
    assert not wrong, f"(applicable, tried): {wrong}"
    assert not set(tried) - set(every)
    expect = {
        "eval --beam": {"missing", "type", "range"},
        "eval --split": {"missing", "range"},
        "parse --layer": {"missing", "type", "range"},
        "plot --layer": {"missing", "type", "range"},
        "plot-tree --layer": {"missing", "type", "range"},
        "eval-parse --labels": {"missing", "type", "range"},
        "gradflow --cells": {"missing", "range"},
        "serve --host": {"missing", "range"},
        "generate --prompt": {"missing"},
        "plot --title": {"missing"},
        "train --config": {"missing", "unreadable"},
        "train --out": {"missing", "unwritable"},
        "plot --output": {"missing", "unwritable"},
        "gradflow --csv": {"missing", "unwritable"},
        "tag --input": {"missing", "unreadable"},
        "suite agreement --pairs": {"missing", "unreadable"},
        "eval RUN_DIR": {"missing", "unreadable"},
        "eval-parse RUN_DIR": {"unreadable"},
        "suite agreement RUN_DIR": {"missing", "unreadable"},
        "serve RUN": {"missing", "unreadable"},
        "train key=value": {"type", "range"},
        "plot-tree TREE|SENTENCE": {"type"},
        "parse SENTENCE": set(),
        "parse --normalize": set(),
    }
    assert {k: applicable(every[k]) for k in expect} == expect
    assert len(every) >= 140 and len(usage_cases()) + len(run_cases()) >= 380


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
