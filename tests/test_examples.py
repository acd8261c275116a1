"""The epoch iterator of example-based tasks (``treelm.tasks.examples``): every example once per
epoch, the seeded order, windows sorted by length, token budgets, DDP shares in lockstep, resume
from a position; the padding helper and ``eval_mode``."""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn

from treelm.data.parallel import token_batches
from treelm.tasks.examples import EpochIterator, cut_batches, eval_mode, pad_ids


def _data(n: int = 203, seed: int = 0) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    return [rng.randint(1, 30) for _ in range(n)], [rng.randint(1, 30) for _ in range(n)]


def _flat(batches: list[list[int]]) -> list[int]:
    return [i for b in batches for i in b]


# ----------------------------------------------------------------------------- helpers


def test_pad_ids_time_major_and_batch_first():
    rows = [[5, 6, 7], [8], [9, 10]]
    ids, lengths = pad_ids(rows, 0)
    assert ids.tolist() == [[5, 8, 9], [6, 0, 10], [7, 0, 0]] and lengths.tolist() == [3, 1, 2]
    ids, lengths = pad_ids(rows, -100, batch_first=True)
    assert ids.tolist() == [[5, 6, 7], [8, -100, -100], [9, 10, -100]]
    assert ids.dtype == lengths.dtype == torch.long


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_restores_the_mode_also_on_error(training):
    m = nn.Sequential(nn.Dropout(0.5), nn.Linear(2, 2)).train(training)
    with eval_mode(m):
        assert not m.training and not m[0].training
    assert m.training == m[0].training == training
    with pytest.raises(RuntimeError, match="boom"), eval_mode(m):
        raise RuntimeError("boom")
    assert m.training == m[0].training == training


def test_cut_batches_by_count_sorts_within_windows():
    keys = [7, 3, 9, 1, 5, 2, 8, 4]
    order = list(range(8))
    assert cut_batches(order, batch_size=3, keys=keys) == [[3, 5, 1], [7, 4, 0], [6, 2]]
    assert cut_batches(order, batch_size=2, keys=keys, window=4) == [[3, 1], [0, 2],
                                                                     [5, 7], [4, 6]]
    assert cut_batches(order, batch_size=3) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    with pytest.raises(ValueError, match="exactly one"):
        cut_batches(order)


def test_cut_batches_by_budget_respects_it():
    lengths, _ = _data()
    batches = cut_batches(list(range(len(lengths))), max_tokens=64, lengths=lengths,
                          keys=lengths, window=50)
    assert sorted(_flat(batches)) == list(range(len(lengths)))
    for b in batches:
        assert len(b) * max(lengths[i] for i in b) <= 64 or len(b) == 1


# ----------------------------------------------------------------------------- the iterator


def _epoch(it: EpochIterator) -> list[list[int]]:
    return [list(b.data) for b in it.batches(lambda idx: idx)]


@pytest.mark.parametrize("kw", [{"batch_size": 8, "window": 32}, {"batch_size": 5},
                                {"max_tokens": 90, "window": 40}])
def test_every_example_once_per_epoch_and_epochs_differ(kw):
    src, tgt = _data()
    it = EpochIterator(len(src), seed=3, keys=src, lengths=src, **kw)
    first = _epoch(it)
    assert sorted(_flat(first)) == list(range(len(src)))
    assert it.progress() == (len(src), len(src))
    it.new_epoch()
    second = _epoch(it)
    assert sorted(_flat(second)) == list(range(len(src))) and second != first
    again = EpochIterator(len(src), seed=3, keys=src, lengths=src, **kw)
    assert _epoch(again) == first                                  # a function of the seed
    assert _epoch(EpochIterator(len(src), seed=4, keys=src, lengths=src, **kw)) != first


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("kw", [{"batch_size": 7, "window": 21}, {"max_tokens": 70}])
def test_ranks_take_disjoint_shares_in_lockstep(world, kw):
    src, _ = _data()
    shares = [_epoch(EpochIterator(len(src), 1, rank, world, keys=src, lengths=src, **kw))
              for rank in range(world)]
    assert len({len(s) for s in shares}) == 1                        # the same number of steps
    flat = [_flat(s) for s in shares]
    assert sum(map(len, flat)) == len(set().union(*map(set, flat)))  # no example twice
    left_out = len(src) - sum(map(len, flat))
    if "batch_size" in kw:
        assert left_out < world and len({len(f) for f in flat}) == 1
    else:
        assert left_out <= max(src) * (world - 1)       # at most world-1 batches cut off


def test_resume_from_the_position_and_progress_in_units():
    src, tgt = _data()
    it = EpochIterator(len(src), 9, batch_size=16, keys=src, units=tgt, window=64)
    gen = it.batches(lambda idx: idx)
    taken = [next(gen) for _ in range(4)]
    assert it.progress() == (sum(b.size for b in taken), sum(tgt))
    assert all(b.size == sum(tgt[i] for i in b.data) for b in taken)
    state = it.state_dict()
    rest = [b.data for b in gen]
    again = EpochIterator(len(src), 9, batch_size=16, keys=src, units=tgt, window=64)
    again.load_state_dict(state)
    assert [b.data for b in again.batches(lambda idx: idx)] == rest
    other = EpochIterator(len(src), 9, 0, 2, batch_size=16, keys=src, units=tgt, window=64)
    other.load_state_dict(state, same_shards=False)               # world changed: epoch restarts
    assert other.state_dict() == {"epoch": 0, "pos": 0}
    last = list(EpochIterator(5, 0, batch_size=2).batches(lambda idx: idx))
    assert [b.last for b in last] == [False, False, True]


# ------------------------------------------------------------------ the copies it replaces


@pytest.mark.parametrize("world", [1, 2, 3])
def test_token_budgets_plan_as_the_translation_task_does(world):
    """Translation's epoch (``token_batches`` under the epoch's seed, every world-th batch):
    the iterator with the same keys, lengths and budget gives the same batches."""
    src, tgt = _data(301, 5)
    for epoch in range(3):
        rng = random.Random(7 * 1_000_003 + epoch)
        ref = token_batches(src, tgt, 80, rng, 64)
        ref = ref[: len(ref) // world * world]
        keys = list(zip(src, tgt, strict=True))
        lengths = [max(a, b) for a, b in zip(src, tgt, strict=True)]
        for rank in range(world):
            it = EpochIterator(len(src), 7, rank, world, max_tokens=80, keys=keys,
                               lengths=lengths, units=tgt, window=64)
            for _ in range(epoch):
                it.new_epoch()
            assert it.plan() == ref[rank::world]


@pytest.mark.parametrize("world", [1, 2])
def test_plain_batches_plan_as_the_tagging_task_does(world):
    """Tagging's epoch (shuffled, every world-th utterance, consecutive batches): the iterator
    without keys and without shuffling batches."""
    n, bs = 97, 8
    for epoch in range(2):
        idx = list(range(n))
        random.Random(2 * 1_000_003 + epoch).shuffle(idx)
        for rank in range(world):
            order = idx[: n // world * world][rank::world]
            ref = [order[lo:lo + bs] for lo in range(0, len(order), bs)]
            it = EpochIterator(n, 2, rank, world, batch_size=bs, shuffle_batches=False)
            for _ in range(epoch):
                it.new_epoch()
            assert it.plan() == ref
