"""The output layer and its cross-entropy in one pass, a block of rows at a time.

    z_n = W h_n + b                       (V,) logits of row n, W (V, D), b (V,)
    ℓ   = 1/N Σ_n [ logsumexp(z_n) − z_n[y_n] ]
    G   = ∂(N ℓ)/∂z = softmax(z) − onehot(y)     (N, V): the only thing the backward needs of z
    ∂ℓ/∂h = G W / N,   ∂ℓ/∂W = Gᵀ h / N,   ∂ℓ/∂b = Σ_n G_n / N

Why: ``F.cross_entropy(head(h))`` writes the (N, V) logits, then their float32 copy, the log-
softmax, and in the backward a zero-filled (N, V) gradient, the log-softmax gradient and its cast:
six passes over N·V floats (90 MB each for a PTB batch of 64 × 35 rows and 10,000 words), which
cost as much as the output layer's three products once those run in bfloat16. Here the forward
writes the logits' product straight into G's rows, stored once in the products' dtype, and turns
them into G in place; the backward is the two products above. On the CPU the softmax, the loss,
G and the bias gradient are one C++ pass per row (:mod:`treelm.kernels.softmax_ce`; elsewhere
the same equations in PyTorch).

Blocks: the product is made ``block`` rows at a time. Small blocks would keep each block's
logits in cache for the softmax pass, but on the CPU they slow the product more than that saves:
on 2 Zen 4 cores, training steps of ``ptb-onlstm-cpu`` taking turns, float32 steps were faster
with one block per batch than with blocks of 256 rows and bfloat16 steps the same. So the
default block holds a whole batch of the shipped configs.

Precision: under bfloat16 autocast the products take bfloat16 operands (as ``nn.Linear`` would);
the logits are brought to float32 before the bias, the log-softmax and the loss, which are float32;
G is stored in bfloat16, as autocast's own backward of the logits would be. In float32 the numbers
are ``F.cross_entropy(F.linear(h, W, b), y)``'s (``tests/test_linear_ce.py``).

Float32 products (above :data:`MEASURED_MACS`) run on the GEMM backend measured fastest for
their shape (:func:`treelm.kernels.gemm.matmul`), not always ``torch.mm``'s: MKL's sgemm, which
``torch.mm`` calls on x86, runs its AVX2 code on an AMD CPU with AVX-512, where oneDNN runs
AVX-512. On a Zen 5 the head's (1400×400)·(400×2001) ran at 50 GMAC/s a core in ``torch.mm`` and
120 in oneDNN (``benchmarks/gemm_backends.py``, ``gemm_backends-zen5-20261128.json``). Where the
libraries are even (an Intel CPU, an AVX2 one) the measurement keeps ``torch.mm``. bfloat16
products stay ``torch.mm``'s (oneDNN's already).
"""

from __future__ import annotations

import torch
from torch import Tensor

from treelm.kernels import gemm
from treelm.kernels.softmax_ce import softmax_ce_rows

BLOCK = 4096         # rows of logits per product: a whole batch of every shipped config


def _operand_dtype(h: Tensor) -> torch.dtype:
    """bfloat16 under bfloat16 autocast on ``h``'s device, else ``h``'s dtype."""
    kind = h.device.type
    if torch.is_autocast_enabled(kind) and torch.get_autocast_dtype(kind) == torch.bfloat16:
        return torch.bfloat16
    return h.dtype


#: Float32 products of at least this many multiply-adds go through the measured choice; smaller
#: ones stay ``torch.mm``'s: timed in microseconds, their backends tie within the noise, and a
#: choice that flips between processes would round two runs of one seed differently
MEASURED_MACS = 1 << 24


def measured(a: Tensor, b: Tensor) -> bool:
    """Whether ``a @ b`` takes the measured backend: float32 and at least :data:`MEASURED_MACS`."""
    return a.dtype == torch.float32 and a.shape[0] * a.shape[1] * b.shape[-1] >= MEASURED_MACS


def _mm(a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
    """``a @ b`` (into ``out``): on the backend measured fastest where :func:`measured`, else
    ``torch.mm``."""
    return gemm.matmul(a, b, out=out) if measured(a, b) else torch.mm(a, b, out=out)


def _rows_torch(z: Tensor, bias: Tensor | None, target: Tensor, grad_bias: Tensor | None,
                acc: torch.dtype) -> Tensor:
    """The block's summed loss, its gradient G written over ``z``: the C++ kernel's equations
    (:mod:`treelm.kernels.softmax_ce`) in PyTorch, for where it does not apply."""
    u = z.to(acc)
    if bias is not None:
        u = u + bias
    logp = torch.log_softmax(u, dim=1)
    t = target.unsqueeze(1)
    loss = -logp.gather(1, t).sum(dtype=torch.float64)
    p = logp.exp_()                                   # softmax, in place
    p.scatter_add_(1, t, p.new_full(t.shape, -1.0))   # − onehot(y)
    if grad_bias is not None:
        grad_bias += p.sum(0)
    z.copy_(p)
    return loss


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor,
                dtype: torch.dtype, block: int) -> Tensor:
        hc, wc = h.to(dtype), weight.to(dtype)
        acc = torch.float64 if dtype == torch.float64 else torch.float32   # logits and loss
        n, v = h.size(0), weight.size(0)
        target = target.to(torch.int64).contiguous()
        grad_z = torch.empty(n, v, dtype=dtype, device=h.device)
        grad_b = torch.zeros(v, dtype=acc, device=h.device) if bias is not None else None
        total = torch.zeros((), dtype=torch.float64, device=h.device)
        b = None if bias is None else bias.to(acc).contiguous()     # once, not per block
        for lo in range(0, n, block):
            hi = min(lo + block, n)
            z = _mm(hc[lo:hi], wc.t(), out=grad_z[lo:hi])       # G's rows, overwritten
            loss = softmax_ce_rows(z, b, target[lo:hi], grad_b)
            total += _rows_torch(z, b, target[lo:hi], grad_b, acc) if loss is None else loss
        ctx.save_for_backward(hc, wc, grad_z, grad_b)
        ctx.n, ctx.dtypes = n, (h.dtype, weight.dtype)
        return (total / n).to(acc)

    @staticmethod
    def backward(ctx, grad_out: Tensor):  # type: ignore[override]
        hc, wc, grad_z, grad_b = ctx.saved_tensors
        scale = grad_out / ctx.n
        h_dtype, w_dtype = ctx.dtypes
        grad_h = grad_w = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_h = (_mm(grad_z, wc).to(scale.dtype) * scale).to(h_dtype)
        if ctx.needs_input_grad[1]:
            grad_w = (_mm(grad_z.t(), hc).to(scale.dtype) * scale).to(w_dtype)
        if grad_b is not None and ctx.needs_input_grad[2]:
            grad_bias = (grad_b * scale).to(grad_b.dtype)
        return grad_h, grad_w, grad_bias, None, None, None


def linear_cross_entropy(h: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor,
                         block: int = BLOCK) -> Tensor:
    """Mean cross-entropy of ``F.linear(h, weight, bias)`` (rows of ``h``: (N, D)) against
    ``target`` (N,), without keeping the (N, V) logits; see the module docstring."""
    if h.dim() != 2 or target.shape != h.shape[:1]:
        raise ValueError(f"linear_cross_entropy: h (N, D) and target (N,), got "
                         f"{tuple(h.shape)} and {tuple(target.shape)}")
    dtype = _operand_dtype(h)
    with torch.autocast(h.device.type, enabled=False):
        return _LinearCrossEntropy.apply(h, weight, bias, target, dtype, block)
