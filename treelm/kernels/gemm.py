"""Matrix products on the GEMM backend that is fastest on this machine for their shape, chosen by
measuring: above all the ``T`` per-step products ``a_t Wᵀ`` of a recurrent loop against one weight.

A CPU build of PyTorch offers three ways to multiply:

* ``"mm"``: ``torch.mm`` / ``torch.addmm`` (MKL's sgemm on x86), reading the operands as they are;
* ``"mkl"``: MKL's packed GEMM (``torch.ops.mkl._mkl_reorder_linear_weight`` once, then
  ``torch.ops.mkl._mkl_linear``), as inductor does for frozen linear layers; float32 only;
* ``"onednn"``: oneDNN's linear (``torch.ops.mkldnn._linear_pointwise``), on a weight packed once
  by ``torch.ops.mkldnn._reorder_linear_weight`` when it serves many products, on the weight as it
  is for a single product; float32 and bfloat16.

Which one wins depends on the CPU, not on the code: MKL picks its fastest kernels by vendor, oneDNN
by instruction set. On MKL packed, the fused ON-LSTM trained at 0.94× ``nn.LSTM``'s speed on an
Intel Xeon but at 0.44× on an AMD EPYC, where one step's product (20×1150)·(1150×4830) takes 3.9 ms
with MKL packed, 2.9 ms with ``torch.mm`` and 1.1 ms with oneDNN packed. So nothing here names a
vendor: the first time a product shape is seen (per process, operand layout, dtype, device and
thread count), each candidate backend prepares the weight and runs the product a few times, in
turns (see :func:`_measure`); that takes a few milliseconds for small shapes and up to about a
second for the largest one-off products of the paper's size, once per process.

Products against a weight used ``steps > 1`` times (a time loop) choose among ``mm``, ``mkl`` and
``onednn`` packed, minimising ``pack + steps · call``, so a single-step loop (decoding one token)
does not pay for a packing that a 70-step sequence amortises. Single products (``steps == 1``:
an input projection over all steps, a weight gradient) choose between ``mm`` and ``onednn`` on the
unpacked weight (packing pays only when reused; MKL's packed and plain products run the same
kernels). Near ties go to the simpler backend (:data:`BACKENDS` order, within :data:`TIE_MARGIN`)
so that the choice, and with it the rounding, does not flip between runs on noise. Every backend
computes in float32 arithmetic; they differ only in summation order (oneDNN's results differ from
MKL's by a few float32 ulps).

Front ends: :class:`FixedMatmul` and :func:`matmul` (not differentiable) for hand-written forward
and backward passes such as the fused ON-LSTM's; :func:`linear`, ``F.linear``'s numbers and
gradients, for autograd code: the cells' per-step products inside the :func:`loop` scope that
:meth:`treelm.cells.base.Cell.forward` opens around its time steps, single products elsewhere.

Overrides (tests, benchmarks, reproducing a run bit for bit): the environment variable
``TREELM_GEMM=auto|mkl|onednn|mm``, or :func:`set_backend` / the context manager
:func:`use_backend`, which take precedence over it. A forced backend that cannot run the product
(ops missing from this build, dtype, non-CPU tensor) falls back to ``"mm"``. Non-CPU tensors and
dtypes no other backend takes (float64, float16) always use ``"mm"`` without measuring. Choices
are logged once each at debug level (logger ``treelm.kernels.gemm``) and listed by
:func:`decisions` for benchmark records.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from treelm.kernels.precision import autocasting

__all__ = [
    "BACKENDS",
    "ENV_VAR",
    "CastMatmul",
    "FixedMatmul",
    "Prepared",
    "available_backends",
    "clear_cache",
    "clear_decisions",
    "decisions",
    "linear",
    "loop",
    "matmul",
    "measurements",
    "restore_measurements",
    "requested_backend",
    "set_backend",
    "usable_backends",
    "use_backend",
]

_log = logging.getLogger(__name__)

# In order of preference on a near tie: the plain product needs no packing and is what the rest of
# PyTorch does; MKL packed is the older, well-trodden path.
BACKENDS = ("mm", "mkl", "onednn")
CHOICES = ("auto", *BACKENDS)
ENV_VAR = "TREELM_GEMM"
REPEATS = 3              # timed rounds over the backends (the best per backend counts) ...
SLOW_CALL_S = 0.02       # ... or one round where a call takes longer than this (big products)
MIN_TIMED_S = 2e-4       # tiny products are timed in batches of calls lasting at least this long
TIE_MARGIN = 0.1         # a later backend must be more than 10% cheaper to displace an earlier one

_DTYPES: dict[str, tuple[torch.dtype, ...]] = {
    "mkl": (torch.float32,),
    "onednn": (torch.float32, torch.bfloat16),
}


def _probe() -> dict[str, bool]:
    """Which backends this PyTorch build has the ops for (a build without MKL or oneDNN, or a
    future one that renames these internal ops, falls back to ``"mm"``)."""

    def has(ns: str, *ops: str) -> bool:
        try:
            return all(hasattr(getattr(torch.ops, ns), op) for op in ops)
        except (AttributeError, RuntimeError):
            return False

    try:
        mkl = torch.backends.mkl.is_available()
    except (AttributeError, RuntimeError):
        mkl = False
    try:
        onednn = torch.backends.mkldnn.is_available()
    except (AttributeError, RuntimeError):
        onednn = False
    return {
        "mm": True,
        "mkl": mkl and has("mkl", "_mkl_reorder_linear_weight", "_mkl_linear"),
        "onednn": onednn and has("mkldnn", "_reorder_linear_weight", "_linear_pointwise"),
    }


_AVAILABLE = _probe()


def available_backends() -> tuple[str, ...]:
    """Backends whose ops this PyTorch build has (``"mm"`` always)."""
    return tuple(b for b in BACKENDS if _AVAILABLE[b])


def usable_backends(dtype: torch.dtype, device: torch.device | str = "cpu") -> tuple[str, ...]:
    """Backends that can run a product of ``dtype`` on ``device`` (``"mm"`` always); oneDNN not
    while switched off with ``torch.backends.mkldnn.flags(enabled=False)``."""
    if torch.device(device).type != "cpu":
        return ("mm",)
    return tuple(b for b in available_backends() if b == "mm" or (
        dtype in _DTYPES[b] and (b != "onednn" or torch.backends.mkldnn.enabled)))


# ------------------------------------------------------------------------------- overrides

_override: str | None = None


def _check(name: str, source: str) -> str:
    if name not in CHOICES:
        raise ValueError(f"unknown GEMM backend {name!r} ({source}); choose one of {CHOICES}")
    return name


def set_backend(name: str | None) -> None:
    """Force a backend for the whole process (``"auto"`` measures; ``None`` defers to
    ``$TREELM_GEMM``, default ``"auto"``)."""
    global _override
    _override = None if name is None else _check(name, "set_backend")


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    """``with use_backend("onednn"): ...``: :func:`set_backend` for the block, restored after.

    Process-wide rather than per thread on purpose: autograd may run a backward pass on another
    thread, and the backward products must follow the same override.
    """
    global _override
    previous = _override
    set_backend(name)
    try:
        yield
    finally:
        _override = previous


def requested_backend() -> str:
    """What is asked for now: the :func:`set_backend` override, else ``$TREELM_GEMM``, else
    ``"auto"``."""
    if _override is not None:
        return _override
    return _check(os.environ.get(ENV_VAR, "auto").strip().lower() or "auto", f"${ENV_VAR}")


# ---------------------------------------------------------------------------------- products

Product = Callable[[Tensor], Tensor]


def _transpose_contiguous(w: Tensor, block: int = 256) -> Tensor:
    """``w.t().contiguous()``, copied in row blocks (several times faster for large ``w``)."""
    out = w.new_empty(w.shape[1], w.shape[0])
    for i in range(0, w.shape[0], block):
        out[:, i : i + block].copy_(w[i : i + block].t())
    return out


@dataclass(frozen=True)
class Prepared:
    """A product ``a -> a @ Wᵀ`` (or ``a @ W``) prepared on a packing backend, with the operands
    its op takes, so that code calling the op itself (the C++ ON-LSTM loop,
    :mod:`treelm.kernels.onlstm_cxx`) can run the same product: ``"mkl"``: ``packed`` and the
    ``(N, K)`` weight ``weight`` it was packed from, for ``batch`` rows; ``"onednn"``: ``weight``,
    packed (or as it is, for a single product), ``packed`` is ``None``."""

    backend: str
    weight: Tensor
    packed: Tensor | None
    batch: int

    def __call__(self, a: Tensor) -> Tensor:
        if self.backend == "mkl":
            return torch.ops.mkl._mkl_linear(a, self.packed, self.weight, None, self.batch)
        return torch.ops.mkldnn._linear_pointwise(a, self.weight, None, "none", [], "")


def _prepare(backend: str, weight: Tensor, batch: int, transpose: bool, once: bool) -> Product:
    """``a -> a @ Wᵀ`` (``a @ W`` with ``transpose``) on ``backend`` (a :class:`Prepared` for the
    packing backends).

    The packed backends take the (N, K) operand of ``a @ Wᵀ`` contiguous: for ``a @ W`` a
    transposed copy (a block copy beats letting the packing read a strided view, 7 against 14 ms
    at 4830×1150). ``once``: oneDNN reads the weight as it is, strided or not (reordering it for
    one product costs more than it saves); MKL always packs (its linear takes nothing else).
    """
    if backend == "mm":
        rhs = weight if transpose else weight.t()
        return lambda a: torch.mm(a, rhs)
    if backend == "onednn" and once:
        return Prepared(backend, weight.t() if transpose else weight, None, batch)
    w = _transpose_contiguous(weight) if transpose else weight.contiguous()
    if backend == "mkl":
        return Prepared(backend, w, torch.ops.mkl._mkl_reorder_linear_weight(w, batch), batch)
    if backend == "onednn":
        return Prepared(backend, torch.ops.mkldnn._reorder_linear_weight(w, batch), None, batch)
    raise ValueError(f"unknown GEMM backend {backend!r}")


# ------------------------------------------------------------------------- measuring, choosing

def _colmajor(t: Tensor) -> bool:
    """Whether a 2-D operand is a transposed view (its rows are strided, its columns not)."""
    return t.dim() == 2 and t.stride(0) == 1 and t.stride(1) != 1


@dataclass(frozen=True)
class ShapeKey:
    """One product ``(m×k)·(k×n)`` as run here: the cache key of a measurement. ``a_t``, ``w_t``:
    whether the left operand and the weight as stored are transposed views; ``once``: a single
    product (``steps == 1``) rather than a loop's."""

    m: int
    k: int
    n: int
    transpose: bool
    a_t: bool
    w_t: bool
    once: bool
    dtype: str
    device: str
    threads: int

    def describe(self) -> str:
        op = "a·W" if self.transpose else "a·Wᵀ"
        return (f"({self.m}×{self.k})·({self.k}×{self.n}) [{op}{', once' if self.once else ''}]"
                f" {self.dtype} on {self.device}, {self.threads} threads")


