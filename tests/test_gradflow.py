"""Gradient flow through time (``treelm.analysis.gradflow``) and the ``gradflow`` verb."""

import csv

import pytest
import torch
import torch.nn.functional as F

from treelm.analysis.gradflow import (
    elman_bounds,
    fresh_model,
    grad_flow,
    random_batch,
)
from treelm.cli import main

V, H, T, B = 7, 6, 15, 4


def _linear_elman(w_hh: torch.Tensor):
    """Elman with linear activation, W_ih = 0, no biases: h_t = W_hh h_{t-1}."""
    model = fresh_model("elman", V, H, seed=0, cell_options={"nonlinearity": "linear"})
    cell = model.layer_cells()[0]
    with torch.no_grad():
        cell.weight_hh.copy_(w_hh)
        cell.weight_ih.zero_()
        cell.bias_ih.zero_()
        cell.bias_hh.zero_()
    return model


def test_identity_recurrence_keeps_the_gradient_constant():
    model = _linear_elman(torch.eye(H))
    x, y = random_batch(V, T, B, seed=1)
    norms = grad_flow(model, x, y)
    assert norms.shape == (T + 1,)
    assert norms[0] > 0
    assert torch.allclose(norms, norms[0].expand_as(norms), rtol=1e-12)


def test_contracting_recurrence_decays_geometrically():
    model = _linear_elman(0.5 * torch.eye(H))
    x, y = random_batch(V, T, B, seed=1)
    norms = grad_flow(model, x, y)
    expect = norms[0] * 0.5 ** torch.arange(T + 1, dtype=torch.float64)
    assert torch.allclose(norms, expect, rtol=1e-10)


def test_elman_tanh_matches_the_hand_derived_jacobian_product():
    """∂L/∂h_{t-1} = W_hhᵀ (diag(1 − h_t²) ∂L/∂h_t), computed by hand without autograd."""
    model = fresh_model("elman", V, H, seed=3).double()
    cell = model.layer_cells()[0]
    x, y = random_batch(V, T, B, seed=2)
    with torch.no_grad():
        hs = [torch.zeros(B, H, dtype=torch.float64)]
        for t in range(T):
            e = F.one_hot(x[t], V).double()
            hs.append(torch.tanh(e @ cell.weight_ih.T + cell.bias_ih
                                 + hs[-1] @ cell.weight_hh.T + cell.bias_hh))
        p = (hs[-1] @ model.head.weight.T + model.head.bias).softmax(-1)
        g = (p - F.one_hot(y, V).double()) @ model.head.weight       # ∂L/∂h_T
        expect = [g.norm(dim=-1).mean()]
        for t in range(T, 0, -1):
            g = (g * (1 - hs[t] ** 2)) @ cell.weight_hh
            expect.append(g.norm(dim=-1).mean())
    norms = grad_flow(model, x, y)
    assert torch.allclose(norms, torch.stack(expect), rtol=1e-9)


@pytest.mark.parametrize("cell", ["lstm", "gru", "onlstm", "mrnn", "tensor", "jordan"])
def test_every_cell_gives_finite_positive_norms(cell):
    model = fresh_model(cell, V, 20, seed=0)
    x, y = random_batch(V, 8, 3, seed=0)
    norms = grad_flow(model, x, y)
    assert norms.shape == (9,) and torch.isfinite(norms).all() and (norms[:3] > 0).all()
    if cell in ("lstm", "onlstm"):           # the whole state (h, c) has at least h's gradient
        assert (grad_flow(model, x, y, wrt="state") >= norms - 1e-12).all()


def test_fused_and_reference_lstm_agree():
    fused = fresh_model("lstm", V, 12, seed=4)
    ref = fresh_model("lstm", V, 12, seed=4, cell_options={"impl": "reference"})
    x, y = random_batch(V, 10, 3, seed=5)
    assert torch.allclose(grad_flow(fused, x, y), grad_flow(ref, x, y), rtol=1e-8)


def test_elman_sigma_max_report():
    model = _linear_elman(torch.diag(torch.tensor([0.7, 0.5, 0.1, -0.3, 0.2, 0.0])))
    (b,) = elman_bounds(model)
    assert b.sigma_max == pytest.approx(0.7) and b.bound == 1.0 and b.vanishing_guaranteed
    assert "σ_max(W_hh) = 0.700 < 1/γ = 1" in b.describe()
    model = fresh_model("elman", V, H, seed=0)
    with torch.no_grad():
        model.layer_cells()[0].weight_hh.copy_(2 * torch.eye(H))
    (b,) = elman_bounds(model)
    assert b.sigma_max == pytest.approx(2.0) and not b.vanishing_guaranteed
    assert elman_bounds(fresh_model("lstm", V, H)) == []


def test_gradflow_command(tmp_path, capsys):
    out_csv, out_png = tmp_path / "g.csv", tmp_path / "g.png"
    rc = main(["gradflow", "--cells", "elman", "lstm", "--hidden", "16", "--length", "12",
               "--batch-size", "4", "--csv", str(out_csv), "-o", str(out_png)])
    out = capsys.readouterr().out
    assert rc == 0 and "σ_max(W_hh)" in out and "1/γ = 1" in out
    rows = list(csv.DictReader(out_csv.open()))
    assert set(rows[0]) == {"lag", "cell", "mean_grad_norm"}
    assert len(rows) == 2 * 13 and {r["cell"] for r in rows} == {"elman", "lstm"}
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["gradflow", "--cells", "nope"]) == 2
    assert main(["gradflow"]) == 2
