"""Choosing a GEMM backend for a product shape by measuring the candidates, and remembering it.

The first product of a shape (per operand layout, dtype, device and thread count: a
:class:`ShapeKey`) times every usable backend in turns and keeps a :class:`Measurement`; the
backend minimising ``pack + steps · call`` is the :class:`Decision`, near ties going to the
simpler one. Measurements are cached for the process and can travel in a checkpoint
(:func:`measurements`, :func:`restore_measurements`), so that a resumed run chooses, and rounds,
as before without measuring again.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

import treelm.kernels.gemm.backends as backends
from treelm.kernels.gemm.backends import (
    BACKENDS,
    PACKING,
    Product,
    requested_backend,
    usable_backends,
)

_log = logging.getLogger("treelm.kernels.gemm")

REPEATS = 3              # timed rounds over the backends (the best per backend counts) ...
LOOP_REPEATS = 7         # ... for a loop's product: its choice serves every step, and a loop's
                         # products are small (a round of four backends takes a few ms); on a
                         # noisy VM three rounds left the paper size's backward a coin toss
SLOW_CALL_S = 0.02       # ... or one round where a call takes longer than this (big products)
MIN_TIMED_S = 2e-4       # tiny products are timed in batches of calls lasting at least this long
TIE_MARGIN = 0.1         # a later backend must be more than 10% cheaper to displace an earlier one
# ... in a time loop more than 5%: there the panels' lead over oneDNN was larger in the loop than
# alone. On 2 Zen 5 cores at the paper's size the forward's panels measured 7% cheaper alone and
# lost to oneDNN under 10%, and the fused pass took 184 ms against 162-178 on panels
# (cells-zen5-paper-after-20261129.json); forced, the loop's products gave 161.7 ms a pass on
# panels and 173.1 on oneDNN (benchmarks/loop_backends.py, loop_backends-zen5-20261129.json)
LOOP_TIE_MARGIN = 0.05

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
        :data:`TIE_MARGIN` (:data:`LOOP_TIE_MARGIN` for a loop's ``steps > 1``)."""
        order = [b for b in BACKENDS if b in self.call_ms and b in among]
        low = min(self.cost(b, steps) for b in order)
        margin = TIE_MARGIN if steps <= 1 else LOOP_TIE_MARGIN
        return next(b for b in order if self.cost(b, steps) <= low * (1 + margin))


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
    ``MIN_TIMED_S``. Then :data:`REPEATS` rounds (:data:`LOOP_REPEATS` for a loop's product;
    one where a call is slower than ``SLOW_CALL_S``) time every backend in turn, the best per
    backend counting: taking turns means
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
                packs = backend in PACKING or (backend == "onednn" and not once)
                for _ in range(2 if packs else 1):
                    fn = None                   # free the previous packing first
                    t0 = time.perf_counter()
                    fn = backends._prepare(backend, weight, batch, transpose, once)
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
        for _ in range(1 if slowest > SLOW_CALL_S else REPEATS if once else LOOP_REPEATS):
            for backend, fn in products.items():
                t = _timed(fn, a, calls[backend]) * 1e3
                result.call_ms[backend] = min(result.call_ms[backend], t)
    return result, products


def size_class(n: int) -> int:
    """``n`` rounded up to a power of two: single products whose sizes differ only in the
    length of a batch (the input projection over ``T·B`` rows, the weight gradient over ``T·B``
    terms) share one measurement, where every new sequence length would otherwise be measured
    anew (ListOps, tagging and translation batches come in dozens of lengths)."""
    return 1 << (n - 1).bit_length() if n > 1 else n


def _decide(weight: Tensor, batch: int, transpose: bool, steps: int, a_t: bool
            ) -> tuple[ShapeKey, Decision, dict[str, Product]]:
    n, k = (weight.shape[1], weight.shape[0]) if transpose else weight.shape
    once = steps <= 1
    m = batch
    if once:            # a loop's shapes are fixed for the sequence: measured exactly
        m, k = size_class(m), size_class(k)
    key = ShapeKey(m, k, n, transpose, a_t, _colmajor(weight), once,
                   str(weight.dtype).removeprefix("torch."), weight.device.type,
                   torch.get_num_threads())
    wanted = requested_backend()
    usable = usable_backends(weight.dtype, weight.device)
    products: dict[str, Product] = {}
    if wanted != "auto":
        backend, how = (wanted, "forced") if wanted in usable else ("mm", "fallback")
    else:
        if once:                        # packing a weight for one product does not pay
            usable = tuple(b for b in usable if b not in PACKING)
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
