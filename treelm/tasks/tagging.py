"""Slot filling: one IOB label per word (and optionally one intent per utterance).

Data and checks: :mod:`treelm.data.tagging`; model: :class:`treelm.models.tagger.Tagger`.

Batches hold ``batch_size`` utterances, shuffled anew each epoch (the order is drawn from the
run's seed and the epoch number by :class:`~treelm.tasks.examples.EpochIterator`, so the position
in it is all a resume needs), padded to the longest: words (T, B) with <pad>, lengths (B,), tags
(T, B) with −100 at padding, intents (B,).
Under DDP each process takes every ``world``-th utterance of the epoch's order.

Loss per batch, a mean per word plus a mean per utterance:

    L = −(1/N) Σ_{b,t} log p(tag_{b,t} | words_b)  +  λ · −(1/B) Σ_b log p(intent_b | words_b)

with ``λ = intent_weight`` when the model has an intent head. Evaluation tags every utterance by
the highest-scoring label of each word and scores chunks as conlleval does
(:mod:`treelm.tasks.conlleval`): precision, recall, F1 (primary, higher is better), plus intent
accuracy. Gold tags are compared as strings, so with ``data.unknown_labels: score`` a gold label
the training data never showed still counts (as a chunk the model cannot find).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from treelm.data.tagging import (
    SPLITS,
    TaggingData,
    Utterance,
    check_labels,
    normalise,
    read_split,
    split_files,
)
from treelm.progress import Ticker
from treelm.rundir.files import RunFiles
from treelm.tasks.base import Batch, Evaluation, LossOut, RunConfig, TaskOptions
from treelm.tasks.conlleval import chunk_scores
from treelm.tasks.examples import EpochIterator, ExampleTask, eval_mode, pad_ids
from treelm.text.vocab import PAD, UNK, Vocab

IGNORE = -100
Row = tuple[list[int], list[int], int]      # word ids, tag ids, intent id of one utterance


@dataclass
class TaggingOptions(TaskOptions):
    batch_size: int = 16             # utterances per training batch
    eval_batch_size: int = 128       # utterances per batch when evaluating or tagging
    intent_weight: float = 1.0       # λ: weight of the intent loss (models with an intent head)

    RULES: ClassVar[dict[str, Any]] = {
        "batch_size": ">= 1", "eval_batch_size": ">= 1", "intent_weight": ">= 0"}


@dataclass
class Tagged:
    words: list[str]
    tags: list[str]
    intent: str | None


class TaggingTask(ExampleTask):
    name = "tagging"
    Options = TaggingOptions
    DATA = TaggingData
    DATA_FORMAT = "a directory with seq.in / seq.out [/ label], or a CoNLL file"
    options: TaggingOptions
    spec: TaggingData
    _splits: dict[str, list[Utterance]]
    _encoded: dict[str, list[Row]]

    def __init__(self, config: RunConfig, words: Vocab, labels: Vocab, intents: Vocab | None,
                 device: torch.device, train: list[Utterance] | None = None, rank: int = 0,
                 world: int = 1) -> None:
        super().__init__(config, device, rank, world, train)
        self.words, self.labels, self.intents = words, labels, intents

    # -------------------------------------------------------------- construction
    @classmethod
    def create(cls, config: RunConfig, device: torch.device, rank: int = 0,
               world: int = 1) -> TaggingTask:
        spec: TaggingData = config.data
        train = read_split(spec.train, spec.lowercase)          # type: ignore[arg-type]
        words = Vocab.build((u.words for u in train), (PAD, UNK), spec.min_count)
        labels = Vocab.build((u.tags for u in train), ())
        names = [u.intent for u in train if u.intent is not None]
        intents = Vocab.build([names], ()) if names else None
        return cls(config, words, labels, intents, device, train, rank, world).read_all()

    @classmethod
    def open(cls, config: RunConfig, files: RunFiles, device: torch.device, rank: int = 0,
             world: int = 1, with_data: bool = False) -> TaggingTask:
        words, labels = files.read_vocab("words"), files.read_vocab("labels")
        intents = files.read_vocab("intents") if files.vocab_path("intents").exists() else None
        return cls(config, words, labels, intents, device, None, rank, world).opened(with_data)

    def save(self, files: RunFiles) -> None:
        files.write_vocab(self.words, "words")
        files.write_vocab(self.labels, "labels")
        if self.intents is not None:
            files.write_vocab(self.intents, "intents")

    def model_dims(self) -> dict[str, Any]:
        return {"vocab_size": len(self.words), "n_labels": len(self.labels),
                "pad_id": self.words.pad, "n_intents": len(self.intents or ())}

    def data_files(self) -> list[str]:
        return [str(f) for k in SPLITS for f in split_files(getattr(self.spec, k))]

    def describe(self) -> str:
        train = self.split("train")
        return (f"{len(train):,} training utterances ({sum(len(u.words) for u in train):,} "
                f"words), {len(self.words):,} word types, {len(self.labels)} labels"
                + (f", {len(self.intents)} intents" if self.intents else ""))

    def read_split(self, name: str) -> list[Utterance]:
        """The utterances of a split; valid/test labels checked against training's."""
        utts = read_split(getattr(self.spec, name), self.spec.lowercase)
        if name != "train" and self.spec.unknown_labels == "error":
            check_labels(utts, set(self.labels.itos), str(getattr(self.spec, name)))
        return utts

    # -------------------------------------------------------------- batches
    def encoded(self, name: str) -> list[Row]:
        """Word, tag and intent ids of a split's utterances, made once (a tag unseen in training
        and a missing intent are IGNORE)."""
        if name not in self._encoded:
            known, intents = self.labels.stoi, self.intents.stoi if self.intents else {}
            self._encoded[name] = [(self.words.encode(u.words, what="word"),
                                    [known.get(t, IGNORE) for t in u.tags],
                                    intents.get(u.intent or "", IGNORE))
                                   for u in self.split(name)]
        return self._encoded[name]

    def _batch(self, rows: Sequence[Row]) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """words (T, B), lengths (B,), tags (T, B), intents (B,) or None."""
        words, lengths = pad_ids([r[0] for r in rows], self.words.pad)
        tags, _ = pad_ids([r[1] for r in rows], IGNORE)
        intents = torch.tensor([r[2] for r in rows]) if self.intents is not None else None
        return words, lengths, tags, intents

    def make_epochs(self) -> EpochIterator:
        """``batch_size`` utterances of the shuffled order at a time, in that order (no sorting:
        utterances are short); a batch counts its words."""
        train = self.split("train")
        return EpochIterator(len(train), self.seed, self.rank, self.world,
                             batch_size=self.options.batch_size, shuffle_batches=False,
                             units=[len(u.words) for u in train])

    def collate(self, indices: list[int]) -> tuple[Tensor | None, ...]:
        rows = self.encoded("train")
        return tuple(t if t is None else t.to(self.device)
                     for t in self._batch([rows[i] for i in indices]))

    def loss(self, model: nn.Module, batch: Batch) -> LossOut:
        words, lengths, tags, intents = batch.data
        out = model(words, lengths)
        ce = F.cross_entropy(out.scores.reshape(-1, out.scores.size(-1)), tags.reshape(-1),
                             ignore_index=IGNORE)
        loss = ce
        if out.intent is not None and intents is not None and self.options.intent_weight:
            loss = loss + self.options.intent_weight * F.cross_entropy(
                out.intent, intents, ignore_index=IGNORE)
        return LossOut(loss, ce)

    # -------------------------------------------------------------- prediction and scores
    @torch.no_grad()
    def _predict(self, model: nn.Module, rows: Sequence[Row], bs: int
                 ) -> tuple[list[list[int]], list[int | None], float, int]:
        """One pass over ``rows`` in batches of similar length: the best label ids and intent id
        of each row, and the summed cross-entropy over the words whose gold label is known
        (with the number of such words)."""
        labels: list[list[int]] = [[] for _ in rows]
        intents: list[int | None] = [None] * len(rows)
        total, count = 0.0, 0
        order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
        with eval_mode(model), Ticker("tagging", len(rows), "utterances") as tick:
            for lo in range(0, len(order), bs):
                idx = order[lo:lo + bs]
                words, lengths, tags, _ = self._batch([rows[i] for i in idx])
                res = model(words.to(self.device), lengths)
                tags = tags.to(self.device)
                total += F.cross_entropy(res.scores.reshape(-1, res.scores.size(-1)),
                                         tags.reshape(-1), ignore_index=IGNORE,
                                         reduction="sum").item()
                count += int((tags != IGNORE).sum())
                best = res.scores.argmax(-1).cpu()                          # (T, B)
                for b, i in enumerate(idx):
                    labels[i] = best[: int(lengths[b]), b].tolist()
                    if res.intent is not None:
                        intents[i] = int(res.intent[b].argmax())
                tick.update(len(idx))
        return labels, intents, total, count

    def _tagged(self, words: Sequence[str], labels: list[int], intent: int | None) -> Tagged:
        name = self.intents.itos[intent] if intent is not None and self.intents else None
        return Tagged(list(words), self.labels.decode(labels), name)

    def unknown_words(self, words: Sequence[str]) -> list[str]:
        """The words of an utterance that the run's vocabulary does not hold (as the model
        reads them: lower-cased with ``data.lowercase``), read as ``<unk>`` by :meth:`tag`."""
        read = normalise(list(words), self.spec.lowercase)
        return [words[i] for i in self.words.unknown(read)]

    def tag(self, model: nn.Module, utterances: Sequence[Sequence[str]],
            batch_size: int | None = None) -> list[Tagged]:
        """The most likely label of every word (and the intent) of each utterance."""
        rows: list[Row] = []
        for u in utterances:
            ids = self.words.encode(normalise(list(u), self.spec.lowercase), what="word")
            rows.append((ids, [IGNORE] * len(ids), IGNORE))
        labels, intents, _, _ = self._predict(model, rows,
                                              batch_size or self.options.eval_batch_size)
        return [self._tagged(*x) for x in zip(utterances, labels, intents, strict=True)]

    def evaluate(self, model: nn.Module, split: str = "valid",
                 batch_size: int | None = None) -> Evaluation:
        utts = self.split(split)
        labels, intents, total, count = self._predict(
            model, self.encoded(split), batch_size or self.options.eval_batch_size)
        tagged = [self._tagged(u.words, lab, i)
                  for u, lab, i in zip(utts, labels, intents, strict=True)]
        chunk = chunk_scores([u.tags for u in utts], [t.tags for t in tagged])
        scores = {"f1": chunk["f1"], "precision": chunk["precision"], "recall": chunk["recall"]}
        gold_intents = [u.intent for u in utts]
        if (self.intents is not None and all(i is not None for i in gold_intents)
                and all(t.intent is not None for t in tagged)):   # a model with an intent output
            hits = sum(t.intent == g for t, g in zip(tagged, gold_intents, strict=True))
            scores["intent_accuracy"] = 100.0 * hits / len(utts)
        scores["loss"] = total / count if count else math.nan
        return Evaluation(scores, "f1", higher_is_better=True,
                          size=sum(len(u.words) for u in utts), unit="words")

    def evaluate_file(self, model: nn.Module, path: str, batch_size: int | None = None,
                      **options: Any) -> Evaluation:
        """The utterances at ``path`` (a ``seq.in``/``seq.out``/``label`` directory or a CoNLL
        file) scored as a split is. Another data set may use labels the run never saw: they
        stay gold (chunks the model cannot find) and are counted (``unknown_labels``)."""
        utts = read_split(path, self.spec.lowercase)
        ev = self.evaluate(model, self.file_split(path, utts), batch_size)
        ev.details["unknown_labels"] = sum(t not in self.labels.stoi for u in utts
                                           for t in u.tags)
        return ev

    # -------------------------------------------------------------- checkpoint state
    def state_dict(self) -> dict[str, Any]:
        return {**self.epochs.state_dict(), "pos_counts": "batches"}

    def load_state_dict(self, state: dict[str, Any], same_shards: bool = True) -> None:
        """The position; a checkpoint written before the shared iterator counted utterances
        (always whole batches of ``batch_size``, the epoch's last one possibly short)."""
        if state.get("pos_counts") != "batches":
            bs = self.options.batch_size
            state = {**state, "pos": -(-int(state["pos"]) // bs)}
        self.epochs.load_state_dict(state, same_shards)
