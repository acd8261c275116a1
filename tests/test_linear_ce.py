"""The output layer fused with its cross-entropy (treelm/nn/linear_ce.py) against
``F.cross_entropy(F.linear(h, W, b), y)``: float64 gradcheck, float32 equality, bf16 autocast
closeness, and the language model's loss through it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from treelm.models.lm import RNNLM
from treelm.nn.dropout import keep_mask
from treelm.nn.linear_ce import linear_cross_entropy


def _inputs(n: int, d: int, v: int, dtype: torch.dtype = torch.float32, bias: bool = True):
    g = torch.Generator().manual_seed(n * 31 + v)
    h = torch.randn(n, d, generator=g, dtype=dtype).requires_grad_()
    w = (torch.randn(v, d, generator=g, dtype=dtype) * 0.3).requires_grad_()
    b = torch.randn(v, generator=g, dtype=dtype).requires_grad_() if bias else None
    y = torch.randint(0, v, (n,), generator=g)
    return h, w, b, y


@pytest.mark.parametrize("block", [1, 5, 64])
def test_gradcheck_float64(block):
    h, w, b, y = _inputs(13, 6, 9, torch.float64)
    assert torch.autograd.gradcheck(
        lambda h, w, b: linear_cross_entropy(h, w, b, y, block=block), (h, w, b))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(("n", "d", "v", "block"), [
    (100, 16, 50, 32),          # blocks, the last one short
    (100, 16, 50, 4096),        # one block
    (256, 256, 300, 4096),      # one block on the measured backend (≥ 2²⁴ multiply-adds)
])
def test_float32_equals_cross_entropy_of_linear(bias, n, d, v, block):
    h, w, b, y = _inputs(n, d, v, bias=bias)
    ours = linear_cross_entropy(h, w, b, y, block=block)
    ours.backward()
    mine = [t.grad.clone() for t in (h, w, b) if t is not None]
    for t in (h, w, b):
        if t is not None:
            t.grad = None
    ref = F.cross_entropy(F.linear(h, w, b), y)
    ref.backward()
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-6)
    for a, t in zip(mine, [t for t in (h, w, b) if t is not None]):
        torch.testing.assert_close(a, t.grad, rtol=1e-5, atol=1e-6)


def test_bf16_autocast_is_close_to_float32():
    h, w, b, y = _inputs(300, 64, 500)
    ref = F.cross_entropy(F.linear(h, w, b), y)
    ref_grads = torch.autograd.grad(ref, (h, w, b))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = linear_cross_entropy(h, w, b, y, block=128)
    assert ours.dtype == torch.float32
    grads = torch.autograd.grad(ours, (h, w, b))
    assert abs(ours.item() / ref.item() - 1) < 2e-2
    for a, r in zip(grads, ref_grads):
        assert a.dtype == torch.float32
        assert F.cosine_similarity(a.flatten(), r.flatten(), dim=0) > 0.99


def test_language_model_loss_through_the_fused_layer_equals_the_logits_path():
    torch.manual_seed(0)
    model = RNNLM(40, "lstm", [8, 12, 8], tie_weights=True).eval()
    x, y = torch.randint(0, 40, (7, 3)), torch.randint(0, 40, (7, 3))
    fused = model(x, targets=y)
    assert fused.logits is None
    plain = model(x)
    ref = F.cross_entropy(plain.logits.reshape(-1, 40), y.reshape(-1))
    torch.testing.assert_close(fused.nll, ref, rtol=1e-6, atol=1e-6)
    g1 = torch.autograd.grad(fused.nll, list(model.parameters()))
    g2 = torch.autograd.grad(ref, list(model.parameters()))
    for a, r in zip(g1, g2):
        torch.testing.assert_close(a, r, rtol=1e-5, atol=1e-6)


def test_shapes_are_checked():
    h, w, b, y = _inputs(10, 4, 6)
    with pytest.raises(ValueError, match="target"):
        linear_cross_entropy(h, w, b, y[:5])


def test_keep_mask_keeps_one_minus_p_scaled():
    torch.manual_seed(0)
    m = keep_mask(torch.empty(0), (200_000,), 0.3)
    kept = (m > 0).float().mean().item()
    assert abs(kept - 0.7) < 0.005
    assert torch.allclose(m[m > 0], torch.tensor(1 / 0.7))
    assert abs(m.mean().item() - 1.0) < 0.01
