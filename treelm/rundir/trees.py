"""A run's tree defaults, ``trees.json``: per checkpoint, the ON-LSTM layer and tree rule chosen
on labelled dev trees, which ``parse``, ``plot``, ``serve`` and ``treelm.load(...).parse`` use
unless told otherwise.

Why a file of its own: the choice is made from gold trees the model never saw, after its weights
are written (by the trainer's ``train.eval_parse`` at a validation, or later by ``treelm
eval-parse`` on a dev treebank). Kept apart from the weights, it stays visibly what it is, a
choice made on labelled dev data, which explicit ``--layer``/``--style`` override and which
deleting the file undoes.

Layout (one entry per checkpoint name; scores as fractions)::

    {"best": {"checkpoint": "best", "path": "ckpt/000012", "treebank": "nltk-dev",
              "max_len": null, "layer": 3, "rule": "split", "sentence_f1": 0.476,
              "step": 1234, "tokens": 800000,
              "how": "train.eval_parse at the best checkpoint's validation",
              "scores": {"parse_f1/official/L1": 0.31, "...": 0.0}},
     "best-trees": {"...": "..."}, "best-trees-split": {"...": "..."}}

An entry holds for the checkpoint directory ``path`` only: once the pointer's ``best`` (or
``last``, ``best-trees``) names another directory the entry is stale and readers ignore it
(:func:`current_choice`), so a choice never outlives the weights it was made for. Writes are
atomic (:func:`~treelm.rundir.files.atomic_write_text`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from treelm.errors import CheckpointError
from treelm.rundir.files import TREES, atomic_write_text

#: ``how`` of the trainer's entries (``train.eval_parse``), and of ``treelm eval-parse``'s.
HOW_BEST = "train.eval_parse at the best checkpoint's validation"
HOW_BEST_TREES = "train.eval_parse at the validation with the best dev F1"
HOW_BEST_RULE = "train.eval_parse at the validation with the best dev F1 under its rule"
HOW_EVAL_PARSE = "eval-parse"
#: The checkpoint of the best dev trees under any rule, and its prefix for one rule's own.
BEST_TREES = "best-trees"


def rule_checkpoint(rule: str) -> str:
    """The name of the checkpoint of the best dev trees under ``rule`` alone:
    ``best-trees-split``. Why one per rule: the rules peak at different points of a run (the
    split rule's F1 often peaks early and falls while perplexity improves), and ``best-trees``,
    the best of either, almost always follows the official rule."""
    return f"{BEST_TREES}-{rule}"


def checkpoint_rule(name: str) -> str | None:
    """The rule of a :func:`rule_checkpoint` name (``best-trees-split``: ``split``); None for
    any other checkpoint."""
    head, sep, rule = name.partition(f"{BEST_TREES}-")
    return rule if sep and not head and rule else None


@dataclass(frozen=True)
class TreeChoice:
    """The layer and rule chosen for checkpoint ``checkpoint`` (its directory ``path``) on the
    dev treebank ``treebank`` (sentences of at most ``max_len`` words; None: all), with the
    sentence F1 ``sentence_f1`` they scored there, the training ``step`` and ``tokens`` of the
    checkpoint, ``how`` it was chosen and the ``scores`` it was chosen from (metrics keys
    ``parse_f1/<rule>/L<k>``)."""

    checkpoint: str
    path: str
    treebank: str
    layer: int
    rule: str
    sentence_f1: float
    step: int
    tokens: int
    how: str
    max_len: int | None = None
    scores: dict[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        """Where and how well: ``chosen on nltk-dev (sentence F1 47.6 at the best
        checkpoint)``."""
        short = f", sentences of <= {self.max_len} words" if self.max_len else ""
        return (f"chosen on {self.treebank}{short} (sentence F1 {100 * self.sentence_f1:.1f} "
                f"at the {self.checkpoint} checkpoint)")


def read_choices(run: str | Path) -> dict[str, TreeChoice]:
    """Every entry of ``run``'s ``trees.json`` (``{}`` without one), stale ones included.

    Raises:
        CheckpointError: the file is there but is not a set of entries (edited or damaged).
    """
    path = Path(run) / TREES
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not JSON"
        raise CheckpointError(f"{path}: cannot read ({why}); delete it to parse with the "
                              f"default layer and rule") from None
    try:
        return {name: TreeChoice(**entry) for name, entry in raw.items()}
    except (AttributeError, TypeError):
        raise CheckpointError(f"{path}: not a set of tree choices (edited or damaged); delete "
                              f"it to parse with the default layer and rule") from None


def write_choices(run: str | Path, changes: dict[str, TreeChoice | None]) -> None:
    """Set (or, for None, remove) the entries ``changes`` names, keeping the others; the file
    goes when no entry is left. A damaged file is replaced: it held nothing usable."""
    path = Path(run) / TREES
    try:
        entries = read_choices(run)
    except CheckpointError:
        entries = {}
    for name, choice in changes.items():
        if choice is None:
            entries.pop(name, None)
        else:
            entries[name] = choice
    if not entries:
        path.unlink(missing_ok=True)
        return
    atomic_write_text(path, json.dumps({k: asdict(v) for k, v in entries.items()}, indent=1)
                      + "\n")


def current_choice(run: str | Path, which: str,
                   pointer: dict[str, Any] | None = None) -> TreeChoice | None:
    """The entry for checkpoint ``which`` if it was made for the directory the pointer names
    now (``pointer``: ``checkpoint.json`` as read, else read here); None otherwise."""
    if pointer is None:
        from treelm.rundir.checkpoint import read_pointer

        pointer = read_pointer(Path(run))
    choice = read_choices(run).get(which)
    if choice is None or pointer.get(which) != choice.path:
        return None
    return choice


__all__ = ["BEST_TREES", "HOW_BEST", "HOW_BEST_RULE", "HOW_BEST_TREES", "HOW_EVAL_PARSE",
           "TreeChoice", "checkpoint_rule", "current_choice", "read_choices", "rule_checkpoint",
           "write_choices"]