@dataclass
class Measurement:
    """Best time per call and packing time of each backend tried, in ms; ``failed``: the error of
    a backend that could not run this product."""

    call_ms: dict[str, float] = field(default_factory=dict)
    pack_ms: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    def cost(self, backend: str, steps: int) -> float:
        return self.pack_ms.get(backend, 0.0) + steps * self.call_ms[backend]

    def best(self, steps: int, among: tuple[str, ...] = BACKENDS) -> str:
        """The cheapest backend for ``steps`` calls (of those ``among``); an earlier one in
        :data:`BACKENDS` order wins unless a later one is cheaper by more than
        :data:`TIE_MARGIN`."""
        order = [b for b in BACKENDS if b in self.call_ms and b in among]
        low = min(self.cost(b, steps) for b in order)
        return next(b for b in order if self.cost(b, steps) <= low * (1 + TIE_MARGIN))


@dataclass(frozen=True)
class Decision:
    backend: str
    how: str        # "measured", "forced", "fallback" (forced but unusable) or "only" (one usable)
    requested: str


_MEASURED: dict[ShapeKey, Measurement] = {}
_DECISIONS: dict[tuple[ShapeKey, int, str], Decision] = {}


def _timed(fn: Product, a: Tensor, n: int) -> float:
    """Seconds per call, over ``n`` calls."""
    t0 = time.perf_counter()
    for _ in range(n):
        fn(a)
    return (time.perf_counter() - t0) / n


