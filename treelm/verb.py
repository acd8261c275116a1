"""The parser of a verb: ``treelm NAME`` with its one-line help, a description filled to the
terminal's usual width and the examples as written, running one function; every verb's
``add_<verb>`` starts with it, so that all ``--help`` pages read alike."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable
from typing import Any


def add_verb(sub: Any, name: str, func: Callable[[argparse.Namespace], int], help: str,
             description: str, epilog: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``treelm NAME``: ``help`` in the list of verbs; ``--help`` shows
    ``description`` filled to 79 columns and ``epilog`` (the examples) as written; the verb runs
    ``func(args)``."""
    p = sub.add_parser(name, help=help, description=textwrap.fill(description, 79),
                       epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(func=func)
    return p
