"""The adaptive softmax output layer (treelm/nn/adaptive_softmax.py, ``model.output: {kind:
adaptive}``): an exact distribution (sums to one), its fused loss equal to the gathered
log-probabilities, float64 gradcheck, a dense reference written here with plain torch ops on
the layer's weights and PyTorch's own ``AdaptiveLogSoftmaxWithLoss`` given the same weights,
tying, the vocabulary's frequency order it relies on, and a tiny LM trained, resumed and scored
with it. bf16 autocast is held to fp32 in tests/test_precision.py."""

from __future__ import annotations

import contextlib
import copy
import json
import os
from collections import Counter
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml
from benchmark_scripts import load_benchmark

from treelm.cli import main
from treelm.data.corpus import encode_stream, load_corpus, read_lines
from treelm.errors import ConfigError
from treelm.models import build_model, model_options
from treelm.nn.adaptive_softmax import AdaptiveSoftmax, tail_sizes, weights_first
from treelm.nn.fixed import fixed_weights
from treelm.nn.output import FullSoftmax
from treelm.rundir.files import read_metrics

ROOT = Path(__file__).resolve().parents[1]
ORDERS = ("weights", "hidden")      # the tail's two orders of products (forced)
ADAPTIVE = "model.output={kind: adaptive, cutoffs: [100, 500], div_value: 2, cluster_lr_scale: 0.5}"


def _layer(v: int = 40, d: int = 12, cutoffs=(8, 20), div: float = 2.0,
           dtype=torch.float64, seed: int = 0) -> AdaptiveSoftmax:
    """A layer tied to a random "embedding", every parameter random (biases too)."""
    torch.manual_seed(seed)
    emb = torch.nn.Parameter(torch.randn(v, d, dtype=dtype) * 0.5)
    m = AdaptiveSoftmax(v, d, list(cutoffs), div, emb).to(dtype)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name != "weight":
                p.copy_(torch.randn_like(p) * 0.5)
    return m


def _dense_reference(m: AdaptiveSoftmax, h: torch.Tensor) -> torch.Tensor:
    """log p (N, V) from the layer's weights with plain torch ops, one word at a time per
    cluster: the equations of the module docstring read literally."""
    E, b = m.weight, m.bias
    k = m.cutoffs[0]
    head_w = torch.cat([E[:k], m.cluster_weight])
    head_b = torch.cat([b[:k], m.cluster_bias])
    head = torch.log_softmax(h @ head_w.T + head_b, dim=-1)
    cols = [head[:, :k]]
    bounds = [*m.cutoffs, m.vocab_size]
    for c in range(len(m.cutoffs)):
        lo, hi = bounds[c], bounds[c + 1]
        u = h @ m.tail_in[c].T                     # P_c h
        W = E[lo:hi] @ m.tail_out[c]               # E[V_c] R_c
        tail = torch.log_softmax(u @ W.T + b[lo:hi], dim=-1)
        cols.append(head[:, k + c : k + c + 1] + tail)
    return torch.cat(cols, dim=1)


# ----------------------------------------------------------------------- the distribution

@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("cutoffs", [(8,), (8, 20), (1, 2, 39)])
def test_probabilities_sum_to_one(order, cutoffs):
    m = _layer(cutoffs=cutoffs)
    m.order = order
    h = torch.randn(2, 5, 12, dtype=torch.float64) * 3
    lp = m.log_probs(h)
    assert lp.shape == (2, 5, 40) and lp.dtype == torch.float64
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(2, 5, dtype=torch.float64),
                               rtol=0, atol=1e-12)
    assert torch.equal(m(h), lp)                      # forward is log_probs


@pytest.mark.parametrize("order", ORDERS)
def test_equals_the_dense_reference(order):
    m = _layer()
    m.order = order
    h = torch.randn(9, 12, dtype=torch.float64)
    ref = _dense_reference(m, h)
    torch.testing.assert_close(m.log_probs(h), ref, rtol=1e-12, atol=1e-12)
    y = torch.tensor([0, 7, 8, 19, 20, 39, 3, 25, 12])   # every cluster, its edges
    loss = m.loss(h, y)
    grads = torch.autograd.grad(loss, list(m.parameters()))
    ref_loss = -ref.gather(1, y[:, None]).mean()
    ref_grads = torch.autograd.grad(ref_loss, list(m.parameters()))
    torch.testing.assert_close(loss, ref_loss, rtol=1e-12, atol=1e-12)
    for a, r in zip(grads, ref_grads):
        torch.testing.assert_close(a, r, rtol=1e-10, atol=1e-12)


