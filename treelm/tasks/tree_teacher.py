"""``train.tree_teacher``: a language model taught a teacher's trees beside its text.

Ensemble distillation (Shayegh et al., ICLR 2024) with the student's own parser: the language
model's loss gets a second term,

    L = L_LM + w · L_tree,

where ``L_tree`` (:mod:`treelm.syntax.tree_loss`) is the hinge that makes layer ``layer``'s
master-forget-gate levels cut each teacher tree where the teacher does, under the tree rule
``rule``. The teacher trees (one bracketed tree a line, as ``treelm teacher-trees`` and
``treelm ensemble`` write them) are read as ``parse`` reads sentences: each alone from the zero
state as ``<eos> w_1 … w_n`` (the closing ``<eos>`` cannot reach the levels of ``w_1 … w_n``),
in eval mode (no dropout: the levels ``parse`` will read), with gradients. A step takes the next
``batch_size`` sentences of one length, so that no padding enters the levels; the batches of an
epoch of the teacher file are shuffled by the run's seed, and the position is checkpoint state,
so that a resume goes on with the same batches.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from treelm.config import parse_section
from treelm.errors import ConfigError, TreelmError
from treelm.syntax.levels import NoMasterGatesError, onlstm_layers
from treelm.syntax.tree_loss import batch_targets, tree_hinge, tree_targets
from treelm.syntax.trees import TREE_STYLES, read_bracket_tree, tree_leaves
from treelm.text.vocab import Vocab


@dataclass
class TreeTeacher:
    """``train.tree_teacher``: the teacher's trees and how much they weigh."""

    trees: str = ""                  # the teacher's tree file: one bracketed tree a line
    layer: int = 2                   # the ON-LSTM layer (1-based) whose levels learn the trees
    weight: float = 1.0              # w: the tree loss's weight beside the LM loss (0: logged
                                     # only, no gradient)
    rule: str = "official"           # official | split: the tree rule the levels are read by
    margin: float = 0.05             # m: a cut stands this far above its span (levels in [0, 1])
    batch_size: int = 16             # teacher sentences per step (of one length)
    min_words: int = 3               # shorter sentences have one tree: nothing to learn

    RULES: ClassVar[dict[str, Any]] = {"layer": ">= 1", "weight": ">= 0",
                                       "rule": TREE_STYLES, "margin": "> 0",
                                       "batch_size": ">= 1", "min_words": ">= 3"}

    @classmethod
    def parse(cls, d: Any) -> TreeTeacher | None:
        if d is None or isinstance(d, TreeTeacher):
            return d
        tt = parse_section(cls, d, "train.tree_teacher")
        if not tt.trees:
            raise ConfigError("train.tree_teacher.trees: give the teacher's tree file "
                              "(treelm teacher-trees writes one)")
        return tt


def read_teacher(path: str, vocab: Vocab) -> list[tuple[list[int], Any]]:
    """Every tree of ``path`` as (ids, tree): a word outside ``vocab`` (``<unk>`` is in it) is
    one error naming its line, since the trees must be over the run's own text."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise TreelmError(f"train.tree_teacher.trees: {path}: {e.strerror or e}") from None
    read = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            tree = read_bracket_tree(line)
        except TreelmError as e:
            raise TreelmError(f"{path}:{no}: {e}") from None
        words = [str(w) for w in tree_leaves(tree)]
        ids = []
        for k, w in enumerate(words, 1):
            if w not in vocab.stoi:
                raise TreelmError(f"{path}:{no}: word {k} {w!r} is not in this run's "
                                  "vocabulary: the teacher's trees must be over the run's text")
            ids.append(vocab.stoi[w])
        read.append((ids, tree))
    if not read:
        raise TreelmError(f"train.tree_teacher.trees: {path} holds no tree")
    return read


class TeacherStream:
    """The teacher's sentences in batches of one length, and the tree loss of one batch."""

    def __init__(self, options: TreeTeacher, vocab: Vocab, eos: int, seed: int,
                 device: torch.device) -> None:
        self.options, self.eos, self.device = options, eos, device
        read = read_teacher(options.trees, vocab)
        kept = [(ids, tree) for ids, tree in read if len(ids) >= options.min_words]
        if not kept:
            raise TreelmError(f"train.tree_teacher.trees: {options.trees} has no tree of "
                              f">= {options.min_words} words")
        self.ids = [ids for ids, _ in kept]
        self.targets = [tree_targets(tree, options.rule) for _, tree in kept]
        self.seed, self.epoch, self.index = seed, 0, 0
        self.batches = self._plan()

    def _plan(self) -> list[list[int]]:
        """This epoch's batches: each length's sentences shuffled and cut into batches, the
        batches shuffled (by the seed and the epoch alone)."""
        rng = random.Random(self.seed * 1_000_003 + self.epoch)
        by_len: dict[int, list[int]] = {}
        for i, ids in enumerate(self.ids):
            by_len.setdefault(len(ids), []).append(i)
        batches = []
        B = self.options.batch_size
        for n in sorted(by_len):
            group = by_len[n]
            rng.shuffle(group)
            batches += [group[lo:lo + B] for lo in range(0, len(group), B)]
        rng.shuffle(batches)
        return batches

    def next_batch(self) -> list[int]:
        if self.index >= len(self.batches):
            self.epoch, self.index = self.epoch + 1, 0
            self.batches = self._plan()
        batch = self.batches[self.index]
        self.index += 1
        return batch

    def loss(self, model: nn.Module, layer_row: int) -> Tensor:
        """The tree loss of the next batch: the model read in eval mode, with gradients."""
        batch = self.next_batch()
        n = len(self.ids[batch[0]])
        grid = torch.full((n + 1, len(batch)), self.eos, dtype=torch.long)
        for b, i in enumerate(batch):
            grid[1:, b] = torch.tensor(self.ids[i])
        was_training = model.training
        model.eval()
        try:
            out = model.features(grid.to(self.device), None)
        finally:
            model.train(was_training)
        levels = out.aux[layer_row]["df"][1:]                    # (n, B): w_1 … w_n
        cut, rival, node, nodes = batch_targets([self.targets[i] for i in batch], self.device)
        return tree_hinge(levels, cut, rival, node, nodes, self.options.margin)

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch, self.index = int(state["epoch"]), int(state["index"])
        self.batches = self._plan()


def check_teacher_layer(options: TreeTeacher, model: nn.Module) -> int:
    """The aux row of ``options.layer`` in ``model``; one line where the model has no ON-LSTM
    layer or lacks that one."""
    try:
        layers = onlstm_layers(model)
    except NoMasterGatesError:
        layers = ()
    if not layers:
        raise ConfigError("train.tree_teacher: this model has no ON-LSTM layers; the tree loss "
                          "reads master-gate levels (model.cell: onlstm)")
    if options.layer not in layers:
        raise ConfigError(f"train.tree_teacher.layer = {options.layer}: this model's ON-LSTM "
                          f"layers are {', '.join(map(str, layers))}")
    return options.layer - 1


__all__ = ["TeacherStream", "TreeTeacher", "check_teacher_layer", "read_teacher"]
