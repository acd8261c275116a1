"""treelm.verb.add_verb: a verb's --help text is its function's docstring."""

from __future__ import annotations

import argparse

import pytest

from treelm.cli import build_parser
from treelm.verb import add_verb


def _doc(args: argparse.Namespace) -> int:
    """say hello

    Print a greeting to
    whoever asks, once.
    """
    return 0


def _undocumented(args: argparse.Namespace) -> int:
    return 0


def test_help_and_description_come_from_the_docstring():
    parser = argparse.ArgumentParser(prog="t")
    sub = parser.add_subparsers()
    p = add_verb(sub, "hello", _doc, epilog="examples:\n  t hello")
    assert p.description == "Print a greeting to whoever asks, once."
    assert p.epilog == "examples:\n  t hello"
    assert sub.choices["hello"] is p
    assert "say hello" in parser.format_help()
    assert parser.parse_args(["hello"]).func is _doc


def test_a_verb_without_its_docstring_is_refused():
    sub = argparse.ArgumentParser().add_subparsers()
    with pytest.raises(ValueError, match="_undocumented: the docstring"):
        add_verb(sub, "x", _undocumented)


def test_every_verb_of_the_cli_has_a_help_line_and_a_description():
    parser = build_parser()
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in verbs._choices_actions}
    for name, p in verbs.choices.items():
        if name == "suite":             # a group of suites: each suite is a verb of its own
            continue
        assert helps[name] and p.description, name


# ----------------------------------------------------------------------------- flags anywhere
def verb_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
                 ) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every verb's parser (sub-verbs such as ``suite agreement`` included) with its words."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += [((*path, name), sub), *verb_parsers(sub, (*path, name))]
    return found


def _example(action: argparse.Action) -> list[str]:
    """A value for ``action`` that its type takes and that differs from its default."""
    if action.choices:
        return [next(str(c) for c in reversed(list(action.choices)) if c != action.default)]
    for text in ("3", "0.5", "word"):
        try:
            value = action.type(text) if callable(action.type) else text
        except (TypeError, ValueError, argparse.ArgumentTypeError):
            continue
        if value != action.default:
            return [text] * (2 if action.nargs in ("+", "*") else 1)
    raise AssertionError(f"no example value for {action.option_strings}")


def flags_and_positionals(p: argparse.ArgumentParser
                          ) -> tuple[list[list[str]], list[list[str]], list[list[str]]]:
    """(flags with their values, one list each; positionals' words; variable-length flags):
    every flag but --help, one of each mutually exclusive group. A flag taking a variable number
    of values swallows the words after it, positionals included, so it is kept apart (last)."""
    exclusive = {id(a): g for g in p._mutually_exclusive_groups for a in g._group_actions}
    seen_groups: set[int] = set()
    flags, tail, positionals = [], [], []
    for a in p._actions:
        if isinstance(a, (argparse._HelpAction, argparse._VersionAction)):
            continue
        if not a.option_strings:
            n = 2 if a.nargs in ("+", "*") else 1
            positionals.append([f"{a.dest}{i}" for i in range(n)])
            continue
        group = exclusive.get(id(a))
        if group is not None:
            if id(group) in seen_groups:
                continue
            seen_groups.add(id(group))
        unit = [a.option_strings[-1], *([] if a.nargs == 0 else _example(a))]
        (tail if a.nargs in ("+", "*") else flags).append(unit)
    return flags, positionals, tail


def test_every_verb_takes_its_flags_before_between_and_after_its_positionals():
    """``treelm parse RUN --layer 2 "the cat sat"`` as well as flags after the sentence or
    before the run: for every verb of the parser, each flag moved to every gap between its
    positionals gives the namespace that all flags after them give (a verb added later is
    walked too)."""
    parser = build_parser()
    checked = 0
    for path, p in verb_parsers(parser):
        flags, positionals, tail = flags_and_positionals(p)
        if not flags or not positionals:
            continue
        words = [w for pos in positionals for w in pos]
        after = vars(parser.parse_args([*path, *words, *sum(flags, []), *sum(tail, [])]))
        for unit in flags:      # the value was taken, not left at the default
            dest = next(a.dest for a in p._actions if unit[0] in a.option_strings)
            assert after[dest] != p.get_default(dest), (path, unit)
        gaps = [sum(len(pos) for pos in positionals[:i]) for i in range(len(positionals))]
        for unit in flags:
            others = sum((f for f in flags if f is not unit), [])
            for gap in gaps:
                argv = [*path, *words[:gap], *unit, *words[gap:], *others, *sum(tail, [])]
                assert vars(parser.parse_args(argv)) == after, argv
        everything = [*path, *sum(flags, []), *words, *sum(tail, [])]   # all flags first
        assert vars(parser.parse_args(everything)) == after, everything
        checked += 1
    assert checked >= 10


def test_a_usage_error_is_one_line_naming_the_verb(capsys):
    parser = build_parser()
    for argv, said in ((["parse", "RUN", "--layer"], "argument --layer: expected one argument"),
                       (["parse", "RUN", "a", "b"], "unrecognized arguments: b"),
                       (["suite", "agreement", "RUN", "--bogus"], "unrecognized arguments")):
        with pytest.raises(SystemExit) as e:
            parser.parse_args(argv)
        err = capsys.readouterr().err
        verb = " ".join(argv[:2 if argv[0] == "suite" else 1])
        assert e.value.code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"treelm {verb}: error: {said}"), err
        assert err.endswith(f" (see treelm {verb} --help)\n"), err


def test_a_reader_that_goes_away_ends_the_verb_quietly(tmp_path):
    """``treelm ... | head -1``: the closed pipe stops the verb without a traceback (exit 141,
    as a Unix tool killed by SIGPIPE)."""
    import subprocess
    import sys

    from test_train_eval_parse import MRG

    mrg = tmp_path / "mini.mrg"
    mrg.write_text(MRG, encoding="utf-8")
    p = subprocess.Popen([sys.executable, "-m", "treelm.cli", "eval-parse", "--baseline", "all",
                          "--treebank", str(mrg)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()                        # the reader is gone before the verb writes
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
