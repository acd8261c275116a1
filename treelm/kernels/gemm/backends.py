"""Which GEMM backends this PyTorch build can run, which one is asked for (the overrides), and a
weight prepared for a product on each: the ground :mod:`treelm.kernels.gemm.choice` measures on.

``"mm"`` reads the operands as they are; ``"mkl"`` packs the weight once
(``_mkl_reorder_linear_weight``) for MKL's linear; ``"onednn"`` reorders it for oneDNN's linear
(or, for a single product, reads it as it is); ``"panel"`` packs it into column panels (32
columns in an AVX-512 build of treelm's extension, 16 otherwise: its ``panel_columns()``) for
treelm's own kernel for a few rows (``csrc/panel_gemm.cpp``: a time loop's per-step products at
batch 20, where the libraries' kernels reach about 60% of an AVX2 CPU's FMA peak), in float32,
and in bfloat16 where the extension is an AVX-512 build on a CPU with avx512_bf16 (its
``panel_bf16()``: oneDNN's bf16 linear ran the tree config's per-step products at 55-60% of a
Zen 5's vdpbf16ps peak, these at 86-91%: ``panel_tiles-zen5-bf16-20261129.json``), on AMX's
tiles where the CPU has amx_bf16 and Linux grants them (``panel_amx()``; the same panels).
The library ops are PyTorch internals, so their presence is probed, never assumed: a build
without them, or one that renamed them, runs ``"mm"``; ``"panel"`` is there where treelm's C++
extension loads (:mod:`treelm.kernels.build`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

# In order of preference on a near tie: the plain product needs no packing and is what the rest of
# PyTorch does; MKL packed is the older, well-trodden path.
# treelm's own panels last: the libraries' kernels win a near tie.
BACKENDS = ("mm", "mkl", "onednn", "panel")
CHOICES = ("auto", *BACKENDS)
ENV_VAR = "TREELM_GEMM"
REPEATS = 3              # timed rounds over the backends (the best per backend counts) ...
SLOW_CALL_S = 0.02       # ... or one round where a call takes longer than this (big products)
MIN_TIMED_S = 2e-4       # tiny products are timed in batches of calls lasting at least this long
TIE_MARGIN = 0.1         # a later backend must be more than 10% cheaper to displace an earlier one

#: Backends that always pack the weight before a product: their packing counts in a loop's cost,
#: and a single product never runs on them (packing for one product does not pay).
PACKING = ("mkl", "panel")

_DTYPES: dict[str, tuple[torch.dtype, ...]] = {
    "mkl": (torch.float32,),
    "onednn": (torch.float32, torch.bfloat16),
    "panel": (torch.float32,),   # and bfloat16 where the extension's panel_bf16() says so
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
        "panel": True,          # and treelm's C++ extension loaded: asked when first needed
    }


_AVAILABLE = _probe()


def _extension() -> Any:
    """treelm's C++ extension or ``None`` (:func:`treelm.kernels.build.load`: loaded, built on
    first use where ``make setup`` did not, or switched off); imported here, not at the top, as
    :mod:`treelm.kernels.sequence` does."""
    from treelm.kernels import build

    return build.load()


def available_backends() -> tuple[str, ...]:
    """Backends whose ops this PyTorch build (and, for ``"panel"``, treelm's C++ extension) has
    (``"mm"`` always)."""
    return tuple(b for b in BACKENDS
                 if _AVAILABLE[b] and (b != "panel" or _extension() is not None))


def usable_backends(dtype: torch.dtype, device: torch.device | str = "cpu") -> tuple[str, ...]:
    """Backends that can run a product of ``dtype`` on ``device`` (``"mm"`` always); oneDNN not
    while switched off with ``torch.backends.mkldnn.flags(enabled=False)``."""
    if torch.device(device).type != "cpu":
        return ("mm",)
    return tuple(b for b in available_backends() if b == "mm" or (
        (dtype in _DTYPES[b] or b == "panel" and dtype == torch.bfloat16
         and _extension().panel_bf16())
        and (b != "onednn" or torch.backends.mkldnn.enabled)))


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


def transpose_contiguous(w: Tensor, block: int = 256) -> Tensor:
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
    packed (or as it is, for a single product), ``packed`` is ``None``; ``"panel"``: ``packed``
    the panels and ``weight`` the ``(N, K)`` operand (or view) they were packed from."""

    backend: str
    weight: Tensor
    packed: Tensor | None
    batch: int

    def __call__(self, a: Tensor, bias: Tensor | None = None) -> Tensor:
        """``a Wᵀ`` (``+ bias``, a vector over the columns: oneDNN and MKL add it as the product
        is written, so a bias costs no pass of its own; the panels take none)."""
        if self.backend == "mkl":
            return torch.ops.mkl._mkl_linear(a, self.packed, self.weight, bias, self.batch)
        if self.backend == "panel":
            if bias is not None:
                raise ValueError("the panel product takes no bias")
            return _extension().panel_mm(a, self.packed, self.weight.shape[0])
        return torch.ops.mkldnn._linear_pointwise(a, self.weight, bias, "none", [], "")

    def takes_bias(self, bias: Tensor, a: Tensor) -> bool:
        """Whether :meth:`__call__` can add ``bias`` itself: a vector of ``a``'s dtype, on a
        library backend."""
        return (self.backend != "panel" and bias.dim() == 1 and bias.dtype == a.dtype
                and bias.is_contiguous())


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
    if backend == "panel":      # packs from any strides: no transposed copy first
        b = weight.t() if transpose else weight
        return Prepared(backend, b, _extension().panel_pack(b), batch)
    w = transpose_contiguous(weight) if transpose else weight.contiguous()
    if backend == "mkl":
        return Prepared(backend, w, torch.ops.mkl._mkl_reorder_linear_weight(w, batch), batch)
    if backend == "onednn":
        return Prepared(backend, torch.ops.mkldnn._reorder_linear_weight(w, batch), None, batch)
    raise ValueError(f"unknown GEMM backend {backend!r}")
