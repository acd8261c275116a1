"""The products on the chosen backends: :class:`FixedMatmul` and :class:`CastMatmul` for
hand-written forward and backward passes (the fused ON-LSTM's), :func:`matmul` for one product,
and :func:`linear`, ``F.linear`` with its gradients, for autograd code inside a time :func:`loop`.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

import treelm.kernels.gemm.backends as backends
import treelm.kernels.gemm.choice as choice
from treelm.kernels.gemm.backends import Prepared, Product
from treelm.kernels.gemm.choice import Decision, _colmajor
from treelm.kernels.precision import autocasting


class FixedMatmul:
    """``a (B, K) -> a @ Wᵀ`` (or ``a @ W`` with ``transpose``) for one ``W`` used ``steps``
    times, on the backend chosen for this shape (see the module docstring). ``a_t``: the left
    operands will be transposed views (column-major), as a weight gradient's ``δyᵀ`` is.

    Not differentiable (the packed ops have no autograd formula): for hand-written forward and
    backward passes such as :mod:`treelm.kernels.onlstm_torch`.
    """

    def __init__(self, weight: Tensor, batch: int, transpose: bool = False, steps: int = 1,
                 a_t: bool = False) -> None:
        self.rhs = weight if transpose else weight.t()     # (K, N) for torch.mm
        key, decision, products = choice._decide(weight, batch, transpose, steps, a_t)
        self.product: Product | None = None
        if decision.backend != "mm":
            fn = products.get(decision.backend)
            if fn is None:
                try:
                    with torch.no_grad():   # preparing is not part of any graph
                        fn = backends._prepare(decision.backend, weight, batch, transpose, key.once)
                except RuntimeError:    # e.g. a forced backend this dtype or CPU cannot run
                    decision = Decision("mm", "fallback", decision.requested)
            self.product = fn
        self.backend = decision.backend
        # a call with out= writes there and allocates nothing (torch.mm); a packed CPU product
        # returns its own fresh result, which is then copied
        self.in_place = self.product is None
        choice._note(key, steps, decision)

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
        p = self.product
        if add is not None and out is None and isinstance(p, Prepared) and p.takes_bias(add, a):
            return p(a, bias=add)       # the bias added as the product is written: no pass
        r = p(a)
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


def step_matmul(weight: Tensor, batch: int, steps: int, transpose: bool,
                dtype: torch.dtype | None) -> FixedMatmul | CastMatmul:
    """A time loop's product by ``weight`` (``a Wᵀ``, or ``a W`` with ``transpose``), in ``dtype``
    when that is set and not the weight's (autocast inside a hand-written pass)."""
    if dtype is None or dtype == weight.dtype:
        return FixedMatmul(weight, batch, transpose=transpose, steps=steps)
    return CastMatmul(weight, batch, dtype, transpose=transpose, steps=steps)


def cast_linear(a: Tensor, weight: Tensor, bias: Tensor, dtype: torch.dtype) -> Tensor:
    """``F.linear(a, weight, bias)`` under autocast to ``dtype``, without autograd (evaluation,
    parsing): oneDNN's linear on the cast operands where it takes ``dtype`` (the same bits:
    float32 sums, the bias added and the result rounded once), else ``F.linear`` itself.

    Why: autocast's ``F.linear`` is an ``addmm``, which first writes the bias into every row of
    the output and then adds the product to it, a pass over the output that oneDNN's linear,
    adding the bias as it writes, does not make."""
    with torch.no_grad():
        if not (a.device.type == "cpu" and "onednn" in backends.usable_backends(dtype)):
            with torch.autocast(a.device.type, dtype=dtype):
                return F.linear(a, weight, bias)
        rows = a.reshape(-1, a.shape[-1]).to(dtype)
        product = backends._prepare("onednn", weight.to(dtype), rows.shape[0], False, once=True)
        return product(rows, bias.to(dtype)).view(*a.shape[:-1], -1)


def matmul(a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
    """``a @ b`` for 2-D ``a`` (M, K), ``b`` (K, N), a single product on the backend measured
    fastest for its shape and layouts (a weight gradient ``δyᵀ · x``, say), written into ``out``
    when given. Not differentiable."""
    return FixedMatmul(b, a.shape[0], transpose=True, a_t=_colmajor(a))(a, out=out)


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
