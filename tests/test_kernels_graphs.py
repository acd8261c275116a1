"""``treelm.kernels.graphs``: the bookkeeping of CUDA-graph replay, checked on the CPU with a
stand-in for ``torch.cuda.make_graphed_callables`` and one for the forward-only capture of
inference (capturing itself needs a GPU): which calls get a graph, one capture per key, the
limits, the eager fallback and its numbers; on CUDA, the real graphs against the eager path."""

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


class StaticForwardCapture:
    """A stand-in for the forward-only capture with its aliasing: every replay copies its inputs
    into the static input buffers it was given, runs the function on them and writes the results
    into the same static output buffers, which it returns themselves."""

    def __init__(self) -> None:
        self.static: list[tuple[Tensor, ...]] = []

    def __call__(self, fn: Callable[..., Any], static: tuple[Tensor, ...]
                 ) -> Callable[..., tuple[Tensor, ...]]:
        assert not torch.is_grad_enabled()
        assert not any(t.requires_grad or t.is_inference() for t in static)
        assert not (torch.is_autocast_enabled("cpu") and torch.is_autocast_cache_enabled())
        self.static.append(static)
        outs: list[Tensor] = []

        def replay(*inputs: Tensor) -> tuple[Tensor, ...]:
            assert not torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
            for buffer, t in zip(static, inputs):
                buffer.copy_(t)
            results = fn(*static)
            if not outs:
                outs.extend(torch.empty_like(o) for o in results)
            for buffer, o in zip(outs, results):
                buffer.copy_(o)
            return tuple(outs)

        return replay


def _cpu_cache(**kwargs: Any) -> tuple[GraphCache, FakeCapture]:
    fake = FakeCapture()
    return GraphCache(capture=fake, device_types=("cpu",),
                      capture_forward=StaticForwardCapture(), **kwargs), fake


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
    inference = GraphKey(*(getattr(key, f) for f in ("steps", "batch", "input_size", "hidden",
                                                     "n_levels", "master_input", "impl", "dtype",
                                                     "autocast", "device")), (False,) * 7)
    assert inference.inference and not key.inference
    with torch.no_grad():                                           # evaluation, decoding
        assert cache.key(x, state, *rest, "auto") == inference     # a forward-only graph
    with torch.inference_mode():
        assert cache.key(x, state, *rest, "auto") == inference
    assert cache.key(*_args(3, grad=False), "auto") == inference    # no gradient wanted
    with torch.no_grad():
        assert cache.key(*_args(4), "auto") is None                 # length not captured
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


# ------------------------------------------------------------------ inference: forward-only graphs

def _infer(cache: GraphCache, args: tuple[Any, ...]) -> tuple[Tensor, ...]:
    with torch.no_grad():
        out, (h, c), aux = cache(*args, impl="cpu")
    return out, h, c, aux["df"], aux["di"]


def _eager(args: tuple[Any, ...]) -> tuple[Tensor, ...]:
    with torch.no_grad():
        out, (h, c), aux = onlstm_sequence(*args, impl="cpu")
    return out, h, c, aux["df"], aux["di"]


def _same(a: tuple[Tensor, ...], b: tuple[Tensor, ...]) -> None:
    for u, v in zip(a, b, strict=True):
        torch.testing.assert_close(u, v, rtol=0, atol=0)


def test_a_no_grad_call_replays_a_forward_only_graph_with_the_eager_numbers() -> None:
    cache, fake = _cpu_cache()
    args = _args(4, seed=21)
    first = _infer(cache, args)
    assert cache.stats == {"captured": 1, "replayed": 1, "eager": 0}
    assert not fake.samples                                 # no training graph
    (key,) = cache.graphs
    assert key.inference and key.needs_grad == (False,) * 7
    static = cache.capture_forward.static[0]
    assert torch.equal(static[0], args[0]) and static[0] is not args[0]    # copies at capture
    _same(first, _eager(args))
    assert not any(t.requires_grad for t in first)
    again = _infer(cache, args)
    assert cache.stats == {"captured": 1, "replayed": 2, "eager": 0}
    _same(again, first)
    # grad mode on, no input needing a gradient: inference as well, the same graph
    plain = _args(4, seed=21, grad=False)
    out, (h, c), aux = cache(*plain, impl="cpu")
    assert cache.stats == {"captured": 1, "replayed": 3, "eager": 0} and not out.requires_grad
    _same((out, h, c, aux["df"], aux["di"]), first)


def test_successive_inference_replays_return_independent_outputs() -> None:
    """The static outputs are overwritten by the next replay: what a call returned must not be."""
    cache, _ = _cpu_cache()
    a_args, b_args = _args(5, B=3, seed=1), _args(5, B=3, seed=2)
    a = _infer(cache, a_args)
    b = _infer(cache, b_args)
    assert cache.stats == {"captured": 1, "replayed": 2, "eager": 0}
    assert not torch.equal(a[0], b[0]) and not torch.equal(a[2], b[2])
    _same(a, _eager(a_args))                                # not overwritten by the second replay
    _same(b, _eager(b_args))
    assert all(u.data_ptr() != v.data_ptr() for u in a for v in b)
    # a state carried from one call into the next (evaluation over a corpus) reads its copy
    x, _, *rest = _args(5, B=3, seed=3)
    carried = (x, (a[1], a[2]), *rest)
    _same(_infer(cache, carried), _eager(carried))


