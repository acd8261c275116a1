"""Every cell against an independent reference: a PyTorch built-in with copied weights, a
hand-computed case or the paper's formula, and float64 gradcheck."""

import numpy as np
import pytest
import torch
from torch import nn

from treelm.cells import GRU, LSTM, MRNN, ONLSTM, Elman, Jordan, TensorRNN, make_cell
from treelm.cells.onlstm import cumax, onlstm_update, rcumax
from treelm.nn.stack import RNNStack

T, B, I, H = 6, 3, 5, 8


def _copy_torch(cell: nn.Module, ref: nn.Module) -> None:
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, name).copy_(getattr(ref, f"{name}_l0"))


@pytest.mark.parametrize("impl", ["auto", "reference"])
def test_lstm_equals_torch_lstm(impl):
    torch.manual_seed(0)
    ref = nn.LSTM(I, H)
    cell = LSTM(I, H, impl=impl)
    _copy_torch(cell, ref)
    x = torch.randn(T, B, I)
    h0, c0 = torch.randn(B, H), torch.randn(B, H)
    out, (h, c), _ = cell(x, (h0, c0))
    rout, (rh, rc) = ref(x, (h0[None], c0[None]))
    assert (out - rout).abs().max() <= 1e-5
    assert (h - rh[0]).abs().max() <= 1e-5 and (c - rc[0]).abs().max() <= 1e-5


@pytest.mark.parametrize("impl", ["auto", "reference"])
def test_gru_equals_torch_gru(impl):
    torch.manual_seed(1)
    ref = nn.GRU(I, H)
    cell = GRU(I, H, impl=impl)
    _copy_torch(cell, ref)
    x, h0 = torch.randn(T, B, I), torch.randn(B, H)
    out, (h,), _ = cell(x, (h0,))
    rout, rh = ref(x, h0[None])
    assert (out - rout).abs().max() <= 1e-5 and (h - rh[0]).abs().max() <= 1e-5


@pytest.mark.parametrize("impl", ["auto", "reference"])
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_elman_equals_torch_rnn(impl, nonlinearity):
    torch.manual_seed(2)
    ref = nn.RNN(I, H, nonlinearity=nonlinearity)
    cell = Elman(I, H, nonlinearity=nonlinearity, impl=impl)
    _copy_torch(cell, ref)
    x, h0 = torch.randn(T, B, I, requires_grad=True), torch.randn(B, H)
    out, (h,), _ = cell(x, (h0,))
    rout, rh = ref(x, h0[None])
    assert (out - rout).abs().max() <= 1e-5 and (h - rh[0]).abs().max() <= 1e-5
    g, = torch.autograd.grad(out.square().sum(), x)
    rg, = torch.autograd.grad(rout.square().sum(), x)
    assert (g - rg).abs().max() <= 1e-5


def test_elman_fused_equals_loop_with_dropconnect():
    """The fused kernel and the readable loop agree, DropConnect weights included."""
    torch.manual_seed(5)
    fused, loop = Elman(I, H), Elman(I, H, impl="reference")
    loop.load_state_dict(fused.state_dict())
    x, h0 = torch.randn(T, B, I), torch.randn(B, H)
    w = {"weight_hh": fused.weight_hh * (torch.rand(H, H) > 0.3) / 0.7}
    a, (ha,), _ = fused(x, (h0,), w)
    b, (hb,), _ = loop(x, (h0,), w)
    assert (a - b).abs().max() <= 1e-5 and (ha - hb).abs().max() <= 1e-5


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().numpy()


def _sig(v):
    return 1 / (1 + np.exp(-v))


def test_lstm_peephole_hand_computed():
    """Gers 2002 equations written out in numpy, step by step."""
    torch.manual_seed(3)
    cell = LSTM(I, H, peephole=True).double()
    x = torch.randn(T, B, I, dtype=torch.float64)
    out, (h_last, c_last), _ = cell(x)
    Wi, Wh, bi, bh, P = (_np(p) for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih,
                                           cell.bias_hh, cell.weight_peep))
    h, c = np.zeros((B, H)), np.zeros((B, H))
    for t in range(T):
        z = _np(x[t]) @ Wi.T + bi + h @ Wh.T + bh
        zi, zf, zg, zo = np.split(z, 4, axis=1)
        i = _sig(zi + P[0] * c)
        f = _sig(zf + P[1] * c)
        c = f * c + i * np.tanh(zg)
        o = _sig(zo + P[2] * c)
        h = o * np.tanh(c)
        assert np.abs(_np(out[t]) - h).max() < 1e-12
    assert np.abs(_np(c_last) - c).max() < 1e-12


def test_lstm_peephole_zero_equals_plain():
    torch.manual_seed(4)
    ref = nn.LSTM(I, H)
    cell = LSTM(I, H, peephole=True)
    _copy_torch(cell, ref)
    with torch.no_grad():
        cell.weight_peep.zero_()
    x = torch.randn(T, B, I)
    assert (cell(x)[0] - ref(x)[0]).abs().max() <= 1e-5


