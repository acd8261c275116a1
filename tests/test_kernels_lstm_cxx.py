"""The LSTM's C++ loops (:mod:`treelm.kernels.lstm_cxx`), against PyTorch's own LSTM
(``torch.nn.LSTM`` with copied weights: values and every gradient within 1e-10 in float64, 1e-5
in float32, under each GEMM backend), float64 gradcheck, and the cell's dispatch: under CPU
bfloat16 autocast :class:`treelm.cells.lstm.LSTM` runs them (products in bfloat16, gates and
state in float32, within 2e-2 of float32 and close to its own step loop under autocast), without
autocast PyTorch's kernel, with peepholes the step loop. Skipped only without a C++ compiler."""

from __future__ import annotations

import os
import shutil

import pytest
import torch
import torch.nn.functional as F
from test_kernels_onlstm import _backend_params, _OpLog, forced_gemm  # noqa: F401 (a fixture)
from test_kernels_onlstm_cxx import count_calls, ext  # noqa: F401 (ext: the autouse fixture)
from torch import Tensor, nn

from treelm.cells.lstm import LSTM
from treelm.kernels import gemm
from treelm.kernels.lstm_cxx import CxxLSTMFunction, lstm_cxx_sequence

if shutil.which(os.environ.get("CXX", "c++")) is None:
    pytest.skip("no C++ compiler: the C++ LSTM loop cannot be built here", allow_module_level=True)


@pytest.fixture
def calls(ext, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:  # noqa: F811
    """Counts the LSTM loops' calls (so a test can tell which path ran)."""
    return count_calls(ext, monkeypatch, ("lstm_forward", "lstm_backward"))


BACKENDS = [p for p in _backend_params((torch.float32, torch.float64)) if p.values[0] == "cpu"]


def _torch_lstm(I: int, H: int, dtype: torch.dtype) -> nn.LSTM:
    torch.manual_seed(3)
    return nn.LSTM(I, H).to(dtype)


def _grads(loss: Tensor, tensors: list[Tensor]) -> list[Tensor]:
    return list(torch.autograd.grad(loss, tensors))


@pytest.mark.parametrize("device,dtype,forced_gemm", BACKENDS, indirect=["forced_gemm"])
@pytest.mark.parametrize("shape", [(1, 1, 3, 5), (6, 3, 4, 8), (9, 2, 7, 16)])
@pytest.mark.parametrize("carried", [False, True])
def test_matches_torch_lstm(shape, carried, device, dtype, forced_gemm) -> None:  # noqa: F811
    """Output, last state and the gradients of input, initial state and all four weights
    against ``torch.nn.LSTM``: each step's output and the last cell state both receive a
    gradient, as in a language model carrying its state."""
    T, B, I, H = shape
    ref = _torch_lstm(I, H, dtype)
    x = torch.randn(T, B, I, dtype=dtype, requires_grad=True)
    h0 = torch.randn(B, H, dtype=dtype, requires_grad=True) if carried else torch.zeros(
        B, H, dtype=dtype, requires_grad=True)
    c0 = torch.randn(B, H, dtype=dtype, requires_grad=True) if carried else torch.zeros(
        B, H, dtype=dtype, requires_grad=True)
    w_out, w_c = torch.randn(T, B, H, dtype=dtype), torch.randn(B, H, dtype=dtype)
    params = [ref.weight_ih_l0, ref.weight_hh_l0, ref.bias_ih_l0, ref.bias_hh_l0]

    out_r, (h_r, c_r) = ref(x, (h0.unsqueeze(0), c0.unsqueeze(0)))
    loss_r = (out_r * w_out).sum() + (c_r[0] * w_c).sum() + h_r.sum()
    got = lstm_cxx_sequence(x, (h0, c0), params[0], params[2], params[1], params[3])
    assert got is not None
    out, (h, c) = got
    loss = (out * w_out).sum() + (c * w_c).sum() + h.sum()
    tol = 1e-10 if dtype == torch.float64 else 1e-5
    for a, b in zip([out, h, c, *_grads(loss, [x, h0, c0, *params])],
                    [out_r, h_r[0], c_r[0], *_grads(loss_r, [x, h0, c0, *params])]):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)
    forced_gemm()


def test_function_gradcheck(calls: dict[str, int]) -> None:
    torch.manual_seed(1)
    T, B, H = 4, 3, 5
    kw = {"dtype": torch.float64, "requires_grad": True}
    xp = torch.randn(T, B, 4 * H, **kw)
    h0, c0 = torch.randn(B, H, **kw), torch.randn(B, H, **kw)
    w = (torch.randn(4 * H, H, dtype=torch.float64) * 0.4).requires_grad_()
    assert torch.autograd.gradcheck(lambda *a: CxxLSTMFunction.apply(*a, None),
                                    (xp, h0, c0, w), eps=1e-6, atol=1e-7)
    assert calls["lstm_backward"] > 0