def test_inference_mode_calls_replay_and_return_ordinary_tensors() -> None:
    """Evaluation runs under ``torch.inference_mode``: the graph captured there is replayed by a
    ``no_grad`` caller as well (its buffers are ordinary tensors), and vice versa."""
    cache, _ = _cpu_cache()
    args = _args(3, seed=5)
    with torch.inference_mode():
        inputs = _on("cpu", args)                           # inference tensors
        out, (h, c), aux = cache(*inputs, impl="cpu")
    assert not out.is_inference()
    _same((out, h, c, aux["df"], aux["di"]), _eager(args))
    _same(_infer(cache, args), _eager(args))
    assert cache.stats == {"captured": 1, "replayed": 2, "eager": 0}


def test_a_call_with_gradients_still_takes_the_training_graph() -> None:
    cache, fake = _cpu_cache()
    args = _args(4, seed=8)
    _infer(cache, args)
    outputs = cache(*args, impl="cpu")                      # gradients wanted: its own key
    assert outputs[0].requires_grad
    _loss(outputs).backward()
    assert len(fake.samples) == 1 and len(cache.capture_forward.static) == 1
    assert sorted(k.inference for k in cache.graphs) == [False, True]
    assert cache.stats == {"captured": 2, "replayed": 2, "eager": 0}
    eager = _args(4, seed=8)
    _loss(onlstm_sequence(*eager, impl="cpu")).backward()
    torch.testing.assert_close(args[2].grad, eager[2].grad, rtol=0, atol=0)
    _infer(cache, args)                                     # and inference its own again
    assert cache.stats == {"captured": 2, "replayed": 3, "eager": 0}


def test_inference_graphs_count_against_max_graphs_and_fall_back_eagerly() -> None:
    cache, _ = _cpu_cache(max_graphs=1)
    _infer(cache, _args(3, seed=1))
    args = _args(4, seed=2)
    _same(_infer(cache, args), _eager(args))                # no room: eager, same numbers
    assert cache.stats == {"captured": 1, "replayed": 1, "eager": 1}


def test_inference_replays_under_bf16_autocast_are_the_eager_autocast_numbers() -> None:
    """The training path's autocast rule (dtype in the key, no cast cache inside, the caller's
    autocast off around the capture: the stand-in checks it) holds for inference too."""
    cache, _ = _cpu_cache()
    args = _args(5, B=3, seed=13)
    with torch.autocast("cpu", torch.bfloat16):
        graphed = _infer(cache, args)
        eager = _eager(args)
    assert next(iter(cache.graphs)).autocast == torch.bfloat16
    assert graphed[0].dtype == torch.float32
    _same(graphed, eager)
    _infer(cache, args)                                     # fp32: a key of its own
    assert cache.stats["captured"] == 2


def test_inference_on_cuda_replays_the_eager_numbers() -> None:
    """The real forward-only graph (``torch.cuda.graph``) against the eager Triton path: two
    batches through one graph, no overwriting, under ``no_grad`` and ``inference_mode``, and an
    ON-LSTM cell in eval mode going through its graph cache."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    cache = GraphCache()
    tol = {"rtol": 1e-5, "atol": 1e-6}

    def run(fn: Callable[..., Any], args: tuple[Any, ...], mode: Any = torch.no_grad
            ) -> tuple[Tensor, ...]:
        with mode():
            out, (h, c), aux = fn(*args, impl="auto")
        return out, h, c, aux["df"], aux["di"]

    batches = [_on("cuda", _args(6, B=4, seed=s)) for s in (31, 32)]
    graphed = [run(cache, b) for b in batches]
    again = run(cache, batches[0], torch.inference_mode)
    assert cache.stats == {"captured": 1, "replayed": 3, "eager": 0}
    assert next(iter(cache.graphs)).inference
    for g, b in zip((*graphed, again), (*batches, batches[0])):
        for u, v in zip(g, run(onlstm_sequence, b), strict=True):
            torch.testing.assert_close(u, v, **tol)
    assert not torch.equal(graphed[0][0], graphed[1][0])

    torch.manual_seed(0)
    plain = ONLSTM(I, H, H // L, cuda_graphs=False).cuda().eval()
    cell = ONLSTM(I, H, H // L).cuda().eval()
    cell.load_state_dict(plain.state_dict())
    x = torch.randn(7, 2, I, device="cuda")
    with torch.inference_mode():
        want, got = plain(x)[0], cell(x)[0]
        got2 = cell(x)[0]
    torch.testing.assert_close(got, want, **tol)
    torch.testing.assert_close(got2, want, **tol)
    assert cell._graphs.stats == {"captured": 1, "replayed": 2, "eager": 0}
