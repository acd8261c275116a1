"""CUDA-graph replay of the fused ON-LSTM: forward and backward in training, the forward alone in
inference (on CUDA; on by default).

Why: at the paper's size one forward + backward of the fused path launches ``2T`` GEMMs and ``2T``
Triton kernels (:mod:`treelm.kernels.onlstm_triton`), the forward alone ``T`` of each, every one
too small to hide the Python time of its launch: the GPU idles between them (eager inference at
batch 20 ran at a quarter of cuDNN's ``nn.LSTM``). A CUDA graph replays all of one sequence's
launches from one call. The fused path does no host work inside its forward and backward (no host
tensors, no ``.item()``, buffers allocated once per sequence in shapes fixed by ``(T, B)``;
``tests/test_kernels_onlstm.py`` checks it), which is what capturing needs.

How: per cell (:class:`treelm.cells.onlstm.ONLSTM` with ``cuda_graphs=True``) a
:class:`GraphCache` holds one graphed callable per :class:`GraphKey`,

    (T, B, input size, hidden size, levels, master gate, impl, dtype, autocast dtype, device,
     which inputs need a gradient)

made on first use. A call that wants a gradient (grad mode on and some input needing one) gets a
training graph from ``torch.cuda.make_graphed_callables``: a forward graph and a backward graph
with static input, output and gradient buffers (the call copies its inputs into the static ones,
the backward its incoming gradients), after a few warm-up runs on a side stream (Triton compiles
there). Variable BPTT (AWD-LSTM draws each batch's length) makes one key per length: ``lengths``
limits capturing to a given set of lengths, and at most ``max_graphs`` are kept (each holds its
sequence's buffers, about ``T·B·(2G + 6H + 4L)`` numbers: some 100 MB for a 1150-unit layer at
the paper's size in float32), and none is captured while less than ``min_free`` of the GPU's
memory is free; any other call runs the eager fused path, with the same numbers. Why 64 by
default: AWD-LSTM's variable BPTT draws some 40 lengths in its first few hundred batches, and
with 16 graphs a fifth of the paper config's sequences ran eagerly at about half the speed; on an
H200 with 64, training ran 17% faster in float32 and 34% faster in bf16
(``benchmarks/results/precision-gpu-graphs64-20261126.json`` against ``precision-gpu-20261126``).

Inference (grad mode off, ``torch.inference_mode`` included, or no input needing a gradient:
evaluation, decoding) gets a forward-only graph, its key's gradient needs all ``False`` (so never
a training key, which needs at least one): the inputs are copied into static buffers, the forward
(run under ``torch.no_grad``, so it saves nothing for a backward) is run a few times on a side
stream (Triton compiles there, the allocator settles), then captured once with
``torch.cuda.graph``. Each later call copies its inputs into the static buffers (``copy_``: the
weights too, some 30 MB for a 1150-unit layer, tens of microseconds), replays, and returns
clones of the static outputs, which the next replay overwrites; so two calls' results are
independent, and an inference graph has no outputs in use to wait for. Captures and replays run
outside ``torch.inference_mode`` (its tensors cannot be written to outside it: a graph captured
in it could not be replayed by a ``no_grad`` caller), reading the caller's inference tensors; the
clones returned are ordinary tensors. The two kinds count alike in :attr:`GraphCache.stats` and
against ``max_graphs``; evaluation adds one key per (length, batch) it runs at.

Under ``torch.autocast`` (``train.precision=bf16``) the graph, training or inference, is captured
with autocast's dtype in its key and autocast switched on inside the captured function without its
cast cache (``cache_enabled=False``: a weight's bfloat16 copy cached across calls cannot live in a
graph's private memory), and with the caller's autocast switched off around the capture itself
(``make_graphed_callables`` refuses a cached autocast; the forward-only capture takes the same
rule, for the same reason). Each replay casts the weights afresh, which is what the eager path
does once per sequence as well: same numbers, same products.

A call runs eagerly, never from a graph, when the tensors are not on CUDA (``device_types``), when
they are not float32 or the path is not the Triton one (the only one captured and measured on a
GPU), when a Python dispatch mode is on, when a training key's last replay may still be in use
(its outputs alive and not yet back-propagated: a cell called twice in one step), or when the
cache is full.
:attr:`GraphCache.stats` counts captures, replays and eager calls.

Made safe, so on by default: a replayed graph keeps its outputs and its input gradients in static
buffers that the next replay of the same key overwrites, and ``make_graphed_callables`` hands them
out as aliases. Two things keep that from reaching the caller: the outputs are copied out of the
buffers (``clone``: a few MB per call, microseconds on a GPU), and a leaf input (a parameter)
passes through :class:`_OwnGradient`, whose backward hands a copy of the gradient to the leaf's
accumulator; without it ``AccumulateGrad`` would keep the static buffer itself as ``.grad``, so a
second replay before the optimiser step (gradient accumulation) would overwrite the first
batch's gradient. ``tests/test_kernels_graphs.py`` checks both with a stand-in capture that has
the same aliasing, and on CUDA with the real one. What remains: a second call of a key whose
first call has not been back-propagated runs eagerly (the graph's saved activations are shared).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode

from treelm.kernels.precision import autocast_dtype

__all__ = ["GraphCache", "GraphKey"]

Outputs = tuple[Tensor, tuple[Tensor, Tensor], dict[str, Tensor]]
Capture = Callable[[Callable[..., Any], tuple[Tensor, ...]], Callable[..., Any]]
# (forward function, static input buffers) -> replay(*inputs): copies the inputs into the static
# buffers, replays, and returns the static output buffers themselves (overwritten by the next call)
ForwardCapture = Callable[[Callable[..., Any], tuple[Tensor, ...]],
                          Callable[..., tuple[Tensor, ...]]]


@dataclass(frozen=True)
class GraphKey:
    """What a captured graph is fixed to: every shape, dtype and device, the options that change
    the computation and which inputs ``(x, h0, c0, W_ih, b_ih, W_hh, b_hh)`` need gradients
    (all ``False``: a forward-only graph, for inference)."""

    steps: int
    batch: int
    input_size: int
    hidden: int
    n_levels: int
    master_input: str
    impl: str
    dtype: torch.dtype
    autocast: torch.dtype | None        # the products' dtype under autocast; None: no autocast
    device: torch.device
    needs_grad: tuple[bool, ...]

    @property
    def inference(self) -> bool:
        """Whether this is a forward-only graph's key (no gradient wanted)."""
        return not any(self.needs_grad)