def test_no_grad_forward_saves_nothing_and_matches(calls: dict[str, int]) -> None:
    """Inference (batch 1 included) is one forward call without saving, equal to PyTorch's."""
    ref = _torch_lstm(6, 10, torch.float64)
    params = [ref.weight_ih_l0, ref.bias_ih_l0, ref.weight_hh_l0, ref.bias_hh_l0]
    for B in (1, 4):
        x = torch.randn(7, B, 6, dtype=torch.float64)
        state = (torch.randn(B, 10, dtype=torch.float64), torch.randn(B, 10, dtype=torch.float64))
        with torch.no_grad():
            out, (h, c) = lstm_cxx_sequence(x, state, *params)
            out_r, (h_r, c_r) = ref(x, tuple(s.unsqueeze(0) for s in state))
        torch.testing.assert_close(out, out_r, atol=1e-10, rtol=1e-10)
        torch.testing.assert_close(c, c_r[0], atol=1e-10, rtol=1e-10)
    assert calls == {"lstm_forward": 2, "lstm_backward": 0}


def test_cell_dispatch(calls: dict[str, int]) -> None:
    """The C++ loop runs only under CPU autocast, and not for the peephole LSTM or
    ``impl="reference"``; DropConnect's weight comes in as ``weights["weight_hh"]``."""
    x = torch.randn(5, 2, 4)
    cell = LSTM(4, 6)
    cell(x)[0].sum().backward()
    assert calls == {"lstm_forward": 0, "lstm_backward": 0}        # float32: PyTorch's kernel
    for other in (LSTM(4, 6, peephole=True), LSTM(4, 6, impl="reference")):
        with torch.autocast("cpu", torch.bfloat16):
            other(x)[0].sum().backward()
    assert calls == {"lstm_forward": 0, "lstm_backward": 0}
    w = cell.weight_hh * 0.5
    with torch.autocast("cpu", torch.bfloat16):
        out, (h, c), aux = cell(x, weights={"weight_hh": w})
    assert out.dtype == h.dtype == c.dtype == torch.float32 and aux == {}
    out.sum().backward()
    assert calls == {"lstm_forward": 1, "lstm_backward": 1}
    ref = LSTM(4, 6, impl="reference")
    ref.load_state_dict(cell.state_dict())
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16):
        a = cell(x, weights={"weight_hh": w.detach()})[0]
        b = ref(x, weights={"weight_hh": w.detach()})[0]
    torch.testing.assert_close(a, b, atol=2e-3, rtol=2e-2)


def test_bf16_autocast_against_fp32_and_the_step_loop(calls: dict[str, int]) -> None:
    """Under bfloat16 autocast every matrix product has bfloat16 operands; the loss is within
    2e-2 of float32's and the gradients' cosine > 0.99. Against the cell's own step loop under
    autocast (the same products, but its pre-activations summed in bfloat16): gradients closer
    still, and outputs no farther from float32's than the loop's are."""
    T, B, I, H = 10, 4, 16, 32
    torch.manual_seed(0)
    cell = LSTM(I, H)
    loop = LSTM(I, H, impl="reference")
    loop.load_state_dict(cell.state_dict())
    x = torch.randn(T, B, I)
    w_out, w_c = torch.randn(T, B, H), torch.randn(B, H)

    def loss_and_grads(m: LSTM, low: bool) -> tuple[Tensor, Tensor, list[Tensor], _OpLog]:
        m.zero_grad()
        log = _OpLog()
        with log:
            with torch.autocast("cpu", torch.bfloat16, enabled=low):
                out, (h, c), _ = m(x)
                loss = (out * w_out).sum() + (c * w_c).sum()
            loss.backward()
        return out.detach(), loss.detach(), [p.grad.clone() for p in m.parameters()], log

    with gemm.use_backend("mm"):
        ref_out, ref_loss, ref_grads, _ = loss_and_grads(cell, False)
        low_out, low_loss, low_grads, log = loss_and_grads(cell, True)
        loop_out, _, loop_grads, _ = loss_and_grads(loop, True)
    assert calls == {"lstm_forward": 1, "lstm_backward": 1}
    products = {k for k in log.calls if k.split(".")[1] in ("mm", "addmm", "linear")}
    assert products and all(log.dtypes[k] == {torch.bfloat16} for k in products), {
        k: log.dtypes[k] for k in products}
    assert abs(low_loss - ref_loss) <= 2e-2 * abs(ref_loss)
    assert (low_out - ref_out).abs().max() <= (loop_out - ref_out).abs().max() * 1.1
    torch.testing.assert_close(low_out, loop_out, atol=3e-3, rtol=0)
    for a, b, c in zip(low_grads, ref_grads, loop_grads):
        assert F.cosine_similarity(a.flatten(), b.flatten(), 0) > 0.99
        assert F.cosine_similarity(a.flatten(), c.flatten(), 0) > 0.999


def test_not_applicable_returns_none() -> None:
    """Where the loop cannot run it says so (None) and the cell steps its loop instead."""
    x = torch.randn(3, 2, 4, dtype=torch.float16)
    w = [torch.randn(24, 4, dtype=torch.float16), torch.randn(24, dtype=torch.float16),
         torch.randn(24, 6, dtype=torch.float16), torch.randn(24, dtype=torch.float16)]
    state = (torch.zeros(2, 6, dtype=torch.float16),) * 2
    assert lstm_cxx_sequence(x, state, *w) is None
