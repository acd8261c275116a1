"""Logical inference (Bowman, Manning & Potts 2015; ON-LSTM paper §6.3): which of seven relations
holds between two propositional formulas; trained on pairs with at most 6 operators, tested on
1 to 12.

Data: :mod:`treelm.data.logic` (generated, or read from Bowman's files); model:
:class:`treelm.models.pair.PairClassifier`.

Batches hold ``batch_size`` pairs: left (T₁, B) and right (T₂, B) symbol ids padded with <pad>,
their lengths (B,), and relation ids (B,). Each epoch the pairs are shuffled (the order is drawn
from the run's seed and the epoch number), cut into windows of ``BUCKET`` batches, sorted by
length inside a window (less padding: a batch of long and short formulas runs as long as its
longest) and cut into batches, whose order is shuffled again; the position (batches taken) is all
a resume needs. Under DDP each process takes every ``world``-th pair of the epoch's order, after
cutting the order to a multiple of ``world``, so that all take the same number of steps. All of
this is :class:`~treelm.tasks.examples.EpochIterator`'s; the task says only how pairs are sorted
(by the longer formula) and collated.

Loss per batch, the mean cross-entropy per pair:

    L = −(1/B) Σ_b log p(r_b | φ_b, ψ_b)

Evaluation: accuracy in % (primary, higher is better), the mean cross-entropy ``loss``, accuracy
per operator count ``acc_ops<n>`` (the pair's larger count; longer than ``data.max_test_ops``
counts as that) and, where the split has them, ``acc_long``: the accuracy on pairs with more
operators than any training pair (``data.max_train_ops``), the generalisation the task is about.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from treelm.data.logic import LogicData, data_files, load_split, read_split
from treelm.data.logic_formulas import RELATIONS, TOKENS, Pair
from treelm.progress import Ticker
from treelm.rundir.files import RunFiles
from treelm.tasks.base import Batch, Evaluation, LossOut, RunConfig, TaskOptions
from treelm.tasks.examples import EpochIterator, ExampleTask, eval_mode, pad_ids
from treelm.text.vocab import PAD, Vocab

BUCKET = 32            # batches per window sorted by length
Row = tuple[list[int], list[int], int, int]      # left ids, right ids, relation id, operators


@dataclass
class LogicOptions(TaskOptions):
    batch_size: int = 128            # pairs per training batch
    eval_batch_size: int = 512       # pairs per batch when evaluating

    RULES: ClassVar[dict[str, Any]] = {"batch_size": ">= 1", "eval_batch_size": ">= 1"}


def symbol_vocab() -> Vocab:
    return Vocab([PAD, *TOKENS], (PAD,))


def relation_vocab() -> Vocab:
    return Vocab(list(RELATIONS), ())


class LogicTask(ExampleTask):
    name = "logic"
    Options = LogicOptions
    DATA = LogicData
    DATA_FORMAT = ("a file of relation<TAB>formula<TAB>formula lines (Bowman's format), or a "
                   "directory of his test0 … test12 files")
    options: LogicOptions
    spec: LogicData
    _splits: dict[str, list[Pair]]
    _encoded: dict[str, list[Row]]

    def __init__(self, config: RunConfig, symbols: Vocab, relations: Vocab,
                 device: torch.device, rank: int = 0, world: int = 1) -> None:
        super().__init__(config, device, rank, world)
        self.symbols, self.relations = symbols, relations

    # -------------------------------------------------------------- construction
    @classmethod
    def create(cls, config: RunConfig, device: torch.device, rank: int = 0,
               world: int = 1) -> LogicTask:
        return cls(config, symbol_vocab(), relation_vocab(), device, rank, world).read_all()

    @classmethod
    def open(cls, config: RunConfig, files: RunFiles, device: torch.device, rank: int = 0,
             world: int = 1, with_data: bool = False) -> LogicTask:
        return cls(config, files.read_vocab("symbols"), files.read_vocab("relations"), device,
                   rank, world).opened(with_data)

    def save(self, files: RunFiles) -> None:
        files.write_vocab(self.symbols, "symbols")
        files.write_vocab(self.relations, "relations")

    def model_dims(self) -> dict[str, Any]:
        return {"vocab_size": len(self.symbols), "n_classes": len(self.relations),
                "pad_id": self.symbols.pad}

    def data_files(self) -> list[str]:
        return data_files(self.spec)

    def describe(self) -> str:
        n = {s: len(self.split(s)) for s in ("train", "valid")}
        ops = [p.ops for p in self.split("train")]
        return (f"{n['train']:,} training pairs ({min(ops)}–{max(ops)} operators), "
                f"{n['valid']:,} valid, {len(self.relations)} relations")

    def read_split(self, name: str) -> list[Pair]:
        return load_split(self.spec, name)

    # -------------------------------------------------------------- batches
    def encoded(self, name: str) -> list[Row]:
        """Symbol and relation ids of a split's pairs and the operator count they score under,
        made once."""
        if name not in self._encoded:
            enc, rel = self.symbols.encode, self.relations.stoi
            self._encoded[name] = [(enc(p.left, unk="error", what="symbol"),
                                    enc(p.right, unk="error", what="symbol"),
                                    rel[p.relation], self.spec.ops_bucket(p.ops))
                                   for p in self.split(name)]
        return self._encoded[name]

    def _batch(self, rows: Sequence[Row]) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """left (T₁, B), left lengths (B,), right (T₂, B), right lengths (B,), relations (B,)."""
        left, llen = pad_ids([r[0] for r in rows], self.symbols.pad)
        right, rlen = pad_ids([r[1] for r in rows], self.symbols.pad)
        return left, llen, right, rlen, torch.tensor([r[2] for r in rows])

    def make_epochs(self) -> EpochIterator:
        rows, bs = self.encoded("train"), self.options.batch_size
        return EpochIterator(len(rows), self.seed, self.rank, self.world, batch_size=bs,
                             keys=[max(len(r[0]), len(r[1])) for r in rows],
                             window=bs * BUCKET)

    def batch_order(self) -> list[list[int]]:
        """This process's batches of pair indices for the current epoch, in order."""
        return self.epochs.plan()

    def collate(self, indices: list[int]) -> tuple[Tensor, ...]:
        rows = self.encoded("train")
        return tuple(t.to(self.device) for t in self._batch([rows[i] for i in indices]))

    def loss(self, model: nn.Module, batch: Batch) -> LossOut:
        left, llen, right, rlen, rel = batch.data
        ce = F.cross_entropy(model(left, llen, right, rlen), rel)
        return LossOut(ce, ce)

    # -------------------------------------------------------------- prediction and scores
    @torch.no_grad()
    def predict(self, model: nn.Module, rows: Sequence[Row], bs: int) -> tuple[list[int], float]:
        """The best relation id of every row, in batches of similar length, and the summed
        cross-entropy."""
        best = [0] * len(rows)
        total = 0.0
        order = sorted(range(len(rows)), key=lambda i: max(len(rows[i][0]), len(rows[i][1])))
        with eval_mode(model), Ticker("classifying", len(rows), "pairs") as tick:
            for lo in range(0, len(order), bs):
                idx = order[lo:lo + bs]
                left, llen, right, rlen, rel = (t.to(self.device)
                                                for t in self._batch([rows[i] for i in idx]))
                logits = model(left, llen, right, rlen)
                total += F.cross_entropy(logits, rel, reduction="sum").item()
                for i, y in zip(idx, logits.argmax(-1).tolist(), strict=True):
                    best[i] = y
                tick.update(len(idx))
        return best, total

    def evaluate(self, model: nn.Module, split: str = "valid",
                 batch_size: int | None = None) -> Evaluation:
        rows = self.encoded(split)
        best, total = self.predict(model, rows, batch_size or self.options.eval_batch_size)
        hits: dict[int, list[int]] = {}
        for r, y in zip(rows, best, strict=True):
            hits.setdefault(r[3], []).append(int(r[2] == y))
        right = sum(sum(h) for h in hits.values())
        scores = {"accuracy": 100.0 * right / len(rows), "loss": total / len(rows)}
        for n in sorted(hits):
            scores[f"acc_ops{n}"] = 100.0 * sum(hits[n]) / len(hits[n])
        long = [h for n, hs in hits.items() if n > self.spec.max_train_ops for h in hs]
        if long:
            scores["acc_long"] = 100.0 * sum(long) / len(long)
        return Evaluation(scores, "accuracy", higher_is_better=True, size=len(rows),
                          unit="pairs")

    def evaluate_file(self, model: nn.Module, path: str, batch_size: int | None = None,
                      **options: Any) -> Evaluation:
        """The pairs at ``path`` (Bowman's format: a file, or a directory of ``test<n>`` files)
        scored as the test split is (each pair's relation checked as it is read)."""
        pairs = read_split(path, "test", self.spec.max_test_ops)
        return self.evaluate(model, self.file_split(path, pairs), batch_size)
