"""One resumable epoch iterator for tasks whose training data is a list of examples
(classification, tagging, translation), and the two helpers every such task needs: padding and a
model switched to evaluation mode.

**An epoch's plan.** With ``N`` examples, a seed ``s`` and the epoch number ``e`` (epochs begun
before this one), an epoch is drawn from one generator, ``random.Random(s · 1 000 003 + e)``:

1. ``order``: the indices ``0 … N−1`` shuffled;
2. ``order`` cut into *windows* of ``window`` examples (0: one window), each window sorted by the
   examples' keys (a stable sort, so ties keep the shuffled order: less padding, since a batch runs
   as long as its longest example) — or left as shuffled when no keys are given;
3. each window cut into batches, either of ``batch_size`` examples, or greedily under a budget of
   ``max_tokens`` padded tokens: ``n · max(length) ≤ max_tokens`` (an example longer than the
   budget is a batch of its own);
4. the batches shuffled again (``shuffle_batches``), so that lengths do not come in runs.

The plan is a function of ``(s, e)`` and the data alone, so the *position* (batches taken) is all a
resume needs: ``state_dict() = {"epoch": e, "pos": p}``. This is fairseq's epoch iterator in
miniature: the seeded order and the position live in one object that tasks share.

**DDP in lockstep.** Under ``world`` processes every rank must take the same number of optimiser
steps, or the collective operations of a step wait for ever. With batches of ``batch_size``
examples each rank takes every ``world``-th example of the shuffled order, cut to a multiple of
``world`` first (step 1½, before windows): equal shares of examples make equal numbers of batches.
With a token budget equal shares do not: the whole epoch is planned identically on every rank,
the list of batches cut to a multiple of ``world``, and each rank takes every ``world``-th batch.
Either way a rank's number of batches is the same on all ranks. When the number of processes
changes, a resume restarts the epoch (the shares changed).

``progress()`` counts *units* (what ``Batch.size`` counts: examples, words or target symbols; one
per example unless the task gives its own), done and in the epoch, on this rank.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import accumulate
from typing import Any, Self

import torch
from torch import Tensor, nn

from treelm.data.batching import cut_batches
from treelm.tasks.base import Batch, RunConfig, Task

__all__ = ["EpochIterator", "ExampleTask", "cut_batches", "eval_mode", "pad_ids"]

SEED_STRIDE = 1_000_003      # epoch e of seed s draws from Random(s · SEED_STRIDE + e)
SPLITS = ("train", "valid", "test")


def pad_ids(rows: Sequence[Sequence[int]], pad: int, batch_first: bool = False
            ) -> tuple[Tensor, Tensor]:
    """Ragged id lists -> padded ids, (T, B) (or (B, T) with ``batch_first``), ``pad`` after each
    row's end, and the lengths (B,)."""
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
    out = torch.full((len(rows), int(lengths.max()) if len(rows) else 0), pad, dtype=torch.long)
    for b, r in enumerate(rows):
        out[b, : len(r)] = torch.as_tensor(r, dtype=torch.long)
    return (out if batch_first else out.t().contiguous()), lengths


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """``model`` in evaluation mode (dropout off) inside the block, and back in the mode it was
    in afterwards, also when the block raises."""
    was = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was)