def _measure(weight: Tensor, batch: int, transpose: bool, a_t: bool, once: bool,
             candidates: tuple[str, ...]) -> tuple[Measurement, dict[str, Product]]:
    """Time each candidate on this weight; also return the products prepared on the way, so that
    the winner's packing is not done twice.

    Per backend: prepare (a packing twice: the first one also pays one-off costs, fresh pages and
    primitive set-up, that a training loop re-packing into the memory it just freed does not), one
    warm-up call, one timed call that sets how many calls make a timing of at least
    ``MIN_TIMED_S``. Then :data:`REPEATS` rounds (one where a call is slower than
    ``SLOW_CALL_S``) time every backend in turn, the best per backend counting: taking turns means
    a burst of load from another process hits all candidates, not just one. The left operand is
    random, laid out as the real one (``a_t``: a transposed view), from an own generator: drawing
    from the global one would shift every later dropout mask, so a run that measured would not
    repeat one that found the choice cached (or forced).
    """
    k = weight.shape[0] if transpose else weight.shape[1]
    gen = torch.Generator(weight.device).manual_seed(0)
    shape = (k, batch) if a_t else (batch, k)
    a = torch.rand(shape, generator=gen, device=weight.device).to(weight.dtype)
    a = a.t() if a_t else a
    result, products, calls = Measurement(), {}, {}
    slowest = 0.0
    with torch.no_grad():
        for backend in candidates:
            try:
                pack, fn = math.inf, None
                packs = backend == "mkl" or (backend == "onednn" and not once)
                for _ in range(2 if packs else 1):
                    fn = None                   # free the previous packing first
                    t0 = time.perf_counter()
                    fn = _prepare(backend, weight, batch, transpose, once)
                    pack = min(pack, time.perf_counter() - t0)
                fn(a)
                first = _timed(fn, a, 1)
            except RuntimeError as e:           # e.g. a dtype or ISA this op does not take here
                result.failed[backend] = f"{type(e).__name__}: {e}"[:200]
                continue
            if packs:
                result.pack_ms[backend] = pack * 1e3
            products[backend] = fn
            result.call_ms[backend] = first * 1e3
            calls[backend] = max(1, min(100, int(MIN_TIMED_S / max(first, 1e-7))))
            slowest = max(slowest, first)
        for _ in range(1 if slowest > SLOW_CALL_S else REPEATS):
            for backend, fn in products.items():
                t = _timed(fn, a, calls[backend]) * 1e3
                result.call_ms[backend] = min(result.call_ms[backend], t)
    return result, products