class _OwnGradient(torch.autograd.Function):
    """Identity whose backward passes on a copy of the gradient (module docstring: a leaf must
    not keep a replayed graph's static gradient buffer as its ``.grad``)."""

    @staticmethod
    def forward(ctx: Any, t: Tensor) -> Tensor:
        return t.view_as(t)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        return grad.clone()


def _make_graphed(fn: Callable[..., Any], samples: tuple[Tensor, ...]) -> Callable[..., Any]:
    # The capture warms up on a side stream, after which autograd warns (once, at length) that a
    # parameter's accumulator runs on another stream than the gradient's producer: a possible
    # synchronisation, not an error, and the replay is measured with it. Silenced for users.
    torch.autograd.graph.set_warn_on_accumulate_grad_stream_mismatch(False)
    return torch.cuda.make_graphed_callables(fn, samples)


_WARMUP = 3         # eager runs before a capture, as make_graphed_callables does


def _capture_forward(fn: Callable[..., Any], static: tuple[Tensor, ...]
                     ) -> Callable[..., tuple[Tensor, ...]]:
    """A forward-only CUDA graph of ``fn(*static)`` (called under ``torch.no_grad``): warm-up runs
    on a side stream, then one capture (PyTorch's recipe for ``torch.cuda.graph``). ``static``
    are the graph's input buffers; the replay copies its inputs into them and returns the graph's
    static outputs (aliases: the caller clones them)."""
    device = static[0].device
    with torch.cuda.device(device):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(_WARMUP):
                fn(*static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = tuple(fn(*static))

    def replay(*inputs: Tensor) -> tuple[Tensor, ...]:
        for buffer, t in zip(static, inputs):
            buffer.copy_(t)
        graph.replay()
        return outputs

    return replay


def _free_fraction(device: torch.device) -> float:
    """The fraction of ``device``'s memory free now (1.0 off CUDA: the tests' stand-ins)."""
    if device.type != "cuda":
        return 1.0
    free, total = torch.cuda.mem_get_info(device)
    return free / total


class GraphCache:
    """Graphed fused ON-LSTM sequences of one cell, by :class:`GraphKey` (module docstring).

    ``max_graphs``: how many keys are captured at most; ``lengths``: if given, only these
    sequence lengths are captured; ``min_free``: no capture while less than this fraction of the
    device's memory is free (``free_memory(device)`` says how much is, by default
    ``torch.cuda.mem_get_info``). ``capture``, ``capture_forward`` and ``device_types`` are for
    tests (stand-ins for ``torch.cuda.make_graphed_callables`` and for the forward-only capture
    :func:`_capture_forward`, and the device types graphs are used on).
    """

    def __init__(self, max_graphs: int = 64, lengths: Collection[int] | None = None,
                 capture: Capture | None = None,
                 device_types: Collection[str] = ("cuda",), min_free: float = 0.2,
                 free_memory: Callable[[torch.device], float] | None = None,
                 capture_forward: ForwardCapture | None = None) -> None:
        if max_graphs < 1:
            raise ValueError(f"max_graphs must be at least 1, not {max_graphs}")
        if not 0.0 <= min_free < 1.0:
            raise ValueError(f"min_free must be a fraction in [0, 1), not {min_free}")
        self.max_graphs = max_graphs
        self.min_free = min_free
        self.free_memory = free_memory or _free_fraction
        self.lengths = None if lengths is None else frozenset(lengths)
        self.capture: Capture = capture or _make_graphed
        self.capture_forward: ForwardCapture = capture_forward or _capture_forward
        self.device_types = frozenset(device_types)
        self.graphs: dict[GraphKey, Callable[..., Any]] = {}
        self._live: dict[GraphKey, weakref.ref[Tensor]] = {}
        self.stats = {"captured": 0, "replayed": 0, "eager": 0}

    def key(self, x: Tensor, state: tuple[Tensor, Tensor], weight_ih: Tensor, bias_ih: Tensor,
            weight_hh: Tensor, bias_hh: Tensor, n_levels: int, master_input: str,
            impl: str) -> GraphKey | None:
        """The call's key, or ``None`` when it is not to run from a graph at all (wrong device,
        a dispatch mode, a length outside ``lengths``). No gradient wanted (grad mode off or no
        input needing one): a forward-only key, its gradient needs all ``False``."""
        tensors = (x, *state, weight_ih, bias_ih, weight_hh, bias_hh)
        if x.device.type not in self.device_types or any(
                t.device != x.device for t in tensors):
            return None
        if _get_current_dispatch_mode() is not None:
            return None     # a Python dispatch mode (an op logger, a tracer) would see the capture
        if not self._capturable(x, impl):
            return None
        needs = tuple(t.requires_grad for t in tensors)
        if not (torch.is_grad_enabled() and any(needs)):
            needs = (False,) * len(tensors)         # inference: a forward-only graph
        T, B, input_size = x.shape
        if self.lengths is not None and T not in self.lengths:
            return None
        return GraphKey(T, B, input_size, weight_hh.shape[1], n_levels, master_input, impl,
                        x.dtype, autocast_dtype(x.device.type), x.device, needs)

    def _capturable(self, x: Tensor, impl: str) -> bool:
        """Only the path captured and measured on a GPU: float32 through the Triton kernels.
        (float64 and the pure-PyTorch ``impl="cpu"`` path on CUDA run eagerly: a capture that
        fails part-way leaves the CUDA generator marked as capturing for the whole process.)"""
        if x.device.type != "cuda":
            return True             # the CPU stand-ins of the tests
        from treelm.kernels import triton_available

        return (x.dtype == torch.float32 and triton_available()
                and impl in ("auto", "fused", "triton"))

    def __call__(self, x: Tensor, state: tuple[Tensor, Tensor], weight_ih: Tensor,
                 bias_ih: Tensor, weight_hh: Tensor, bias_hh: Tensor, n_levels: int,
                 master_input: str, impl: str = "auto") -> Outputs:
        """:func:`treelm.kernels.onlstm_sequence`'s contract, from a graph where possible."""
        from treelm.kernels import onlstm_sequence

        args = (x, state, weight_ih, bias_ih, weight_hh, bias_hh, n_levels, master_input)
        key = self.key(*args, impl)
        graphed = None if key is None else self._graph(key, args, impl)
        if graphed is None:
            self.stats["eager"] += 1
            return onlstm_sequence(*args, impl=impl)
        assert key is not None
        inputs = (x, *state, weight_ih, bias_ih, weight_hh, bias_hh)
        # copies: the graph's static output buffers are overwritten by its next replay
        if key.inference:
            with torch.inference_mode(False), torch.no_grad():     # (module docstring)
                out, h, c, df, di = (t.clone() for t in graphed(*inputs))
        else:
            inputs = tuple(_OwnGradient.apply(t) if t.is_leaf and t.requires_grad else t
                           for t in inputs)
            out, h, c, df, di = (t.clone() for t in graphed(*inputs))
            self._live[key] = weakref.ref(out)
            out.register_hook(self._released(key))  # back-propagated: the buffers are free again
        self.stats["replayed"] += 1
        return out, (h, c), {"df": df, "di": di}

    def _released(self, key: GraphKey) -> Callable[[Tensor], None]:
        def hook(grad: Tensor) -> None:
            self._live.pop(key, None)

        return hook

    def _graph(self, key: GraphKey, args: tuple[Any, ...], impl: str
               ) -> Callable[..., Any] | None:
        """The key's graphed callable, captured now if there is room; ``None``: run eagerly."""
        live = self._live.get(key)
        if live is not None and live() is not None:
            return None         # the last replay's outputs may still be needed: do not overwrite
        graphed = self.graphs.get(key)
        if (graphed is None and len(self.graphs) < self.max_graphs
                and self.free_memory(key.device) >= self.min_free):
            graphed = self.graphs[key] = self._capture(args, impl, key)
            self.stats["captured"] += 1
        return graphed

    def _capture(self, args: tuple[Any, ...], impl: str, key: GraphKey) -> Callable[..., Any]:
        from treelm.kernels import onlstm_sequence

        x, (h0, c0), weight_ih, bias_ih, weight_hh, bias_hh, n_levels, master_input = args
        device_type, low = x.device.type, key.autocast

        def sequence(x: Tensor, h0: Tensor, c0: Tensor, weight_ih: Tensor, bias_ih: Tensor,
                     weight_hh: Tensor, bias_hh: Tensor) -> tuple[Tensor, ...]:
            # the key's autocast, without the cast cache (module docstring)
            with torch.autocast(device_type, dtype=low or torch.bfloat16, enabled=low is not None,
                                cache_enabled=False):
                out, (h, c), aux = onlstm_sequence(x, (h0, c0), weight_ih, bias_ih, weight_hh,
                                                   bias_hh, n_levels, master_input, impl=impl)
            return out, h, c, aux["df"], aux["di"]

        tensors = (x, h0, c0, weight_ih, bias_ih, weight_hh, bias_hh)
        if key.inference:
            # the static input buffers: copies of this call's inputs, ordinary tensors
            with (torch.inference_mode(False), torch.no_grad(),
                  torch.autocast(device_type, enabled=False)):     # as for training (docstring)
                return self.capture_forward(sequence, tuple(t.detach().clone() for t in tensors))
        # the samples: same shapes, values and gradient needs, as leaves of their own
        samples = tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in tensors)
        with torch.autocast(device_type, enabled=False):   # the caller's, cached: refused
            return self.capture(sequence, samples)

    def clear(self) -> None:
        """Drop every graph (and the memory its buffers hold)."""
        self.graphs.clear()
        self._live.clear()
