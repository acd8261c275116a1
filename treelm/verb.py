"""The parser of a verb: ``treelm NAME`` with its one-line help, a description filled to the
terminal's usual width and the examples as written, running one function; every verb's
``add_<verb>`` starts with it, so that all ``--help`` pages read alike.

The help and the description are the verb function's docstring: its first paragraph is the line
``treelm --help`` lists, the rest is what ``treelm NAME --help`` says above the options. So what a
verb does is written once, where it is done.

Every parser of the command line is a :class:`TreelmParser`: flags may come before, between or
after the positional arguments (``treelm parse RUN --layer 2 "the cat sat"``), and a usage error
is one line, as every other error of treelm is.
"""

from __future__ import annotations

import argparse
import inspect
import math
import textwrap
from collections.abc import Callable
from typing import Any, NoReturn


class TreelmParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that parses intermixed flags and positionals and says a usage error
    in one line (``treelm VERB: error: ... (see treelm VERB --help)``), exit 2.

    Subparsers are made with the class of their parent (argparse's default), so giving it to the
    top-level parser (:func:`treelm.cli.build_parser`) gives it to every verb, sub-verbs included.
    """

    _intermixing = False     # inside parse_known_intermixed_args, which calls parse_known_args

    def parse_known_args(self, args: Any = None, namespace: Any = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        # argparse hands a verb its arguments through the verb parser's parse_known_args, so this
        # is the one place that makes every verb intermixed. Plain parsing takes the positionals
        # as the first run of non-flag words: in "RUN --layer 2 the cat" the sentence would be
        # left over ("unrecognized arguments"). A parser with subparsers (the top level, `suite`)
        # cannot be intermixed (argparse refuses) and needs not be: its verbs are.
        if self._intermixing or not self._intermixable():
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:     # said by the verb that was given them, whose --help lists what it takes
            self._chosen(namespace).error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace

    def _chosen(self, namespace: argparse.Namespace) -> argparse.ArgumentParser:
        """The parser of the verb (or sub-verb) that ``namespace`` was parsed by."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                sub = action.choices.get(getattr(namespace, action.dest, None))
                if sub is not None:
                    return sub._chosen(namespace) if isinstance(sub, TreelmParser) else sub
        return self

    def _intermixable(self) -> bool:
        positionals = self._get_positional_actions()
        return not any(a.nargs in (argparse.PARSER, argparse.REMAINDER) for a in positionals) \
            and not any(a in positionals for g in self._mutually_exclusive_groups
                        for a in g._group_actions)

    def error(self, message: str) -> NoReturn:
        # argparse prints the usage block and then the error (two lines or more); treelm's errors
        # are one line each, so the pointer to the usage goes on the same line
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class Number:
    """The ``type=`` of a numeric flag, with its range: ``Number(int, at_least=1)``,
    ``Number(float, above=0, at_most=1)``. The value is checked as the flag is parsed, so a bad
    one is a one-line usage error naming the flag (``argument --beam: must be an integer >= 1,
    got 0``) before any run is opened or any work done; a float must also be finite (``nan``,
    ``inf`` and ``1e999`` are refused). Text that is not a number gets argparse's own ``invalid
    int value: 'x'``. The bounds are public: the generated bad-input test tries values just
    outside them, for every flag that has one.
    """

    def __init__(self, kind: type[int] | type[float], *, at_least: float | None = None,
                 above: float | None = None, at_most: float | None = None,
                 says: str | None = None) -> None:
        self.kind, self.at_least, self.above, self.at_most = kind, at_least, above, at_most
        self.__name__ = kind.__name__       # argparse's "invalid <name> value: 'x'"
        self.says = says or self._rule()

    def _rule(self) -> str:
        what = "an integer" if self.kind is int else "a finite number"
        low = self.at_least if self.at_least is not None else self.above
        if low is not None and self.at_most is not None:     # (finite, being in it)
            what = "an integer" if self.kind is int else "a number"
            return f"{what} in {'[' if self.above is None else '('}{low}, {self.at_most}]"
        if low is not None:
            return f"{what} {'>=' if self.above is None else '>'} {low}"
        return f"{what} <= {self.at_most}" if self.at_most is not None else what

    def holds(self, value: float) -> bool:
        return ((self.kind is int or math.isfinite(value))   # (a huge int is no float)
                and (self.at_least is None or value >= self.at_least)
                and (self.above is None or value > self.above)
                and (self.at_most is None or value <= self.at_most))

    def __call__(self, text: str) -> int | float:
        value = self.kind(text)      # ValueError: argparse says "invalid int value: 'x'"
        if not self.holds(value):
            raise argparse.ArgumentTypeError(f"must be {self.says}, got {text}")
        return value

    def __repr__(self) -> str:
        return f"Number({self.__name__}: {self.says})"


# torch's generators take seeds below 2**64 (a larger one is an OverflowError deep inside)
SEED = Number(int, at_least=0, at_most=2**64 - 1, says="an integer from 0 to 2**64 - 1")


def add_verb(sub: Any, name: str, func: Callable[[argparse.Namespace], int],
             epilog: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``treelm NAME``: ``func``'s docstring gives the help (its first paragraph)
    and the description (the rest, filled to 79 columns); ``epilog`` (the examples) is shown as
    written; the verb runs ``func(args)``."""
    doc = inspect.cleandoc(func.__doc__ or "")
    first, _, rest = doc.partition("\n\n")
    if not first or not rest:
        raise ValueError(f"{func.__name__}: the docstring must give the help line, a blank "
                         f"line and the description")
    p = sub.add_parser(name, help=" ".join(first.split()),
                       description=textwrap.fill(" ".join(rest.split()), 79),
                       epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(func=func)
    return p