def test_jordan_hand_computed():
    """h_t = σ(W x_t + U y_{t-1} + b), y_t = tanh(V h_t + c): recurrence through the output."""
    torch.manual_seed(5)
    cell = Jordan(I, H, output_size=4).double()
    x = torch.randn(T, B, I, dtype=torch.float64)
    out, (y_last,), _ = cell(x)
    assert out.shape == (T, B, 4)
    W, U, b, V, c = (_np(p) for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih,
                                       cell.weight_ho, cell.bias_ho))
    y = np.zeros((B, 4))
    for t in range(T):
        h = _sig(_np(x[t]) @ W.T + y @ U.T + b)
        y = np.tanh(h @ V.T + c)
        assert np.abs(_np(out[t]) - y).max() < 1e-12


def test_mrnn_formula_and_parameter_count():
    """Sutskever et al. 2011 Eqs. 4-5 on one-hot inputs; F·(M + 2H) + H·M + H parameters."""
    M, Hh, Fn = 7, 6, 5
    torch.manual_seed(6)
    cell = MRNN(M, Hh, factors=Fn).double()
    assert sum(p.numel() for p in cell.parameters()) == Fn * (M + 2 * Hh) + Hh * M + Hh
    sym = torch.randint(0, M, (T, B))
    x = torch.eye(M, dtype=torch.float64)[sym]
    out, _, _ = cell(x)
    Wfx, Wfh, Whf, Whx, b = (_np(p) for p in (cell.weight_fx, cell.weight_hh, cell.weight_hf,
                                               cell.weight_hx, cell.bias))
    h = np.zeros((B, Hh))
    for t in range(T):
        xt = _np(x[t])
        f = (xt @ Wfx.T) * (h @ Wfh.T)           # diag(W_fx x_t) · W_fh h_{t-1}
        h = np.tanh(f @ Whf.T + xt @ Whx.T + b)
        assert np.abs(_np(out[t]) - h).max() < 1e-12


def test_tensor_rnn_one_matrix_per_symbol():
    M, Hh = 4, 5
    torch.manual_seed(7)
    cell = TensorRNN(M, Hh).double()
    assert cell.weight_hh.numel() == M * Hh * Hh
    sym = torch.randint(0, M, (T, B))
    x = torch.eye(M, dtype=torch.float64)[sym]
    out, _, _ = cell(x)                                  # one-hot: gather path
    dense_out, _, _ = cell(x + 0.0 * torch.rand_like(x).round())  # still one-hot values
    assert torch.equal(out, dense_out)
    W, Wx, b = _np(cell.weight_hh), _np(cell.weight_ih), _np(cell.bias)
    h = np.zeros((B, Hh))
    for t in range(T):
        rec = np.stack([W[sym[t, j]] @ h[j] for j in range(B)])
        h = np.tanh(_np(x[t]) @ Wx.T + rec + b)
        assert np.abs(_np(out[t]) - h).max() < 1e-12
    # a dense (mixed) input uses the mixture Σ_m x_m W^(m)
    xm = torch.rand(1, B, M, dtype=torch.float64)
    o, _, _ = cell(xm)
    mix = np.einsum("bm,mij->bij", _np(xm[0]), W)
    ref = np.tanh(_np(xm[0]) @ Wx.T + b + np.einsum("bij,bj->bi", mix, np.zeros((B, Hh))))
    assert np.abs(_np(o[0]) - ref).max() < 1e-12


def test_tensor_rnn_refuses_huge():
    with pytest.raises(ValueError, match="M·H²"):
        TensorRNN(1000, 1000)


# ------------------------------------------------------------------ ON-LSTM

def test_cumax_monotone_in_unit_interval():
    torch.manual_seed(8)
    x = torch.randn(50, 37) * 5
    for v, sign in ((cumax(x), 1), (rcumax(x), -1)):
        assert v.min() >= 0 and v.max() <= 1 + 1e-6
        assert (sign * v.diff(dim=-1) >= -1e-7).all()
    assert torch.allclose(cumax(x)[:, -1], torch.ones(50))
    assert torch.allclose(rcumax(x)[:, 0], torch.ones(50))


def _onehot_logits(pos: int, L: int) -> torch.Tensor:
    v = torch.full((1, L), -80.0, dtype=torch.float64)
    v[0, pos] = 80.0
    return v


