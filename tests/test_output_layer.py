"""The output layers' one interface (treelm/nn/output.py): the full and the adaptive softmax
have the same methods and keep the same promises (log-probabilities that sum to one, −log p of
the target equal to the gathered log-probabilities, the mean loss equal to their mean, logits
whose softmax is the distribution); each counts its own multiply-adds as
``torch.utils.flop_counter`` and a count by hand do; the optimiser's groups come from what the
layer declares, not from attributes on Parameters; and an optimiser state saved before the
groups' key was renamed resumes at the same rates."""

from __future__ import annotations

import inspect

import pytest
import torch

from treelm.kernels import gemm
from treelm.models import build_model, optimizer_groups
from treelm.nn import OUTPUT_LAYERS
from treelm.nn.adaptive_softmax import AdaptiveSoftmax
from treelm.nn.output import FullSoftmax, OutputLayer
from treelm.train.optim import OLD_RATE_SCALE, RATE_SCALE, make_optimizer, set_lr

V, D = 40, 12
METHODS = ("forward", "log_probs", "target_nll", "loss", "optimizer_groups", "loss_macs",
           "log_probs_macs")
OPTIONS = {"softmax": {}, "adaptive": {"cutoffs": [8, 20], "div_value": 2.0}}


def _layer(kind: str, tied: bool) -> OutputLayer:
    """A layer of ``kind`` in float64, every parameter random (biases too)."""
    torch.manual_seed(0)
    emb = torch.nn.Parameter(torch.randn(V, D, dtype=torch.float64) * 0.5) if tied else None
    m = OUTPUT_LAYERS[kind](V, D, weight=emb, **OPTIONS[kind]).double()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    return m


