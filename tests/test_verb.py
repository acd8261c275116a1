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