@pytest.mark.parametrize("a,b", [(1, 4), (2, 2), (4, 1), (0, 5), (3, 0)])
def test_onlstm_piecewise_update(a, b):
    """Master logits one-hot: f̃ = 1 on levels ≥ a, ĩ (paper) = 1 on levels < b.
    d_f ≤ d_i: low levels take ĉ, the overlap an LSTM update, high levels keep c_{t-1};
    d_f > d_i: low from ĉ, the gap is zeroed, high from c_{t-1}."""
    L, cs = 6, 3
    Hh = L * cs
    torch.manual_seed(9)
    gates = torch.randn(1, 4 * Hh + 2 * L, dtype=torch.float64)
    gates[:, :L] = _onehot_logits(b, L)          # master input logits
    gates[:, L : 2 * L] = _onehot_logits(a, L)   # master forget logits
    c_prev = torch.randn(1, Hh, dtype=torch.float64)
    h, c, df, di = onlstm_update(gates, c_prev, L, "paper")
    o, g, i, f = gates[:, 2 * L :].view(4, Hh)
    g, i, f = torch.tanh(g), torch.sigmoid(i), torch.sigmoid(f)
    lvl = torch.arange(Hh) // cs
    expect = torch.where(lvl < min(a, b), g, 0.0)
    mid = (lvl >= a) & (lvl < b)
    expect = torch.where(mid, f * c_prev[0] + i * g, expect)
    expect = torch.where(lvl >= max(a, b), c_prev[0], expect)
    assert torch.allclose(c[0], expect, atol=1e-12)
    assert torch.allclose(h[0], torch.sigmoid(o) * torch.tanh(c[0]), atol=1e-12)
    assert df.item() == pytest.approx(a / L) and di.item() == pytest.approx(b / L)


def test_paper_gate_never_writes_top_chunk_symmetric_can():
    L, cs = 5, 2
    Hh = L * cs
    torch.manual_seed(10)
    gates = torch.randn(64, 4 * Hh + 2 * L, dtype=torch.float64) * 4
    c_prev = torch.randn(64, Hh, dtype=torch.float64)
    _, c, _, _ = onlstm_update(gates, c_prev, L, "paper")
    assert torch.allclose(c[:, -cs:], c_prev[:, -cs:], atol=1e-12)
    gates[:, :L] = _onehot_logits(L - 1, L)      # symmetric: ĩ = 1 on every level ≤ L-1
    _, c2, _, di = onlstm_update(gates, c_prev, L, "symmetric")
    assert (c2[:, -cs:] - c_prev[:, -cs:]).abs().max() > 1e-3
    assert torch.allclose(di, torch.ones(64, dtype=torch.float64))


def test_onlstm_cell_levels_shape_and_range():
    cell = ONLSTM(I, 12, chunk_size=3, impl="reference")
    out, (h, c), aux = cell(torch.randn(T, B, I))
    assert out.shape == (T, B, 12) and aux["df"].shape == (T, B) == aux["di"].shape
    assert ((aux["df"] >= 0) & (aux["df"] <= 1)).all()


def test_onlstm_rejects_bad_options():
    with pytest.raises(ValueError, match="multiple of chunk_size"):
        ONLSTM(4, 10, chunk_size=3)
    with pytest.raises(ValueError, match="master_input"):
        ONLSTM(4, 10, chunk_size=5, master_input="nope")


# ------------------------------------------------------------------ gradcheck (float64)

CELL_CASES = [
    ("elman", {}), ("jordan", {"output_size": 3}), ("lstm", {"impl": "reference"}),
    ("lstm", {"peephole": True}), ("gru", {"impl": "reference"}),
    ("onlstm", {"chunk_size": 2, "impl": "reference"}),
    ("onlstm", {"chunk_size": 2, "master_input": "symmetric", "impl": "reference"}),
    ("mrnn", {"factors": 3}), ("tensor", {}),
]


@pytest.mark.parametrize("name,opts", CELL_CASES, ids=lambda v: str(v))
def test_gradcheck(name, opts):
    torch.manual_seed(11)
    cell = make_cell(name, 3, 4, **opts).double()
    x = torch.randn(3, 2, 3, dtype=torch.float64, requires_grad=True)
    state = tuple(torch.randn(2, n, dtype=torch.float64, requires_grad=True)
                  for n in cell.state_sizes())
    params = list(cell.parameters())

    def f(x, *args):
        st = args[: len(state)]
        out, fin, aux = cell(x, st)
        return (out, *fin, *aux.values())

    assert torch.autograd.gradcheck(f, (x, *state), eps=1e-6, atol=1e-6)
    # parameters too: perturb through a functional call
    names = [n for n, _ in cell.named_parameters()]

    def g(*ps):
        out, _, _ = torch.func.functional_call(cell, dict(zip(names, ps)), (x.detach(),))
        return out

    assert torch.autograd.gradcheck(g, tuple(p.detach().requires_grad_() for p in params),
                                    eps=1e-6, atol=1e-6)


def test_stack_per_layer_sizes():
    stack = RNNStack("onlstm", [8, 20, 20, 8], cell_options={"chunk_size": 4})
    res = stack(torch.randn(5, 2, 8))
    assert res.out.shape == (5, 2, 8)
    assert [s[0].shape[1] for s in res.states] == [20, 20, 8]
    assert len(res.aux) == 3 and all(a["df"].shape == (5, 2) for a in res.aux)
    # the final state carried in continues the sequence exactly
    x = torch.randn(10, 2, 8)
    stack.eval()
    full = stack(x).out
    first = stack(x[:4])
    second = stack(x[4:], first.states)
    assert torch.allclose(torch.cat([first.out, second.out]), full, atol=1e-6)
