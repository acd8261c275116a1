"""The parser of a verb: ``treelm NAME`` with its one-line help, a description filled to the
terminal's usual width and the examples as written, running one function; every verb's
``add_<verb>`` starts with it, so that all ``--help`` pages read alike.

The help and the description are the verb function's docstring: its first paragraph is the line
``treelm --help`` lists, the rest is what ``treelm NAME --help`` says above the options. So what a
verb does is written once, where it is done.
"""

from __future__ import annotations

import argparse
import inspect
import textwrap
from collections.abc import Callable
from typing import Any


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
