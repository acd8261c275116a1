"""What ``eval-parse`` and ``ensemble`` print of a treebank, in one code for both verbs.

``ensemble --treebank`` scores its sources and their ensemble as ``eval-parse --trees`` scores
tree files (:func:`treelm.syntax.report.parsing_report`), and prints them here too: the table
with the treebank's label columns (the Sinica treebanks' own categories,
:func:`treelm.syntax.report.table_labels`) or one JSON object (:func:`print_report`). Tree files
are read against the treebank's words here (:func:`tree_files`): leaves as written or as the
treebank normalises its own (lower case, digit runs -> ``N`` for the PTB), or, with ``--match
position``, any words as many as the sentence's, the lines spelt otherwise counted in one line
on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from treelm.syntax.report import TABLE_LABELS

#: ``--baseline`` names and the report's.
BASELINE_NAMES = {"left": "left_branching", "right": "right_branching",
                  "balanced": "balanced", "random": "random"}
DEFAULT_LABELS = ",".join(TABLE_LABELS)


def label_list(text: str) -> list[str]:
    """The ``type=`` of ``eval-parse --labels``: comma-separated constituent labels (``NP,VP``;
    spaces around them are dropped, as a table column named `` VP`` could never match); at least
    one. Whether the treebank has them is checked once it is read
    (:func:`~treelm.syntax.report.parsing_report`)."""
    labels = [s.strip() for s in text.split(",") if s.strip()]
    if not labels:
        raise argparse.ArgumentTypeError(f"give one label or more, comma-separated (e.g. NP,VP), "
                                         f"got {text!r}")
    return labels


def baseline_names(asked: Sequence[str] | None, none: bool, style: str) -> list[str]:
    """The report's baselines for ``--baseline`` (``asked``; default: all), ``--no-baselines``
    (``none``) and the rule control of ``--style``."""
    chosen = set(asked or ["all"])
    if none:
        return []
    if "all" in chosen:
        return [*BASELINE_NAMES.values(), f"random_levels_{style}"]
    names = [BASELINE_NAMES[b] for b in sorted(chosen - {"control"})]
    return names + [f"random_levels_{style}"] * ("control" in chosen)


def add_match_option(p: argparse.ArgumentParser) -> None:
    from treelm.syntax.tree_files import MATCHES

    p.add_argument("--match", choices=MATCHES, default="words",
                   help="how a tree file's leaves are matched with the sentence's words: words "
                   "(default: as written or as the treebank normalises them: lower case, digit "
                   "runs -> N) or position (any spelling, as many words as the sentence; the "
                   "lines spelt otherwise are counted on stderr)")


def tree_files(paths: Sequence[str], treebank: str, max_len: int | None, match: str,
               verb: str) -> tuple[list[Any], dict[str, list[Any]]]:
    """:func:`~treelm.syntax.report.tree_file_golds` of ``paths``; with ``match="position"``,
    one line on stderr per file: how many of its lines spell words otherwise."""
    from treelm.syntax.report import tree_file_golds

    respelt: list[Any] = []
    golds, trees = tree_file_golds(paths, treebank, max_len, match, respelt)
    if match == "position":
        for lines in respelt:
            print(lines.note(verb), file=sys.stderr, flush=True)
    return golds, trees


def print_report(report: dict[str, Any], fmt: str, labels: Sequence[str] | None = None,
                 file: TextIO | None = None) -> None:
    """A :func:`~treelm.syntax.report.parsing_report` as ``eval-parse`` prints it: one JSON
    object (``fmt="json"``) or the table, with ``labels`` or the treebank's own columns."""
    from treelm.syntax.report import format_table, table_labels

    shown = (json.dumps(report) if fmt == "json"
             else format_table(report, table_labels(report["treebank"], labels)))
    print(shown, file=file or sys.stdout, flush=True)


__all__ = ["BASELINE_NAMES", "DEFAULT_LABELS", "add_match_option", "baseline_names",
           "label_list", "print_report", "tree_files"]