def _decide(weight: Tensor, batch: int, transpose: bool, steps: int, a_t: bool
            ) -> tuple[ShapeKey, Decision, dict[str, Product]]:
    n, k = (weight.shape[1], weight.shape[0]) if transpose else weight.shape
    once = steps <= 1
    key = ShapeKey(batch, k, n, transpose, a_t, _colmajor(weight), once,
                   str(weight.dtype).removeprefix("torch."), weight.device.type,
                   torch.get_num_threads())
    wanted = requested_backend()
    usable = usable_backends(weight.dtype, weight.device)
    products: dict[str, Product] = {}
    if wanted != "auto":
        backend, how = (wanted, "forced") if wanted in usable else ("mm", "fallback")
    else:
        if once:                        # packing a weight for one product does not pay
            usable = tuple(b for b in usable if b != "mkl")
        if len(usable) == 1:
            backend, how = usable[0], "only"
        else:
            m = _MEASURED.get(key)
            if m is None:
                m, products = _measure(weight, batch, transpose, a_t, once, usable)
                _MEASURED[key] = m
            backend, how = m.best(steps, usable), "measured"
    return key, Decision(backend, how, wanted), products


def _note(key: ShapeKey, steps: int, decision: Decision) -> None:
    """Remember (for :func:`decisions`) and log a decision the first time it is made."""
    k = (key, steps, decision.requested)
    if _DECISIONS.get(k) == decision:
        return
    _DECISIONS[k] = decision
    if _log.isEnabledFor(logging.DEBUG):
        m = _MEASURED.get(key) if decision.how == "measured" else None
        timing = "" if m is None else "; " + ", ".join(
            f"{b} {m.call_ms[b]:.3f} ms/call" + (f" + {m.pack_ms[b]:.1f} ms pack"
                                                if b in m.pack_ms else "")
            for b in m.call_ms)
        _log.debug("GEMM %s, %d steps: %s (%s, asked %s)%s", key.describe(), steps,
                   decision.backend, decision.how, decision.requested, timing)


