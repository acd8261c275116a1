"""ListOps (Nangia & Bowman 2018): the value (0–9) of a nested expression of list operations
written in prefix form, ``[MAX 2 [MIN 4 7 ] 0 ]`` → 4; a model must compose along a tree it is
never shown.

Data: :mod:`treelm.data.listops` (generated, or the original TSV files); model: any classifier of
one sequence, :class:`treelm.models.classifier.SequenceClassifier` with any cell of
``model.cell``. Symbols are the 15 tokens (4 operators, ``]``, 10 digits) after ``<pad>``; the
class of an expression is its value.

Batches hold ``batch_size`` expressions: tokens (T, B) padded with <pad>, lengths (B,) and values
(B,), planned by :class:`~treelm.tasks.examples.EpochIterator` (shuffled from the run's seed and
the epoch, sorted by length within windows of ``BUCKET`` batches, batches shuffled; DDP shares in
lockstep; the position is all a resume needs). Loss, the mean cross-entropy per expression:

    L = −(1/B) Σ_b log p(value_b | expression_b)

Evaluation: accuracy in % (primary, higher is better), the mean cross-entropy ``loss`` and the
accuracy per expression depth ``acc_depth<d>`` (the nesting of operators; where the test split is
deeper than training, ``acc_deeper`` for the depths beyond ``data.max_depth`` together).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from treelm.data.listops import (
    TOKENS,
    Example,
    ListOpsData,
    data_files,
    load_split,
    read_examples,
)
from treelm.rundir.files import RunFiles
from treelm.tasks.base import Batch, Evaluation, LossOut, RunConfig, TaskOptions
from treelm.tasks.examples import EpochIterator, ExampleTask, eval_mode, pad_ids
from treelm.text.vocab import PAD, Vocab

BUCKET = 32            # batches per window sorted by length


@dataclass
class ListOpsOptions(TaskOptions):
    batch_size: int = 128            # expressions per training batch
    eval_batch_size: int = 512       # expressions per batch when evaluating

    RULES: ClassVar[dict[str, Any]] = {"batch_size": ">= 1", "eval_batch_size": ">= 1"}


class ListOpsTask(ExampleTask):
    name = "listops"
    Options = ListOpsOptions
    DATA = ListOpsData
    DATA_FORMAT = "a file of label<TAB>expression lines (the original ListOps TSV)"
    options: ListOpsOptions
    spec: ListOpsData

    def __init__(self, config: RunConfig, symbols: Vocab, device: torch.device, rank: int = 0,
                 world: int = 1) -> None:
        super().__init__(config, device, rank, world)
        self.symbols = symbols

    @classmethod
    def create(cls, config: RunConfig, device: torch.device, rank: int = 0,
               world: int = 1) -> ListOpsTask:
        return cls(config, Vocab([PAD, *TOKENS], (PAD,)), device, rank, world).read_all()

    @classmethod
    def open(cls, config: RunConfig, files: RunFiles, device: torch.device, rank: int = 0,
             world: int = 1, with_data: bool = False) -> ListOpsTask:
        return cls(config, files.read_vocab("symbols"), device, rank, world).opened(with_data)

    def save(self, files: RunFiles) -> None:
        files.write_vocab(self.symbols, "symbols")

    def model_dims(self) -> dict[str, Any]:
        return {"vocab_size": len(self.symbols), "n_classes": 10, "pad_id": self.symbols.pad}

    def data_files(self) -> list[str]:
        return data_files(self.spec)

    def describe(self) -> str:
        train = self.split("train")
        return (f"{len(train):,} training expressions (depth {min(x.depth for x in train)}–"
                f"{max(x.depth for x in train)}, {sum(len(x.tokens) for x in train):,} "
                f"symbols), {len(self.split('valid')):,} valid")

    def read_split(self, name: str) -> list[Example]:
        return load_split(self.spec, name)

    def ids(self, name: str) -> list[list[int]]:
        if name not in self._encoded:
            enc = self.symbols.encode
            self._encoded[name] = [enc(x.tokens, unk="error", what="symbol")
                                   for x in self.split(name)]
        return self._encoded[name]

    # -------------------------------------------------------------- batches and loss
    def _tensors(self, name: str, idx: list[int]) -> tuple[Tensor, Tensor, Tensor]:
        """tokens (T, B), lengths (B,), values (B,) of examples ``idx``, on the device."""
        ids, xs = self.ids(name), self.split(name)
        tokens, lengths = pad_ids([ids[i] for i in idx], self.symbols.pad)
        labels = torch.tensor([xs[i].label for i in idx])
        return tokens.to(self.device), lengths.to(self.device), labels.to(self.device)

    def make_epochs(self) -> EpochIterator:
        bs = self.options.batch_size
        return EpochIterator(len(self.ids("train")), self.seed, self.rank, self.world,
                             batch_size=bs, keys=[len(r) for r in self.ids("train")],
                             window=bs * BUCKET)

    def collate(self, indices: list[int]) -> tuple[Tensor, Tensor, Tensor]:
        return self._tensors("train", indices)

    def loss(self, model: nn.Module, batch: Batch) -> LossOut:
        tokens, lengths, labels = batch.data
        ce = F.cross_entropy(model(tokens, lengths).float(), labels)
        return LossOut(ce, ce)

    # -------------------------------------------------------------- scores
    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str = "valid",
                 batch_size: int | None = None) -> Evaluation:
        xs, bs = self.split(split), batch_size or self.options.eval_batch_size
        order = sorted(range(len(xs)), key=lambda i: len(xs[i].tokens))
        hits: dict[int, list[int]] = {}
        total = 0.0
        with eval_mode(model):
            for lo in range(0, len(order), bs):
                idx = order[lo:lo + bs]
                tokens, lengths, labels = self._tensors(split, idx)
                logits = model(tokens, lengths).float()
                total += F.cross_entropy(logits, labels, reduction="sum").item()
                for i, y in zip(idx, logits.argmax(-1).tolist(), strict=True):
                    hits.setdefault(xs[i].depth, []).append(int(y == xs[i].label))
        scores = {"accuracy": 100.0 * sum(map(sum, hits.values())) / len(xs),
                  "loss": total / len(xs)}
        for d in sorted(hits):
            scores[f"acc_depth{d}"] = 100.0 * sum(hits[d]) / len(hits[d])
        deeper = [h for d, hs in hits.items() if d > self.spec.max_depth for h in hs]
        if deeper and self.spec.source == "generate":
            scores["acc_deeper"] = 100.0 * sum(deeper) / len(deeper)
        return Evaluation(scores, "accuracy", higher_is_better=True, size=len(xs),
                          unit="expressions")

    def evaluate_file(self, model: nn.Module, path: str, batch_size: int | None = None,
                      **options: Any) -> Evaluation:
        """The examples at ``path`` (the original TSV, labels checked as they are read), scored
        as a split is."""
        return self.evaluate(model, self.file_split(path, read_examples(path)), batch_size)
