"""``treelm.kernels.graphs``: the bookkeeping of CUDA-graph replay, checked on the CPU with a
stand-in for ``torch.cuda.make_graphed_callables`` (capturing itself needs a GPU): which calls get
a graph, one capture per key, the limits, the eager fallback and its numbers."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

from treelm.cells.onlstm import ONLSTM
from treelm.kernels import onlstm_sequence
from treelm.kernels.graphs import Capture, GraphCache, GraphKey

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


class _Passthrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        return func(*args, **(kwargs or {}))


def test_key_says_what_a_graph_is_fixed_to() -> None:
    cache, _ = _cpu_cache(lengths=(3, 5))
    x, state, *rest = _args(3)
    key = cache.key(x, state, *rest, "auto")
    assert key == GraphKey(3, 2, I, H, L, "paper", "auto", torch.float32, None,
                           torch.device("cpu"), (True, False, False, True, True, True, True))
    assert cache.key(*_args(4), "auto") is None                     # length not captured
    with torch.no_grad():                                           # evaluation, decoding
        assert cache.key(x, state, *rest, "auto") is None
    assert cache.key(*_args(3, grad=False), "auto") is None         # no gradient wanted
    with torch.autocast("cpu", torch.bfloat16):                     # bf16: a key of its own
        assert cache.key(x, state, *rest, "auto") == GraphKey(
            *(getattr(key, f) for f in ("steps", "batch", "input_size", "hidden", "n_levels",
                                        "master_input", "impl", "dtype")),
            torch.bfloat16, key.device, key.needs_grad)
    assert cache.key(x, state, *rest, "triton") != key              # impl is part of it
    assert GraphCache().key(x, state, *rest, "auto") is None        # CPU tensors
    with _Passthrough():                                            # an op logger, a tracer
        assert cache.key(x, state, *rest, "auto") is None


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


def test_no_capture_while_the_device_is_short_of_memory() -> None:
    """Below ``min_free`` of the device's memory free, new lengths run eagerly; graphs already
    captured still replay; with room again, capturing goes on."""
    free = [0.5]
    fake = FakeCapture()
    cache = GraphCache(capture=fake, device_types=("cpu",), min_free=0.2,
                       free_memory=lambda device: free[0])
    _loss(cache(*_args(3, seed=1), impl="cpu")).backward()          # room: captured
    free[0] = 0.1
    _loss(cache(*_args(4, seed=2), impl="cpu")).backward()          # short: eager
    _loss(cache(*_args(3, seed=3), impl="cpu")).backward()          # captured: replayed
    free[0] = 0.3
    _loss(cache(*_args(4, seed=4), impl="cpu")).backward()          # room again: captured
    assert [s[0].shape[0] for s in fake.samples] == [3, 4]
    assert cache.stats == {"captured": 2, "replayed": 3, "eager": 1}
    with pytest.raises(ValueError, match="min_free"):
        GraphCache(min_free=1.0)


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


def test_cell_option_is_on_by_default_and_cuda_only() -> None:
    torch.manual_seed(0)
    plain = ONLSTM(I, H, H // L, impl="cpu", cuda_graphs=False)
    graphed = ONLSTM(I, H, H // L, impl="cpu")
    graphed.load_state_dict(plain.state_dict())
    assert graphed.cuda_graphs is True
    x = torch.randn(3, 2, I)
    torch.testing.assert_close(graphed(x)[0], plain(x)[0], rtol=0, atol=0)
    assert graphed._graphs is None                  # CPU tensors: never built
    with pytest.raises(ValueError):
        GraphCache(max_graphs=0)


class StaticCapture:
    """A stand-in with ``make_graphed_callables``' aliasing: every replay writes its outputs into
    the same buffers and returns them (detached aliases); the backward uses the last forward's
    saved activations and returns its input gradients, likewise, as aliases of static buffers."""

    def __call__(self, fn: Callable[..., Any], samples: tuple[Tensor, ...]
                 ) -> Callable[..., Any]:
        out_bufs: list[Tensor] = []
        grad_bufs = [torch.zeros_like(t) for t in samples]
        last: dict[str, Any] = {}

        class Replay(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, *inputs: Tensor) -> tuple[Tensor, ...]:
                ins = [t.detach().requires_grad_(s.requires_grad)
                       for t, s in zip(inputs, samples)]
                with torch.enable_grad():
                    outs = fn(*ins)
                last.update(ins=ins, outs=outs)
                if not out_bufs:
                    out_bufs.extend(torch.empty_like(o) for o in outs)
                for b, o in zip(out_bufs, outs):
                    b.copy_(o.detach())
                return tuple(b.detach() for b in out_bufs)

            @staticmethod
            def backward(ctx: Any, *grads: Tensor) -> tuple[Tensor | None, ...]:
                wanted = [t for t in last["ins"] if t.requires_grad]
                got = iter(torch.autograd.grad(last["outs"], wanted, grads, allow_unused=True))
                result: list[Tensor | None] = []
                for t, b in zip(last["ins"], grad_bufs):
                    g = next(got) if t.requires_grad else None
                    if g is None:
                        result.append(None)
                        continue
                    b.copy_(g)
                    result.append(b.detach())
                return tuple(result)

        return lambda *inputs: Replay.apply(*inputs)


def _on(device: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``_args`` moved to ``device``, leaves again with the same gradient needs."""
    return tuple(t.detach().to(device).requires_grad_(t.requires_grad) if isinstance(t, Tensor)
                 else tuple(s.to(device) for s in t) if isinstance(t, tuple) else t
                 for t in args)


