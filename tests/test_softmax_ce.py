"""The output layer's softmax cross-entropy by rows in C++ (treelm/kernels/csrc/softmax_ce.cpp)
against the same equations in PyTorch (``treelm.nn.linear_ce._rows_torch``, itself checked
against ``F.cross_entropy`` in tests/test_linear_ce.py), and the fused output layer with and
without it."""

from __future__ import annotations

import pytest
import torch
from test_kernels_onlstm_cxx import count_calls, ext  # noqa: F401 (ext: the autouse fixture)

from treelm.nn import linear_ce
from treelm.nn.linear_ce import linear_cross_entropy

# (logits dtype, accumulation dtype, tolerance on the gradient, on the loss relative)
DTYPES = [(torch.float64, torch.float64, 1e-14, 1e-14),
          (torch.float32, torch.float32, 1e-6, 1e-6),
          (torch.bfloat16, torch.float32, 2 ** -8, 1e-6)]


def _block(rows: int, v: int, dtype: torch.dtype, acc: torch.dtype, scale: float = 4.0):
    g = torch.Generator().manual_seed(rows * 7 + v)
    z = (torch.randn(rows, v, generator=g, dtype=torch.float64) * scale).to(dtype)
    b = torch.randn(v, generator=g, dtype=acc)
    y = torch.randint(0, v, (rows,), generator=g)
    return z, b, y


@pytest.mark.parametrize("dtype,acc,tol,ltol", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("v", [1, 15, 16, 1003])
def test_rows_match_the_torch_equations(ext, dtype, acc, tol, ltol, bias, v):  # noqa: F811
    z, b, y = _block(37, v, dtype, acc)
    b = b if bias else None
    z_cxx, z_ref = z.clone(), z.clone()
    gb_cxx, gb_ref = (torch.full((v,), 0.5, dtype=acc) for _ in range(2))   # δb is added to
    loss = ext.softmax_ce_rows(z_cxx, b, y, gb_cxx if bias else None)
    ref = linear_ce._rows_torch(z_ref, b, y, gb_ref if bias else None, acc).item()
    assert abs(loss - ref) <= ltol * max(1.0, abs(ref))
    torch.testing.assert_close(z_cxx.to(acc), z_ref.to(acc), rtol=0, atol=tol)
    if dtype == torch.bfloat16:       # both round the same float32 numbers to nearest even
        assert (z_cxx != z_ref).float().mean() < 1e-3
    if bias:
        torch.testing.assert_close(gb_cxx, gb_ref, rtol=0, atol=40 * tol)


def test_rows_are_a_softmax_minus_onehot_by_hand(ext):  # noqa: F811
    z = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0]])
    y = torch.tensor([2, 0])
    e = torch.tensor([1.0, 2.0, 3.0, 4.0]).exp()
    p = e / e.sum()
    loss = ext.softmax_ce_rows(z, None, y, None)
    assert loss == pytest.approx(torch.log(torch.tensor(4.0)).item() + (e.sum().log() - 1).item(),
                                 rel=1e-6)
    torch.testing.assert_close(z[0], torch.tensor([0.25, 0.25, -0.75, 0.25]))
    torch.testing.assert_close(z[1], p - torch.tensor([1.0, 0, 0, 0]))


def test_threads_split_the_rows_and_sum_the_same(ext):  # noqa: F811
    z, b, y = _block(301, 2000, torch.float32, torch.float32, scale=30.0)
    out = []
    threads = torch.get_num_threads()
    try:
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            zc, gb = z.clone(), torch.zeros(2000)
            out.append((ext.softmax_ce_rows(zc, b, y, gb), zc, gb))
    finally:
        torch.set_num_threads(threads)
    for loss, zc, gb in out[1:]:
        assert loss == pytest.approx(out[0][0], rel=1e-12)
        assert torch.equal(zc, out[0][1])
        torch.testing.assert_close(gb, out[0][2], rtol=1e-6, atol=1e-5)


def test_bad_arguments_are_refused(ext):  # noqa: F811
    z, b, y = _block(4, 10, torch.float32, torch.float32)
    with pytest.raises(RuntimeError, match="target out of range"):
        ext.softmax_ce_rows(z.clone(), b, torch.tensor([0, 1, 2, 10]), None)
    with pytest.raises(RuntimeError, match="bias has dtype"):
        ext.softmax_ce_rows(z.clone(), b.double(), y, None)
    with pytest.raises(RuntimeError, match="contiguous"):
        ext.softmax_ce_rows(z.t(), None, y, None)
    with pytest.raises(RuntimeError, match="expected float32, float64 or bfloat16"):
        ext.softmax_ce_rows(z.half(), None, y, None)


@pytest.mark.parametrize("autocast", [False, True])
def test_linear_cross_entropy_is_the_same_without_the_kernel(ext, monkeypatch, autocast):  # noqa: F811
    g = torch.Generator().manual_seed(3)
    h = torch.randn(300, 32, generator=g).requires_grad_()
    w = (torch.randn(700, 32, generator=g) * 0.3).requires_grad_()
    b = torch.randn(700, generator=g).requires_grad_()
    y = torch.randint(0, 700, (300,), generator=g)
    calls = count_calls(ext, monkeypatch, ("softmax_ce_rows",))

    def run() -> list[torch.Tensor]:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = linear_cross_entropy(h, w, b, y, block=64)
        return [loss.detach(), *torch.autograd.grad(loss, (h, w, b))]

    fused = run()
    assert calls["softmax_ce_rows"] == 5                    # ⌈300 / 64⌉ blocks
    monkeypatch.setattr(linear_ce, "softmax_ce_rows", lambda *a: None)
    plain = run()
    assert calls["softmax_ce_rows"] == 5
    for a, r in zip(fused, plain):
        torch.testing.assert_close(a, r, rtol=1e-5, atol=1e-6)