def decisions() -> list[dict[str, Any]]:
    """The choices made since the last :func:`clear_decisions`, JSON-ready: the product shape,
    how many steps it served, the backend, how it was chosen and the measured times (ms)."""
    rows = []
    for (key, steps, requested), d in _DECISIONS.items():
        row: dict[str, Any] = {
            "product": f"({key.m}x{key.k})·({key.k}x{key.n})", "transpose": key.transpose,
            "dtype": key.dtype, "device": key.device, "threads": key.threads, "steps": steps,
            "backend": d.backend, "how": d.how, "requested": requested,
        }
        m = _MEASURED.get(key)
        if m is not None and d.how == "measured":
            row.update(call_ms=dict(m.call_ms), pack_ms=dict(m.pack_ms))
            if m.failed:
                row["failed"] = dict(m.failed)
        rows.append(row)
    return rows


def measurements() -> list[dict[str, Any]]:
    """Every measurement of this process, JSON- and ``weights_only``-ready, so that a checkpoint
    can carry them and a resumed run can :func:`restore_measurements` and choose as before."""
    return [{"key": dataclasses.asdict(k), "call_ms": dict(m.call_ms),
             "pack_ms": dict(m.pack_ms), "failed": dict(m.failed)}
            for k, m in _MEASURED.items()]


def restore_measurements(rows: list[dict[str, Any]]) -> None:
    """Take ``measurements()`` of an earlier process as this one's: the same shapes then get
    the same backends (and roundings) without measuring again."""
    for row in rows:
        _MEASURED[ShapeKey(**row["key"])] = Measurement(
            dict(row["call_ms"]), dict(row["pack_ms"]), dict(row.get("failed", {})))


def clear_decisions() -> None:
    """Forget the record of :func:`decisions` (measurements stay cached)."""
    _DECISIONS.clear()


def clear_cache() -> None:
    """Forget measurements and decisions: the next product of each shape is measured again."""
    _MEASURED.clear()
    _DECISIONS.clear()


# ------------------------------------------------------------------------------ the products

