"""A language model's first-layer input part read from a table over its vocabulary inside a
scope of fixed weights (:meth:`treelm.models.lm.RNNLM.fixed`): the same features as the
product of every pass, made once per scope and autocast dtype, only once the scope has read as
many positions as the table has rows, never with a gradient or in training, and gone when the
scope ends. An independent reference: the same model's features with the table switched off
(``input_part`` returning None), and the product computed by hand."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F

from treelm.kernels.sequence import input_part, project_inputs
from treelm.models.lm import RNNLM
from treelm.nn.fixed import fixed_weights

V = 50


def _model(impl: str = "auto") -> RNNLM:
    torch.manual_seed(0)
    return RNNLM(V, cell="onlstm", sizes=[16, 20, 16],
                 cell_options={"chunk_size": 4, "impl": impl}).eval()


def _precision(low: torch.dtype | None) -> contextlib.AbstractContextManager[None]:
    return (torch.autocast("cpu", dtype=low) if low is not None
            else torch.autocast("cpu", enabled=False))


def _features(m: RNNLM, passes: list[torch.Tensor], low: torch.dtype | None, scoped: bool
              ) -> list[tuple[torch.Tensor, ...]]:
    scope = fixed_weights(m) if scoped else contextlib.nullcontext()
    out, states = [], None
    with torch.inference_mode(), _precision(low), scope:
        for tokens in passes:
            f = m.features(tokens, states)
            states = f.states
            out.append((f.out, *(a[k] for a in f.aux for k in ("df", "di"))))
    return out


def _passes() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    # 30 positions (fewer than V: no table yet), then 27, 3 and 120 (read from it), the state
    # carried from pass to pass
    return [torch.randint(0, V, (T, 3), generator=g) for T in (10, 9, 1, 40)]


@pytest.mark.parametrize("low", [None, torch.bfloat16], ids=["fp32", "bf16"])
def test_the_table_gives_the_products_features(low, monkeypatch):
    m = _model()
    made = []
    cell = m.rnn.layers[0]
    own = type(cell).input_part
    monkeypatch.setattr(type(cell), "input_part", lambda self, x: made.append(x.shape[0]) or
                        own(self, x))
    passes = _passes()
    kept = _features(m, passes, low, scoped=True)
    assert made == [V] and m._tables is None        # made once, for the vocabulary; dropped
    monkeypatch.setattr(type(cell), "input_part", lambda self, x: None)
    direct = _features(m, passes, low, scoped=False)
    for a, b in zip(kept, direct):
        for x, y in zip(a, b):
            if low is None:         # float32: another row count may take another backend
                torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
            else:                   # oneDNN's bfloat16 linear: the same bits at any row count
                assert torch.equal(x, y)


def test_the_table_is_the_product_by_hand():
    m = _model()
    cell = m.rnn.layers[0]
    E = m.embedding.weight
    with torch.no_grad():
        table = cell.input_part(E)
        by_hand = (E.double() @ cell.weight_ih.double().t() + cell.bias_ih.double()
                   + cell.bias_hh.double())
    assert table.shape == (V, cell.weight_ih.shape[0])
    torch.testing.assert_close(table.double(), by_hand, rtol=1e-5, atol=1e-6)


def test_no_table_in_training_with_a_gradient_for_a_short_scope_or_the_reference_cell(
        monkeypatch):
    m = _model()
    made = []
    cell = m.rnn.layers[0]
    own = type(cell).input_part
    monkeypatch.setattr(type(cell), "input_part", lambda self, x: made.append(1) or
                        own(self, x))
    many = torch.randint(0, V, (30, 4))                 # 120 positions ≥ V
    with fixed_weights(m):
        m.features(many).out.sum().backward()           # a gradient: the product
        m.train()
        with torch.no_grad():
            m.features(many)                            # training (dropouts): the product
        m.eval()
        with torch.no_grad():
            m.features(many[:2, :2])                    # 4 positions: fewer than V
    assert made == []
    with torch.no_grad(), fixed_weights(m), fixed_weights(m):   # nested: one table
        m.features(many)
        m.features(many)
    assert made == [1]
    ref = _model(impl="reference")
    assert ref.rnn.layers[0].input_part(ref.embedding.weight) is None
    with torch.no_grad(), fixed_weights(ref):
        f = ref.features(many)
    with torch.no_grad():
        assert torch.equal(f.out, ref.features(many).out)


def test_a_given_input_part_refuses_a_gradient():
    torch.manual_seed(0)
    x, w = torch.randn(3, 2, 5), torch.randn(8, 5, requires_grad=True)
    b, u = torch.zeros(8), torch.randn(8, 2)
    state = (torch.zeros(2, 2), torch.zeros(2, 2))
    xp = input_part(x, w, b, b)
    torch.testing.assert_close(xp, F.linear(x, w, b).detach())
    with pytest.raises(ValueError, match="no gradient reaches weight_ih"):
        project_inputs(x, state, w, b, u, b, xp=xp)
    with torch.no_grad():
        assert project_inputs(x, state, w, b, u, b, xp=xp)[0] is xp
