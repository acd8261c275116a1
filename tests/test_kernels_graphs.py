"""``treelm.kernels.graphs``: the bookkeeping of CUDA-graph replay, checked on the CPU with a
stand-in for ``torch.cuda.make_graphed_callables`` (capturing itself needs a GPU): which calls get
a graph, one capture per key, the limits, the eager fallback and its numbers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor

from treelm.cells.onlstm import ONLSTM
from treelm.kernels import onlstm_sequence
from treelm.kernels.graphs import GraphCache, GraphKey

I, H, L = 3, 8, 4


def _args(T: int, B: int = 2, seed: int = 0, grad: bool = True) -> tuple[Any, ...]:
    g = torch.Generator().manual_seed(seed)
    G = 4 * H + 2 * L

    def rand(*shape: int) -> Tensor:
        return (torch.randn(*shape, generator=g) * 0.5).requires_grad_(grad)

    return (rand(T, B, I), (torch.zeros(B, H), torch.zeros(B, H)), rand(G, I), rand(G),
            rand(G, H), rand(G), L, "paper")


class FakeCapture:
    """Records what would be captured; the "graph" runs the function itself."""

    def __init__(self) -> None:
        self.samples: list[tuple[Tensor, ...]] = []

    def __call__(self, fn: Callable[..., Any], samples: tuple[Tensor, ...]
                 ) -> Callable[..., Any]:
        assert all(t.is_leaf for t in samples)
        self.samples.append(samples)
        return fn


def _cpu_cache(**kwargs: Any) -> tuple[GraphCache, FakeCapture]:
    fake = FakeCapture()
    return GraphCache(capture=fake, device_types=("cpu",), **kwargs), fake


def _loss(outputs: tuple[Tensor, tuple[Tensor, Tensor], dict[str, Tensor]]) -> Tensor:
    out, (h, c), aux = outputs
    return out.square().sum() + c.sum() + aux["df"].sum()


def test_not_cuda_runs_eagerly_with_the_same_numbers() -> None:
    cache = GraphCache()                    # graphs on CUDA only
    args = _args(3)
    a = cache(*args, impl="cpu")
    b = onlstm_sequence(*args, impl="cpu")
    assert cache.stats == {"captured": 0, "replayed": 0, "eager": 1} and not cache.graphs
    torch.testing.assert_close(a[0], b[0], rtol=0, atol=0)


def test_key_says_what_a_graph_is_fixed_to() -> None:
    cache, _ = _cpu_cache(lengths=(3, 5))
    x, state, *rest = _args(3)
    key = cache.key(x, state, *rest, "auto")
    assert key == GraphKey(3, 2, I, H, L, "paper", "auto", torch.float32, torch.device("cpu"),
                           (True, False, False, True, True, True, True))
    assert cache.key(*_args(4), "auto") is None                     # length not captured
    with torch.no_grad():                                           # evaluation, decoding
        assert cache.key(x, state, *rest, "auto") is None
    assert cache.key(*_args(3, grad=False), "auto") is None         # no gradient wanted
    with torch.autocast("cpu", torch.bfloat16):                     # the cast cache
        assert cache.key(x, state, *rest, "auto") is None
    assert cache.key(x, state, *rest, "triton") != key              # impl is part of it
    assert GraphCache().key(x, state, *rest, "auto") is None        # CPU tensors


def test_one_capture_per_key_then_replays_up_to_max_graphs() -> None:
    cache, fake = _cpu_cache(max_graphs=2)
    for T in (3, 3, 4, 3, 5):
        args = _args(T, seed=T)
        _loss(cache(*args, impl="cpu")).backward()
    assert [s[0].shape[0] for s in fake.samples] == [3, 4]          # T = 5: no room
    assert cache.stats == {"captured": 2, "replayed": 4, "eager": 1}
    assert len(cache.graphs) == 2
    # the samples are copies: same values and gradient needs, not the caller's tensors
    x = _args(3, seed=3)[0]
    assert torch.equal(fake.samples[0][0], x) and fake.samples[0][1].requires_grad is False


def test_replayed_gradients_are_the_eager_ones() -> None:
    cache, _ = _cpu_cache()
    grads = []
    for run in (lambda *a: cache(*a, impl="cpu"), lambda *a: onlstm_sequence(*a, impl="cpu")):
        args = _args(4, seed=7)
        _loss(run(*args)).backward()
        grads.append([args[0].grad, *(t.grad for t in args[2:6])])
    assert cache.stats["replayed"] == 1
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_replay_whose_outputs_are_in_use_is_not_overwritten() -> None:
    """A second call of the same key before the first one's backward runs eagerly."""
    cache, _ = _cpu_cache()
    first = cache(*_args(3, seed=1), impl="cpu")
    second = cache(*_args(3, seed=2), impl="cpu")
    assert cache.stats == {"captured": 1, "replayed": 1, "eager": 1}
    _loss(first).backward()
    _loss(second).backward()
    cache(*_args(3, seed=3), impl="cpu")            # dropped at once, without a backward ...
    cache(*_args(3, seed=4), impl="cpu")            # ... so its buffers are free as well
    assert cache.stats == {"captured": 1, "replayed": 3, "eager": 1}
    cache.clear()
    assert not cache.graphs


def test_cell_option_is_off_by_default_and_cuda_only() -> None:
    torch.manual_seed(0)
    plain = ONLSTM(I, H, H // L, impl="cpu")
    graphed = ONLSTM(I, H, H // L, impl="cpu", cuda_graphs=True)
    graphed.load_state_dict(plain.state_dict())
    assert plain.cuda_graphs is False
    x = torch.randn(3, 2, I)
    torch.testing.assert_close(graphed(x)[0], plain(x)[0], rtol=0, atol=0)
    assert graphed._graphs is None                  # CPU tensors: never built
    with pytest.raises(ValueError):
        GraphCache(max_graphs=0)