class FixedMatmul:
    """``a (B, K) -> a @ Wᵀ`` (or ``a @ W`` with ``transpose``) for one ``W`` used ``steps``
    times, on the backend chosen for this shape (see the module docstring). ``a_t``: the left
    operands will be transposed views (column-major), as a weight gradient's ``δyᵀ`` is.

    Not differentiable (the packed ops have no autograd formula): for hand-written forward and
    backward passes such as :mod:`treelm.kernels.onlstm_cpu`.
    """

    def __init__(self, weight: Tensor, batch: int, transpose: bool = False, steps: int = 1,
                 a_t: bool = False) -> None:
        self.rhs = weight if transpose else weight.t()     # (K, N) for torch.mm
        key, decision, products = _decide(weight, batch, transpose, steps, a_t)
        self.product: Product | None = None
        if decision.backend != "mm":
            fn = products.get(decision.backend)
            if fn is None:
                try:
                    with torch.no_grad():   # preparing is not part of any graph
                        fn = _prepare(decision.backend, weight, batch, transpose, key.once)
                except RuntimeError:    # e.g. a forced backend this dtype or CPU cannot run
                    decision = Decision("mm", "fallback", decision.requested)
            self.product = fn
        self.backend = decision.backend
        # a call with out= writes there and allocates nothing (torch.mm); a packed CPU product
        # returns its own fresh result, which is then copied
        self.in_place = self.product is None
        _note(key, steps, decision)

    def operands(self) -> tuple[str, Tensor, Tensor | None]:
        """``(backend, weight, packed)``, for code that runs the product itself: on ``"mm"`` the
        ``(K, N)`` right operand of ``torch.mm`` and ``None``, else :class:`Prepared`'s."""
        if self.product is None:
            return "mm", self.rhs, None
        p = self.product
        assert isinstance(p, Prepared)
        return p.backend, p.weight, p.packed

    def __call__(self, a: Tensor, add: Tensor | None = None, out: Tensor | None = None
                 ) -> Tensor:
        """``add + a @ W(ᵀ)`` (``add`` optional, broadcast), written into ``out`` when given."""
        if self.product is None:
            if add is None:
                return torch.mm(a, self.rhs) if out is None else torch.mm(a, self.rhs, out=out)
            return torch.addmm(add, a, self.rhs, out=out)
        r = self.product(a)
        if add is None:
            return r if out is None else out.copy_(r)
        return torch.add(add, r, out=out)