def _two_batches(run: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Tensor, list[Tensor]]:
    """Two batches of one length through the same parameters, gradients accumulated (no
    optimiser step between): the first batch's output and the parameters' summed gradients."""
    x, state, w_ih, b_ih, w_hh, b_hh, levels, master = args
    first = run(x, state, w_ih, b_ih, w_hh, b_hh, levels, master)
    _loss(first).backward()
    x2 = (x.detach() * -0.5).requires_grad_()      # same gradient needs: the same key
    second = run(x2, state, w_ih, b_ih, w_hh, b_hh, levels, master)
    _loss(second).backward()
    return first[0], [w_ih.grad, b_ih.grad, w_hh.grad, b_hh.grad]


def _graphed_and_eager(device: str, stand_in: Capture, args: Callable[[], tuple[Any, ...]],
                       context: Callable[[], Any]) -> tuple[GraphCache, Any, Any]:
    """The same two batches (:func:`_two_batches`) through a graph cache (``stand_in`` on the
    CPU, the real capture on CUDA) and through the eager path, each inside ``context()``."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    if device == "cpu":
        cache, impl = GraphCache(capture=stand_in, device_types=("cpu",)), "cpu"
    else:
        cache, impl = GraphCache(), "auto"
    results = []
    for run in (lambda *a: cache(*a, impl=impl), lambda *a: onlstm_sequence(*a, impl=impl)):
        with context():
            results.append(_two_batches(run, _on(device, args())))
    return cache, *results


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_replays_neither_overwrite_earlier_outputs_nor_accumulated_gradients(device) -> None:
    """What the static buffers would break: gradient accumulation over two replays of one key
    (the first batch's ``.grad`` kept as the buffer the second replay overwrites) and an output of
    an earlier step still held. Stand-in capture on the CPU, the real one on CUDA."""
    cache, (out_g, grads_g), (out_e, grads_e) = _graphed_and_eager(
        device, StaticCapture(), lambda: _args(4, seed=11), contextlib.nullcontext)
    assert cache.stats["replayed"] == 2
    tol = {"rtol": 0, "atol": 0} if device == "cpu" else {"rtol": 1e-5, "atol": 1e-6}
    torch.testing.assert_close(out_g, out_e, **tol)
    for a, b in zip(grads_g, grads_e):
        torch.testing.assert_close(a, b, **tol)


class _AutocastCheckingCapture(StaticCapture):
    """``StaticCapture`` that, like ``make_graphed_callables``, refuses a cached autocast."""

    def __call__(self, fn: Callable[..., Any], samples: tuple[Tensor, ...]
                 ) -> Callable[..., Any]:
        assert not (torch.is_autocast_enabled("cpu") and torch.is_autocast_cache_enabled())
        return super().__call__(fn, samples)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_replays_under_bf16_autocast_are_the_eager_autocast_numbers(device) -> None:
    """``train.precision=bf16``: graphs are captured under autocast too (its dtype in the key,
    autocast inside the captured function, no cast cache), and give the eager path's bf16 numbers
    (the same products and casts; exactly so on the CPU stand-in), including the gradients of
    two accumulated batches; an fp32 call of the same shapes is a key of its own."""
    cache, (out_g, grads_g), (out_e, grads_e) = _graphed_and_eager(
        device, _AutocastCheckingCapture(), lambda: _args(5, B=3, seed=13),
        lambda: torch.autocast(device, torch.bfloat16))
    assert cache.stats == {"captured": 1, "replayed": 2, "eager": 0}
    assert next(iter(cache.graphs)).autocast == torch.bfloat16
    assert out_g.dtype == torch.float32 and not torch.isnan(out_g).any()
    tol = {"rtol": 0, "atol": 0} if device == "cpu" else {"rtol": 2e-2, "atol": 1e-3}
    torch.testing.assert_close(out_g, out_e, **tol)
    for a, b in zip(grads_g, grads_e):
        torch.testing.assert_close(a, b, **tol)
    impl = "cpu" if device == "cpu" else "auto"
    _loss(cache(*_on(device, _args(5, B=3, seed=14)), impl=impl)).backward()   # fp32: its own
    assert cache.stats["captured"] == 2 and {k.autocast for k in cache.graphs} == {
        None, torch.bfloat16}