class EpochIterator:
    """The batches of a training split, epoch after epoch, with a resumable position (module
    docstring). ``n``: examples; ``keys``: sort key per example (None: no sorting); ``lengths``:
    padded length per example (token budgets); ``units``: units per example (default 1)."""

    def __init__(self, n: int, seed: int, rank: int = 0, world: int = 1, *,
                 batch_size: int | None = None, max_tokens: int | None = None,
                 keys: Sequence[Any] | None = None, lengths: Sequence[int] | None = None,
                 units: Sequence[int] | None = None, window: int = 0,
                 shuffle_batches: bool = True) -> None:
        if (batch_size is None) == (max_tokens is None):
            raise ValueError("give exactly one of batch_size and max_tokens")
        self.n, self.seed, self.rank, self.world = n, seed, rank, world
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.keys, self.lengths, self.units = keys, lengths, units
        self.window, self.shuffle_batches = window, shuffle_batches
        self.epoch, self.pos = 0, 0             # epochs begun before this one; next batch
        self._plan: list[list[int]] | None = None
        self._done: list[int] = []              # units in the first k batches, k = 0 … len

    def plan(self) -> list[list[int]]:
        """This rank's batches of example indices for the current epoch, in order."""
        if self._plan is None:
            rng = random.Random(self.seed * SEED_STRIDE + self.epoch)
            order = list(range(self.n))
            rng.shuffle(order)
            by_examples = self.batch_size is not None
            if by_examples:        # equal shares of examples: equal numbers of batches
                order = order[: len(order) // self.world * self.world][self.rank::self.world]
            batches = cut_batches(order, batch_size=self.batch_size, max_tokens=self.max_tokens,
                                  lengths=self.lengths, keys=self.keys, window=self.window)
            if self.shuffle_batches:
                rng.shuffle(batches)
            if not by_examples:    # one plan on every rank; equal shares of batches
                batches = batches[: len(batches) // self.world * self.world][self.rank::self.world]
            self._plan = batches
            u = self.units
            self._done = [0, *accumulate(len(b) if u is None else sum(u[i] for i in b)
                                         for b in batches)]
        return self._plan

    def batches(self, collate: Callable[[list[int]], Any]) -> Iterator[Batch]:
        """The rest of the epoch: ``Batch(collate(indices), units, last)``; the position moves
        as each batch is taken."""
        plan = self.plan()
        while self.pos < len(plan):
            idx = plan[self.pos]
            self.pos += 1
            yield Batch(collate(idx), self._done[self.pos] - self._done[self.pos - 1],
                        last=self.pos >= len(plan))

    def progress(self) -> tuple[int, int]:
        """(units done, units in the epoch) on this rank."""
        self.plan()
        return self._done[self.pos], self._done[-1]

    def new_epoch(self) -> None:
        self.epoch, self.pos, self._plan = self.epoch + 1, 0, None

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, state: dict[str, Any], same_shards: bool = True) -> None:
        """Restore the position; with another number of processes the epoch restarts."""
        self.epoch, self._plan = int(state["epoch"]), None
        self.pos = int(state["pos"]) if same_shards else 0


class ExampleTask(Task):
    """A task whose training batches come from one :class:`EpochIterator`: it says how its
    epoch is planned (``make_epochs``, called once, when the training data is first needed) and
    how a batch of example indices becomes tensors (``collate``); batching, progress and the
    checkpoint state are the iterator's.

    The splits are the base's too: ``spec`` is the parsed ``data:`` section (``DATA``), a split
    is read once by the task's ``read_split`` and kept (``split``), its ids are the task's
    business but kept per split in ``_encoded``; a data file that ``evaluate_file`` reads is
    one more split, named ``file:<path>`` (``file_split``)."""

    _epochs: EpochIterator | None = None

    def __init__(self, config: RunConfig, device: torch.device, rank: int = 0, world: int = 1,
                 train: Any = None) -> None:
        """``train``: the training split when ``create`` has read it already (to build the
        symbol tables)."""
        super().__init__(config)
        self.spec = config.data
        self.device, self.seed, self.rank, self.world = device, config.seed, rank, world
        self._splits: dict[str, Any] = {}
        self._encoded: dict[str, Any] = {}
        if train is not None:
            self._splits["train"] = train

    # -------------------------------------------------------------- splits
    def read_split(self, name: str) -> Any:
        """The examples of split ``name``, read or generated (called once a split)."""
        raise NotImplementedError

    def split(self, name: str) -> Any:
        """The examples of a split, read once."""
        if name not in self._splits:
            self._splits[name] = self.read_split(name)
        return self._splits[name]

    def read_all(self) -> Self:
        """Every split read, for ``create``: bad data fails now, not after an epoch."""
        for name in SPLITS:
            self.split(name)
        return self

    def opened(self, with_data: bool) -> Self:
        """The task as ``open`` returns it: with its training split read for a resume."""
        if with_data:
            self.split("train")
        return self

    def file_split(self, path: str, examples: Any) -> str:
        """The examples read from ``path`` as one more split (ids made anew); its name."""
        key = f"file:{path}"
        self._splits[key] = examples
        self._encoded.pop(key, None)
        return key

    def make_epochs(self) -> EpochIterator:
        raise NotImplementedError

    def collate(self, indices: list[int]) -> Any:
        """The model's inputs and targets for the training examples ``indices``, on the task's
        device."""
        raise NotImplementedError

    @property
    def epochs(self) -> EpochIterator:
        if self._epochs is None:
            self._epochs = self.make_epochs()
        return self._epochs

    def batches(self) -> Iterator[Batch]:
        return self.epochs.batches(self.collate)

    def progress(self) -> tuple[int, int]:
        return self.epochs.progress()

    def new_epoch(self) -> None:
        self.epochs.new_epoch()

    def state_dict(self) -> dict[str, Any]:
        return self.epochs.state_dict()

    def load_state_dict(self, state: dict[str, Any], same_shards: bool = True) -> None:
        self.epochs.load_state_dict(state, same_shards)