class CastMatmul:
    """:class:`FixedMatmul` in a lower precision (autocast's GEMMs inside a hand-written pass):
    ``W`` is cast to ``dtype`` once; per call the left operand is copied into a ``dtype`` buffer,
    multiplied on the backend chosen for the ``dtype`` product, and the result (rounded to
    ``dtype``, as autocast's products are) is added to ``add`` / written into ``out`` in their
    dtype. Buffers are made once, so with ``out`` a call allocates nothing on ``"mm"``.
    """

    def __init__(self, weight: Tensor, batch: int, dtype: torch.dtype, transpose: bool = False,
                 steps: int = 1) -> None:
        w = weight.detach().to(dtype)
        k, n = (w.shape[0], w.shape[1]) if transpose else (w.shape[1], w.shape[0])
        self.product = FixedMatmul(w, batch, transpose=transpose, steps=steps)
        self.backend = self.product.backend
        self.a = w.new_empty(batch, k)
        self.r = w.new_empty(batch, n) if self.product.in_place else None
        self.in_place = True

    def operands(self) -> tuple[str, Tensor, Tensor | None]:
        """:meth:`FixedMatmul.operands` of the ``dtype`` product (the weight cast)."""
        return self.product.operands()

    def __call__(self, a: Tensor, add: Tensor | None = None, out: Tensor | None = None
                 ) -> Tensor:
        """``add + a @ W(ᵀ)`` as :meth:`FixedMatmul.__call__`, the product in ``dtype``."""
        self.a.copy_(a)
        r = self.product(self.a, out=self.r)
        if add is None:
            return r.to(a.dtype) if out is None else out.copy_(r)
        return torch.add(add, r, out=out)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` for 2-D ``a`` (M, K), ``b`` (K, N), a single product on the backend measured
    fastest for its shape and layouts (a weight gradient ``δyᵀ · x``, say). Not differentiable."""
    return FixedMatmul(b, a.shape[0], transpose=True, a_t=_colmajor(a))(a)


# ------------------------------------------------------------------- differentiable: linear

class _Loop:
    """One sequence's time loop: its batch, its length and the weights prepared so far."""

    def __init__(self, batch: int, steps: int) -> None:
        self.batch, self.steps = batch, steps
        self.linears: dict[int, _Linear] = {}


_LOOP: contextvars.ContextVar[_Loop | None] = contextvars.ContextVar("treelm_gemm_loop",
                                                                    default=None)


@contextlib.contextmanager
def loop(batch: int, steps: int) -> Iterator[None]:
    """The scope of one sequence's time loop (``steps`` steps of ``batch`` rows): inside it,
    :func:`linear` prepares each weight once and runs its products on the backend measured
    fastest for ``steps`` of them. Per thread (a context variable), so loops may nest or run
    side by side."""
    token = _LOOP.set(_Loop(batch, steps))
    try:
        yield
    finally:
        _LOOP.reset(token)


def linear(a: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear(a, weight, bias)``, with the same gradients, on the backends measured fastest:
    inside :func:`loop`, for a ``(batch, K)`` input, as one of the loop's ``steps`` products by
    this weight (prepared once); otherwise as a single product over all leading dimensions.
    Where every product it would make runs on ``"mm"`` (float64, non-CPU, small shapes), it is
    ``F.linear`` itself; otherwise a small autograd Function. Under ``torch.autocast`` it is
    autocast's ``F.linear`` with the result returned in float32."""
    if weight.dim() != 2 or a.dim() < 2:
        return F.linear(a, weight, bias)
    if a.dtype != torch.float64 and autocasting(a.device.type):
        # mixed precision: autocast's product (bfloat16 operands, float32 accumulation), its
        # result brought back to float32 so that what the caller does with it (gates, state)
        # stays in float32 (treelm.kernels.precision)
        return F.linear(a, weight, bias).float()
    scope = _LOOP.get()
    if scope is not None and a.dim() == 2 and a.shape[0] == scope.batch:
        entry = scope.linears.get(id(weight))
        if entry is None:       # the scope holds the weight, so its id is not reused meanwhile
            entry = scope.linears[id(weight)] = _Linear(weight, scope.batch, scope.steps, a)
        return entry(a, bias)
    a2 = a.reshape(-1, a.shape[-1])
    entry = _Linear(weight, a2.shape[0], 1, a2)
    if entry.plain:
        return F.linear(a, weight, bias)
    return entry(a2, bias).view(*a.shape[:-1], weight.shape[0])


class _Linear:
    """``F.linear(·, weight, bias)`` for ``steps`` inputs of ``batch`` rows: both products by the
    weight prepared at the first: ``a Wᵀ`` and, in grad mode, the input gradient's ``δy W``. If
    both run on ``"mm"``, this is plain ``F.linear``."""

    def __init__(self, weight: Tensor, batch: int, steps: int, a: Tensor) -> None:
        self.weight = weight
        w = weight.detach()
        self.forward = FixedMatmul(w, batch, steps=steps, a_t=_colmajor(a))
        # δy·W serves the input's gradient; whether one flows is known per step only, so the
        # product is prepared whenever grad mode is on
        self.backward = (FixedMatmul(w, batch, transpose=True, steps=steps)
                         if torch.is_grad_enabled() else None)
        self.plain = self.forward.backend == "mm" and (
            self.backward is None or self.backward.backend == "mm")

    def __call__(self, a: Tensor, bias: Tensor | None) -> Tensor:
        if self.plain:
            return F.linear(a, self.weight, bias)
        return _LinearFunction.apply(a, self.weight, bias, self)


class _LinearFunction(torch.autograd.Function):
    """``a Wᵀ + b`` with :class:`_Linear`'s products; gradients as ``F.linear``'s: ``δa = δy W``,
    ``δW = δyᵀ a`` (one product per call, on the backend measured for its shape), ``δb = Σ_rows
    δy``. Under ``create_graph`` the backward uses differentiable ops, so higher derivatives work
    as they do through ``F.linear``."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, weight: Tensor, bias: Tensor | None,
                products: _Linear) -> Tensor:
        ctx.save_for_backward(a, weight)
        ctx.products, ctx.has_bias = products, bias is not None
        return products.forward(a, add=bias)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        a, weight = ctx.saved_tensors
        need = ctx.needs_input_grad
        differentiable = torch.is_grad_enabled()        # create_graph
        da = dw = db = None
        if need[0]:
            p = ctx.products.backward
            if p is None or differentiable:
                da = grad.mm(weight)
            else:
                da = p(grad.contiguous())       # a sum's gradient arrives as a stride-0 view
        if need[1]:
            dw = grad.t().mm(a) if differentiable else matmul(grad.contiguous().t(), a)
        if need[2] and ctx.has_bias:
            db = grad.sum(0)
        return da, dw, db, None