def test_equals_pytorchs_adaptive_softmax_given_the_same_weights():
    """``nn.AdaptiveLogSoftmaxWithLoss`` has no tail biases and a tail matrix of its own: given
    ours (tail biases zero, W_c = E[V_c] R_c copied in) it computes the same distribution."""
    m = _layer(v=40, d=12, cutoffs=(8, 20), div=2.0)
    with torch.no_grad():
        m.bias[8:].zero_()
    ref = torch.nn.AdaptiveLogSoftmaxWithLoss(12, 40, [8, 20], div_value=2.0,
                                              head_bias=True).double()
    with torch.no_grad():
        w, b = m.head_params()
        ref.head.weight.copy_(w)
        ref.head.bias.copy_(b)
        for c, (lo, hi) in enumerate([(8, 20), (20, 40)]):
            ref.tail[c][0].weight.copy_(m.tail_in[c])
            ref.tail[c][1].weight.copy_(m.weight[lo:hi] @ m.tail_out[c])
    h = torch.randn(30, 12, dtype=torch.float64)
    y = torch.randint(0, 40, (30,))
    with torch.no_grad():
        torch.testing.assert_close(m.log_probs(h), ref.log_prob(h), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(m.loss(h, y), ref(h, y).loss, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("order", ORDERS)
def test_loss_is_minus_the_gathered_log_probability(order):
    m = _layer(v=300, d=16, cutoffs=(50, 120), div=4.0, dtype=torch.float32)
    m.order = order
    h = torch.randn(64, 16)
    y = torch.randint(0, 300, (64,))
    torch.testing.assert_close(m.loss(h, y), -m.log_probs(h).gather(1, y[:, None]).mean(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("order", ORDERS)
def test_gradcheck_float64(order):
    m = _layer(v=15, d=6, cutoffs=(4, 9), div=2.0)
    m.order = order
    names = [n for n, _ in m.named_parameters()]
    h = torch.randn(7, 6, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 3, 4, 8, 9, 14, 5])
    params = tuple(p.detach().clone().requires_grad_() for p in m.parameters())

    def loss(h, *ps):
        return _with_params(m, names, ps, "loss", h, y)

    def logp(h, *ps):
        return _with_params(m, names, ps, "log_probs", h)

    assert torch.autograd.gradcheck(loss, (h, *params))
    assert torch.autograd.gradcheck(logp, (h, *params))


def _with_params(m: AdaptiveSoftmax, names: list[str], ps, method: str, *args):
    """``m.<method>(*args)`` with its parameters replaced by the tensors ``ps`` (named as
    ``names``), so that gradcheck can differentiate with respect to them."""
    saved = dict(m.named_parameters())
    try:
        for n, p in zip(names, ps):
            _set(m, n, p)
        return getattr(m, method)(*args)
    finally:
        for n, p in saved.items():
            _set(m, n, p)


def _set(m: torch.nn.Module, name: str, value: torch.Tensor) -> None:
    *path, last = name.split(".")
    owner = m
    for part in path:
        owner = getattr(owner, part)
    owner._parameters[last] = value


def test_rows_in_no_tail_still_give_every_parameter_a_gradient():
    """A batch whose targets are all in the head: the tails' projections get a zero gradient
    (not none: DistributedDataParallel expects one for every parameter)."""
    m = _layer()
    h = torch.randn(5, 12, dtype=torch.float64)
    m.loss(h, torch.tensor([0, 1, 2, 3, 7])).backward()
    assert all(p.grad is not None for p in m.parameters())
    assert all(torch.count_nonzero(p.grad) == 0 for p in (*m.tail_in, *m.tail_out))


def test_the_cheaper_order_is_chosen():
    # PTB's tail at the tree config: a batch's tail rows share W_c; one decoded token does not
    assert weights_first(rows=180, words=8000, dim=400, small=100)
    assert not weights_first(rows=1, words=8000, dim=400, small=100)
    assert tail_sizes(400, 2, 4.0) == [100, 25] and tail_sizes(3, 2, 4.0) == [1, 1]


@pytest.mark.parametrize("low", [None, torch.bfloat16])
def test_an_evaluation_makes_each_tail_word_matrix_once(monkeypatch, low):
    """Inside the scope of fixed weights and without a gradient, W_c = E[V_c] R_c is made once
    for all the blocks of an evaluation, the same bits as made for each block outside it; made
    again in another autocast dtype, with a gradient, and in the next scope after a fused SGD
    step (which leaves the version counters as they were: only the scope says the weights
    stay)."""
    m = _layer(v=60, d=16, cutoffs=(10,), dtype=torch.float32).eval()
    m.order = "weights"
    made = []
    times = AdaptiveSoftmax._words_times
    monkeypatch.setattr(AdaptiveSoftmax, "_words_times",
                        staticmethod(lambda w, r: made.append(1) or times(w, r)))
    torch.manual_seed(1)
    blocks = [(torch.randn(n, 16), torch.randint(0, 60, (n,))) for n in (30, 30, 7)]

    def scores(scoped: bool) -> list[torch.Tensor]:
        made.clear()
        ctx = (torch.autocast("cpu", dtype=low) if low is not None
               else torch.autocast("cpu", enabled=False))
        scope = fixed_weights(m) if scoped else contextlib.nullcontext()
        with torch.inference_mode(), ctx, scope:
            return [m.target_nll(h, y) for h, y in blocks]

    def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
        return all(torch.equal(x, y) for x, y in zip(a, b))

    once = scores(scoped=True)
    assert len(made) == 1 and m._kept is None           # made once; the scope's end drops it
    assert same(once, scores(scoped=False)) and len(made) == 3
    sgd = torch.optim.SGD(m.parameters(), lr=0.5, fused=True)
    h, y = blocks[0]
    m.target_nll(h, y).backward()
    versions = [p._version for p in m.parameters()]
    sgd.step()
    assert [p._version for p in m.parameters()] == versions   # the counters did not move
    again = scores(scoped=True)
    assert len(made) == 1 and not same(again, once)
    assert same(again, scores(scoped=False))
    with torch.inference_mode(), fixed_weights(m):
        with torch.autocast("cpu", dtype=torch.float16 if low else torch.bfloat16):
            m.target_nll(h, y)
        with torch.autocast("cpu", dtype=low or torch.float32, enabled=low is not None):
            made.clear()
            m.target_nll(h, y)
            m.target_nll(h, y)
        assert made == [1]                              # another dtype was made apart
    made.clear()
    with fixed_weights(m):
        m.target_nll(h, y).backward()
        m.target_nll(h, y).backward()
    assert made == [1, 1]                               # with a gradient: never kept


def test_an_lm_evaluation_after_a_fused_step_reads_the_new_weights():
    """The same perplexity from the model after a fused SGD step as from a fresh copy of it:
    nothing kept in one evaluation reaches the next."""
    from treelm.tasks.lm import evaluate_stream

    model = _lm({"kind": "adaptive", "cutoffs": [50, 120], "div_value": 2})
    model.head.order = "weights"        # every tail through W_c
    data = torch.randint(0, 300, (400,))

    def score(m):
        return evaluate_stream(m, data, batch_size=4, bptt=7, vocab_size=300, tokens=28)

    before = score(model)
    sgd = torch.optim.SGD(model.parameters(), lr=5.0, fused=True)
    x = data[:40].view(10, 4)
    model.train()
    model(x, targets=data[1:41].view(10, 4)).nll.backward()
    sgd.step()
    after = score(model)
    assert after != before and after == score(copy.deepcopy(model))


# ---------------------------------------------------------------------- in the LM, configs

def _lm(output=None, tie=True, seed=0):
    torch.manual_seed(seed)
    spec = {"type": "lm", "cell": "lstm", "sizes": [16, 20, 16], "tie_weights": tie}
    if output is not None:
        spec["output"] = output
    return build_model(spec, vocab_size=300)


def test_weights_are_tied_to_the_embedding():
    model = _lm({"kind": "adaptive", "cutoffs": [50, 120], "div_value": 2})
    assert model.head.weight is model.embedding.weight
    names = [n for n, _ in model.named_parameters()]
    assert "head.weight" not in names            # one Parameter, listed once (the embedding)
    # a tail word's output vector is its embedding row: targets in the tail [120, 300) reach
    # that tail's rows and the head's, not the rows of the tail [50, 120) that none fell in
    h = torch.randn(3, 16)
    model.head.loss(h, torch.tensor([130, 130, 299])).backward()
    g = model.embedding.weight.grad.abs().sum(1)
    assert g[130] > 0 and g[200] > 0 and g[10] > 0
    assert torch.count_nonzero(g[50:120]) == 0
    untied = _lm({"kind": "adaptive", "cutoffs": [50]}, tie=False)
    assert untied.head.weight is not untied.embedding.weight


def test_cluster_logits_step_at_their_scaled_rate():
    """``cluster_lr_scale`` puts K and β in their own optimiser group (the layer declares it:
    ``optimizer_groups``) whose rate is train.lr times it, through every schedule change
    (``set_lr``); a model that scales nothing keeps one group, so its optimiser state has the
    shape it always had."""
    from treelm.models import optimizer_groups
    from treelm.train.optim import RATE_SCALE, make_optimizer, set_lr

    model = _lm({"kind": "adaptive", "cutoffs": [50], "cluster_lr_scale": 0.1})
    params = list(model.parameters())
    opt = make_optimizer("ntasgd", params, lr=30.0, weight_decay=0.0,
                         scaled=optimizer_groups(model))
    assert [g[RATE_SCALE] for g in opt.param_groups] == [1.0, 0.1]
    set_lr(opt, 20.0)
    assert [g["lr"] for g in opt.param_groups] == [20.0, pytest.approx(2.0)]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    x, y = torch.randint(0, 300, (5, 2)), torch.randint(0, 300, (5, 2))
    model(x, None, targets=y).nll.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    opt.step()
    for n, p in model.named_parameters():
        rate = 2.0 if n.startswith("head.cluster_") else 20.0
        torch.testing.assert_close(p.detach(), before[n] - rate * grads[n])
    plain = make_optimizer("adam", list(_lm().parameters()), lr=1e-3, weight_decay=0.0)
    assert len(plain.param_groups) == 1 and plain.param_groups[0]["lr"] == 1e-3


def test_the_full_softmax_stays_the_default_bit_for_bit():
    a, b = _lm(), _lm({"kind": "softmax"})
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert {"head.weight", "head.bias"} <= set(sa)
    assert isinstance(a.head, torch.nn.Linear) and isinstance(a.head, FullSoftmax)


def test_lm_loss_and_logits_agree():
    """The model's fused training loss is the cross-entropy of its ``logits`` (log p), which
    evaluation, generation and probes read; ``step`` gives the same log p for the last token."""
    model = _lm({"kind": "adaptive", "cutoffs": [50, 120], "div_value": 2}).eval()
    x = torch.randint(0, 300, (6, 3))
    y = torch.randint(0, 300, (6, 3))
    with torch.no_grad():
        out = model(x, None, targets=y)
        logits = model(x).logits
        assert logits.shape == (6, 3, 300)
        ce = F.cross_entropy(logits.reshape(-1, 300), y.reshape(-1))
        torch.testing.assert_close(out.nll, ce, rtol=1e-5, atol=1e-6)
        last, _ = model.step(x, None)
        torch.testing.assert_close(last, logits[-1], rtol=1e-5, atol=1e-6)


def test_evaluation_reads_the_targets_not_the_full_log_probabilities(monkeypatch):
    """An adaptive LM is evaluated through ``target_nll`` (the head, and a tail only where its
    words are targets): the same mean cross-entropy as the full log-probabilities give, without
    making them; the full softmax keeps its path (the cross-entropy of its logits)."""
    from treelm.tasks.lm import evaluate_stream

    def from_logits(model):
        return lambda h, y: F.cross_entropy(model.logits(h), y, reduction="sum")

    model = _lm({"kind": "adaptive", "cutoffs": [50, 120], "div_value": 2}).eval()
    data = torch.randint(0, 300, (400,))
    fast = evaluate_stream(model, data, batch_size=4, bptt=7, vocab_size=300, tokens=28)
    monkeypatch.setattr(model, "target_nll", from_logits(model))
    full = evaluate_stream(model, data, batch_size=4, bptt=7, vocab_size=300, tokens=28)
    assert fast == pytest.approx(full, rel=1e-6)
    monkeypatch.undo()
    monkeypatch.setattr(model, "logits", lambda h: pytest.fail("full log-probabilities made"))
    assert evaluate_stream(model, data, batch_size=4, bptt=7, vocab_size=300, tokens=28) == fast
    plain = _lm().eval()
    h, y = torch.randn(3, 16), torch.tensor([1, 2, 3])
    assert torch.equal(plain.target_nll(h, y), from_logits(plain)(h, y))


@pytest.mark.parametrize("output,message", [
    ({"kind": "adaptive", "cutoffs": [50], "size": 3}, "unknown model.output options"),
    ({"kind": "adaptive", "cutoffs": [400]}, "cutoffs must increase"),
    ({"kind": "adaptive", "cutoffs": [120, 50]}, "cutoffs must increase"),
    ({"kind": "adaptive"}, "needs cutoffs"),
    ({"kind": "adaptive", "cutoffs": [50], "div_value": 0.5}, "div_value = 0.5: must be >= 1$"),
    ({"kind": "hierarchical"}, "model.output.kind"),
    ({"kind": "softmax", "cutoffs": [50]}, "for kind: adaptive"),
    ({"kind": "softmax", "cluster_lr_scale": 0.1}, "cluster_lr_scale is for kind: adaptive"),
    ({"kind": "adaptive", "cutoffs": [50], "cluster_lr_scale": 0}, "cluster_lr_scale"),
])
def test_bad_output_options_are_one_line(output, message):
    with pytest.raises(ConfigError, match=message) as e:
        _lm(output)
    assert "\n" not in str(e.value)
    if "cutoffs must" not in message:       # (the vocabulary's size is the data's)
        with pytest.raises(ConfigError, match=message):    # found before any data is read
            model_options({"type": "lm", "output": output})


def test_div_value_rule_is_the_layers():
    """``div_value`` >= 1 (a tail no wider than the features): the section's rule table, its
    one-line error and the layer's own check say the same; 1 itself is taken by both."""
    from treelm.models.lm import OutputOptions

    assert OutputOptions.RULES["div_value"] == ">= 1"
    one = OutputOptions.parse({"kind": "adaptive", "cutoffs": [50], "div_value": 1})
    assert one.div_value == 1.0 and one.build(300, 16, None).sizes == [16]
    with pytest.raises(ConfigError) as e:
        OutputOptions.parse({"kind": "adaptive", "cutoffs": [50], "div_value": 0.99})
    assert str(e.value) == "model.output.div_value = 0.99: must be >= 1"
    with pytest.raises(ValueError, match="div_value must be >= 1"):
        AdaptiveSoftmax(300, 16, [50], 0.99)


def test_the_section_is_parsed_once(monkeypatch):
    """``model.output`` is read once, where the ``model:`` section is checked: building the
    model from the checked options parses nothing again."""
    from treelm.models.lm import OutputOptions

    calls = []
    parse = OutputOptions.parse.__func__

    def counted(cls, d):
        calls.append(d)
        return parse(cls, d)

    monkeypatch.setattr(OutputOptions, "parse", classmethod(counted))
    kind, options = model_options({"type": "lm", "sizes": [16, 20, 16],
                                   "output": {"kind": "adaptive", "cutoffs": [50]}})
    assert isinstance(options["output"], OutputOptions)
    model = build_model({"type": kind, **options}, vocab_size=300)   # as train's builders do
    assert isinstance(model.head, AdaptiveSoftmax)
    assert [d for d in calls if not isinstance(d, OutputOptions)] == [
        {"kind": "adaptive", "cutoffs": [50]}]


def test_vocabulary_ids_are_in_frequency_order(root):
    """The head holds ids below the first cutoff: the LM vocabulary must list its body by
    falling count (specials first), as the layer assumes."""
    spec = {"source": "files", "file": str(root / "tests/data/tiny.txt"),
            "split": [0.8, 0.1, 0.1], "tokenizer": "word"}
    corpus = load_corpus(spec)
    lines = read_lines(root / "tests/data/tiny.txt")
    train = encode_stream(lines[: int(0.8 * len(lines))], corpus.tokenizer)
    counts = Counter(train)
    body = corpus.vocab.itos[len(corpus.vocab.specials):]
    assert [counts[w] for w in body] == sorted((counts[w] for w in body), reverse=True)


# ---------------------------------------------------------------------- training, eval, resume

def test_tiny_lm_trains_resumes_and_evaluates(tmp_path, root, capsys):
    os.chdir(root)
    run = tmp_path / "run"
    assert main(["train", "--config", "configs/tiny-lm.yaml", "--out", str(run), "--quiet",
                 ADAPTIVE, "train.epochs=1", "train.max_units=1200", "train.log_interval=1",
                 "train.variable_bptt=false"]) == 0
    losses = [m["loss"] for m in read_metrics(run) if m["event"] == "train"]
    assert len(losses) >= 20
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < first - 0.5, (first, last)
    assert main(["train", "--resume", str(run), "--quiet", "train.max_units=2400"]) == 0
    steps = [m["step"] for m in read_metrics(run) if m["event"] == "train"]
    assert steps == sorted(steps) and len(steps) > len(losses)
    capsys.readouterr()
    assert main(["eval", str(run), "--split", "valid"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # (the verb prints the loss to 5 decimals: exp of it is good to about 5e-6 relative)
    assert 0 < out["loss"] < first and out["ppl"] == pytest.approx(torch.tensor(out["loss"])
                                                                  .exp().item(), rel=2e-5)
    assert main(["generate", str(run), "--prompt", "the", "--length", "5"]) == 0
    assert capsys.readouterr().out.strip()


# ---------------------------------------------------------------------- benchmarks/output_layer.py

def _benchmark():
    return load_benchmark("output_layer")


def test_benchmark_runs_quick_on_tiny_configs(tmp_path, monkeypatch):
    """``--quick`` (every part once, not for the record) on configs/tiny-lm.yaml against the same
    with the adaptive output layer."""
    monkeypatch.chdir(ROOT)
    cfg = yaml.safe_load((ROOT / "configs/tiny-lm.yaml").read_text())
    cfg["model"]["output"] = {"kind": "adaptive", "cutoffs": [100, 500], "div_value": 2}
    adaptive = tmp_path / "tiny-adaptive.yaml"
    adaptive.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "ol.json"
    rec = _benchmark().main(["--full", "configs/tiny-lm.yaml", "--adaptive", str(adaptive),
                             "--cutoffs", "200", "--quick", "--top", "3", "--out", str(out),
                             "train.threads=1"])
    assert json.loads(out.read_text())["flops"] == rec["flops"] and rec["quick"]
    f = rec["flops"]
    assert f["rows_per_batch"] == 4 * 12 and f["dim"] == 16 and f["vocab"] == 1540
    assert [a["cutoffs"] for a in f["adaptive"]] == [[100, 500], [200]]
    first = f["adaptive"][0]
    assert first["tail_sizes"] == [8, 4]
    assert first["head_fraction"] + sum(first["tail_fractions"]) == pytest.approx(1, abs=1e-3)
    assert first["train_mflop"] < f["full"]["train_mflop"]
    assert f["full"]["train_mflop"] == pytest.approx(6 * 1540 * 16 / 1e6, rel=1e-3)
    assert rec["layer"]["full"]["tokens_per_s"] > 0 and rec["layer"]["adaptive"]["tokens_per_s"] > 0
    full, adapt = rec["steps"]
    assert full["config"] == "configs/tiny-lm.yaml" and adapt["config"] == str(adaptive)
    assert adapt["tokens_per_s_over_full"] > 0
    with pytest.raises(SystemExit):         # a quick run is never written among the records
        _benchmark().main(["--quick"])