def test_the_two_kinds_are_one_interface():
    assert OUTPUT_LAYERS == {"softmax": FullSoftmax, "adaptive": AdaptiveSoftmax}
    for kind in OUTPUT_LAYERS:
        cls = OUTPUT_LAYERS[kind]
        assert issubclass(cls, OutputLayer) and not inspect.isabstract(cls)
        for name in METHODS:
            ours = inspect.signature(getattr(cls, name))
            theirs = inspect.signature(getattr(OutputLayer, name))
            assert len(ours.parameters) == len(theirs.parameters), (kind, name)
    with pytest.raises(TypeError):
        OutputLayer()       # the interface alone is no layer


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("kind", list(OUTPUT_LAYERS))
def test_each_kind_keeps_the_promises(kind, tied):
    m = _layer(kind, tied)
    h = torch.randn(2, 5, D, dtype=torch.float64) * 3
    lp = m.log_probs(h)
    assert lp.shape == (2, 5, V) and lp.dtype == torch.float64
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(2, 5, dtype=torch.float64),
                               rtol=0, atol=1e-12)
    torch.testing.assert_close(torch.log_softmax(m(h), -1), lp, rtol=0, atol=1e-12)
    rows = h.reshape(-1, D)
    y = torch.tensor([0, 7, 8, 19, 20, 39, 3, 25, 12, 1])     # every cluster, its edges
    gathered = -m.log_probs(rows).gather(1, y[:, None]).squeeze(1)
    torch.testing.assert_close(m.target_nll(rows, y), gathered.sum(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(m.loss(rows, y), gathered.mean(), rtol=1e-12, atol=1e-12)
    assert (m.weight is not None) and tuple(m.weight.shape) == (V, D)


@pytest.mark.parametrize("kind", list(OUTPUT_LAYERS))
def test_the_counts_of_multiply_adds_are_the_flop_counters(kind):
    """``loss_macs`` and ``log_probs_macs`` are what ``torch.utils.flop_counter`` counts on the
    layer itself (2 FLOPs a multiply-add; forward + backward of the loss: 3 × the forward)."""
    # imported here, not at collection: it imports triton, which must first see the Triton
    # interpreter's TRITON_INTERPRET=1 that tests/test_kernels_onlstm.py sets when collected
    from torch.utils.flop_counter import FlopCounterMode

    v, d, n = 3000, 64, 700
    torch.manual_seed(0)
    emb = torch.nn.Parameter(torch.randn(v, d) * 0.1)
    options = {"softmax": {}, "adaptive": {"cutoffs": [300, 1200], "div_value": 4.0}}[kind]
    m = OUTPUT_LAYERS[kind](v, d, weight=emb, **options)
    y = torch.randint(0, v, (n,))
    y[:400] = torch.randint(0, 300, (400,))
    h = torch.randn(n, d, requires_grad=True)
    fractions = m.tail_fractions(y) if kind == "adaptive" else ()

    def counted(fn) -> int:
        # on torch.mm: the flop counter does not count oneDNN's linear, which the measured
        # choice of treelm.kernels.gemm may take for the larger products
        with FlopCounterMode(display=False) as fc, gemm.use_backend("mm"):
            fn()
        return fc.get_total_flops()

    assert counted(lambda: m.loss(h, y).backward()) == pytest.approx(
        6 * n * sum(m.loss_macs(n, fractions).values()), rel=1e-12)
    with torch.no_grad():
        assert counted(lambda: m.log_probs(h)) == pytest.approx(2 * n * m.log_probs_macs(n),
                                                                rel=1e-12)


def test_the_counts_by_hand():
    """V 40, d 12, cutoffs [8, 20], div 2: head (8 + 2) · 12 = 120; tails of 12 and 20 words,
    d_c 6 and 3. On 10 rows a tail is cheaper hidden first, f (d d_c) + f (d d_c + |V_c| d);
    on 1000 rows weights first, f d d_c + |V_c| d d_c / N + f |V_c| d_c."""
    full = FullSoftmax(V, D)
    assert full.loss_macs(10) == {"softmax": 480.0} and full.log_probs_macs(1) == 480.0
    m = AdaptiveSoftmax(V, D, [8, 20], div_value=2.0)
    y = torch.tensor([0, 7, 8, 19, 20, 39, 3, 25, 12, 1])
    assert m.tail_fractions(y) == [0.3, 0.3]
    assert m.loss_macs(10, [0.3, 0.2]) == pytest.approx(
        {"head": 120, "tail1": 0.3 * 72 + 0.3 * (72 + 144), "tail2": 0.2 * 36 + 0.2 * (36 + 240)})
    assert m.loss_macs(1000, [0.3, 0.2]) == pytest.approx(
        {"head": 120, "tail1": 0.3 * 72 + 12 * 72 / 1000 + 0.3 * 72,
         "tail2": 0.2 * 36 + 20 * 36 / 1000 + 0.2 * 60})
    assert m.loss_macs(10, [0.0, 0.0]) == {"head": 120.0, "tail1": 0.0, "tail2": 0.0}
    assert m.log_probs_macs(1) == 120 + (72 + 72 + 144) + (36 + 36 + 240)
    with pytest.raises(ValueError, match="one fraction per tail"):
        m.loss_macs(10, [0.3])


def test_the_full_softmax_is_the_linear_layer_it_was():
    """Same parameters, same names, same draws from the seed as ``nn.Linear`` + the LM's init."""
    torch.manual_seed(3)
    ref = torch.nn.Linear(D, V)
    torch.nn.init.zeros_(ref.bias)
    torch.nn.init.uniform_(ref.weight, -0.1, 0.1)
    torch.manual_seed(3)
    m = FullSoftmax(V, D)
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    assert torch.equal(m.weight, ref.weight) and torch.equal(m.bias, ref.bias)
    h = torch.randn(4, D)
    assert torch.equal(m(h), ref(h))


def _lm(output=None):
    torch.manual_seed(0)
    spec = {"type": "lm", "cell": "lstm", "sizes": [16, 20, 16]}
    if output is not None:
        spec["output"] = output
    return build_model(spec, vocab_size=300)


def test_optimizer_groups_come_from_the_layer(monkeypatch):
    """The trainer's groups are what the output layer declares: no Parameter carries a rate,
    and a layer that declares nothing gets none of its own."""
    from treelm.train.builders import build_optimizer
    from treelm.train.config import TrainConfig

    tc = TrainConfig.from_dict({"optimizer": "sgd", "lr": 10.0}, others=())
    model = _lm({"kind": "adaptive", "cutoffs": [50], "cluster_lr_scale": 0.25})
    assert not any(hasattr(p, "lr_scale") for p in model.parameters())
    declared = optimizer_groups(model)
    assert declared == model.head.optimizer_groups()
    assert [[id(p) for p in ps] for ps, _ in declared] == [
        [id(model.head.cluster_weight), id(model.head.cluster_bias)]]
    opt, _ = build_optimizer(tc, model)
    names = {id(p): n for n, p in model.named_parameters()}
    groups = [[names[id(p)] for p in g["params"]] for g in opt.param_groups]
    assert groups[1] == ["head.cluster_weight", "head.cluster_bias"]
    # the rest in the model's order, the first group (as before the layer declared them)
    assert groups[0] == [n for n, _ in model.named_parameters() if n not in groups[1]]
    assert [g["lr"] for g in opt.param_groups] == [10.0, 2.5]
    assert optimizer_groups(_lm()) == []
    monkeypatch.setattr(AdaptiveSoftmax, "optimizer_groups", lambda self: [])
    opt, _ = build_optimizer(tc, model)
    assert len(opt.param_groups) == 1


@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_a_state_saved_with_the_old_key_resumes_at_the_same_rates(name):
    """Checkpoints written before the groups' key was ``rate_scale`` hold ``lr_scale`` (and
    older ones no key): either loads, and the declared scales set the rates."""
    model = _lm({"kind": "adaptive", "cutoffs": [50], "cluster_lr_scale": 0.1})
    params = list(model.parameters())
    opt = make_optimizer(name, params, 1.0, 0.0, scaled=optimizer_groups(model))
    model(torch.randint(0, 300, (5, 2)), None, targets=torch.randint(0, 300, (5, 2))).nll.backward()
    opt.step()
    state = opt.state_dict()
    for saved in (OLD_RATE_SCALE, None):
        old = {**state, "param_groups": [
            {**{k: v for k, v in g.items() if k != RATE_SCALE},
             **({saved: g[RATE_SCALE]} if saved else {})} for g in state["param_groups"]]}
        fresh = make_optimizer(name, params, 1.0, 0.0, scaled=optimizer_groups(model))
        fresh.load_state_dict(old)
        assert [g[RATE_SCALE] for g in fresh.param_groups] == [1.0, 0.1]
        assert all(OLD_RATE_SCALE not in g for g in fresh.param_groups)
        set_lr(fresh, 20.0)
        assert [g["lr"] for g in fresh.param_groups] == [20.0, pytest.approx(2.0)]
        assert fresh.state_dict()["state"].keys() == state["state"].keys()
    with pytest.raises(ValueError):     # another number of groups: refused as before
        make_optimizer(name, params, 1.0, 0.0).load_state_dict(state)
