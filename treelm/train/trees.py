"""``train.eval_parse`` in the training loop: tree F1 at every validation and, on dev trees, the
choices made from it (the run's default layer and rule per checkpoint, ``best-trees`` and
``best-trees-<rule>``).

At each validation :class:`TrainingTrees` scores the trees of every ON-LSTM layer under every
rule (:class:`~treelm.syntax.tracking.ParseTracker`). When the treebank may choose
(:func:`~treelm.syntax.tracking.chooses`: ``nltk-dev``, ``sinica-dev`` or the file the config
names; never ``nltk-test``, ``sinica-test`` or the whole samples, which hold them), these choices
follow, each a ``(rule, layer)`` by :func:`~treelm.syntax.tracking.choose` (the highest
sentence F1; ties: official before split, then the lower layer):

* ``best`` (lowest validation loss, chosen as before): the ``(rule, layer)`` of the validation
  that made it ``best`` (``LoopState.tree_best``);
* ``best-trees``: the checkpoint saved right after the validation whose chosen sentence F1 is the
  highest of the run so far, that is, what is maximised is ``max over rules r and layers k of
  parse_f1/r/Lk`` at one validation, over all validations after training began (the validation
  of the untrained model that ``train.max_minutes`` runs first is not a candidate); a tie keeps
  the earlier validation (``LoopState.tree_top``). A validation inside an epoch that beats it is
  followed by a checkpoint at once (after an epoch's last batch, by the epoch's own);
* ``best-trees-<rule>`` for each rule scored: the same, with ``max over layers k of
  parse_f1/<rule>/Lk`` (``LoopState.tree_top_rule``). Why: the rules peak at different points
  (the split rule early, falling while perplexity improves, the official rule later), and
  ``best-trees`` almost always follows the official rule. One of them names the directory of
  ``best-trees``; a directory several names point to is written once.

All live in the loop's state, so a resume restores them with the rest, and
``trees.json`` (:mod:`treelm.rundir.trees`) is written from them after every checkpoint
(:meth:`TrainingTrees.sync`): an entry per pointer name that names the pointer's directory, the
stale ones dropped. These are choices made on labelled dev data; ``best`` itself is not one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch import nn

from treelm.data.treebank import TREEBANK_NAMES
from treelm.errors import TreelmError
from treelm.rundir.checkpoint import read_pointer
from treelm.rundir.trees import (
    BEST_TREES,
    HOW_BEST,
    HOW_BEST_RULE,
    HOW_BEST_TREES,
    TreeChoice,
    read_choices,
    rule_checkpoint,
    write_choices,
)
from treelm.syntax.report import MissingTreebankError
from treelm.syntax.tracking import ParseTracker, by_rule, choose, chooses
from treelm.train.config import EvalParse
from treelm.train.state import LoopState

#: Where the one line of a missing treebank points.
HINTS = {"nltk": "NLTK's WSJ sample: set NLTK_DATA, see docs/syntax.md",
         "sinica": "NLTK's Sinica Treebank sample: set NLTK_DATA, see docs/syntax-zh.md"}


class TrainingTrees(ParseTracker):
    """A :class:`~treelm.syntax.tracking.ParseTracker` that also keeps the run's tree choices.
    ``pending``: the names (``best-trees``, ``best-trees-<rule>``) a validation has beaten since
    the last checkpoint, which the checkpoint after it must point at."""

    def __init__(self, ep: EvalParse, model: nn.Module) -> None:
        super().__init__(ep.treebank, model, ep.layers, ep.rules, ep.max_len, ep.max_sentences,
                         ep.batch_size)
        self.max_len = ep.max_len
        self.chooses = chooses(ep.treebank, paths=True)
        self.pending: set[str] = set()

    def _record(self, scores: dict[str, float], s: LoopState, how: str) -> dict[str, Any]:
        rule, layer, f1 = choose(scores)
        return {"treebank": self.treebank, "max_len": self.max_len, "layer": layer,
                "rule": rule, "sentence_f1": f1, "step": s.step, "tokens": s.tokens,
                "how": how, "scores": dict(scores)}

    def validated(self, s: LoopState, scores: dict[str, float]) -> None:
        """After a validation: a new ``best-trees`` when its choice beats every earlier one, and
        a new ``best-trees-<rule>`` when its choice under that rule beats that rule's."""
        if not self.chooses or not scores or s.step == 0:
            return
        record = self._record(scores, s, HOW_BEST_TREES)
        if not s.tree_top or record["sentence_f1"] > s.tree_top["sentence_f1"]:
            s.tree_top = record
            self.pending.add(BEST_TREES)
        for rule, mine in sorted(by_rule(scores).items()):
            record = self._record(mine, s, HOW_BEST_RULE)
            top = s.tree_top_rule.get(rule)
            if not top or record["sentence_f1"] > top["sentence_f1"]:
                s.tree_top_rule[rule] = record
                self.pending.add(rule_checkpoint(rule))

    def best_record(self, s: LoopState, scores: dict[str, float]) -> dict[str, Any]:
        """The choice of ``best`` when the validation with these scores made it."""
        return self._record(scores, s, HOW_BEST) if self.chooses and scores else {}

    def sync(self, run: Path, s: LoopState) -> None:
        """``trees.json`` after a checkpoint (and on resume): entries for directories the pointer
        no longer names go; ``best``, ``best-trees`` and ``best-trees-<rule>`` get the state's
        choice unless their entry names the pointer's directory already (an ``eval-parse`` on
        dev keeps its own)."""
        if not self.chooses:
            return
        pointer = read_pointer(run)
        try:
            entries, damaged = read_choices(run), False
        except TreelmError:             # rewritten from the state
            entries, damaged = {}, True
        changes: dict[str, TreeChoice | None] = {
            name: None for name, c in entries.items() if c.path != pointer.get(name)}
        records = {"best": s.tree_best, BEST_TREES: s.tree_top,
                   **{rule_checkpoint(r): rec for r, rec in s.tree_top_rule.items()}}
        for name, record in records.items():
            path, entry = pointer.get(name), entries.get(name)
            if record and path and (entry is None or entry.path != path):
                changes[name] = TreeChoice(checkpoint=name, path=path, **record)
        if changes or damaged:
            write_choices(run, changes)


def check_task(ep: EvalParse | None, task: str) -> None:
    """``train.eval_parse`` is a language model's: any other task's run is refused (a study checks
    its runs so before it submits them)."""
    if ep is not None and task != "lm":
        raise TreelmError(f"train.eval_parse scores a language model's trees; this is a "
                          f"{task!r} run (drop train.eval_parse)")


def training_trees(ep: EvalParse | None, model: nn.Module, task: str, main: bool,
                   tell: Callable[[str], None]) -> TrainingTrees | None:
    """The tree scorer of ``train.eval_parse`` (main process only), the treebank read now: a
    missing one stops the run here, before anything is written, or (``if_missing: skip``) is
    said in one line and the run trains without tree scores."""
    if ep is None:
        return None
    check_task(ep, task)
    if not main:
        return None
    try:
        return TrainingTrees(ep, model)
    except MissingTreebankError as e:
        if ep.if_missing != "skip":
            raise
        named = str(ep.treebank).partition("-")[0] if ep.treebank in TREEBANK_NAMES else ""
        hint = HINTS.get(named, str(e).rpartition(":0: ")[2])     # (file:line: what)
        tell(f"train.eval_parse: treebank {ep.treebank} not found ({hint}); training without "
             f"tree scores")
        return None
