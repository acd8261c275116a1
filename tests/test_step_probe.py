"""``treelm.train.step_probe``: ``auto`` keeps bf16 only where this run's own step is faster in it,
and the probe leaves the run exactly as it would have been without it (on the CPU bit for bit;
on CUDA, where the probe is made too, to CUDA's own run-to-run rounding)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

from treelm.config import apply_overrides, load_config
from treelm.kernels import precision
from treelm.rundir.files import RunFiles, read_metrics
from treelm.train import step_probe
from treelm.train.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
NATIVE = precision.Choice("cpu", "bf16", "bfloat16 products 2.00× float32 (...); native: bf16",
                          2.0, 1.0)
TENSOR_CORES = precision.Choice("cuda:0", "bf16", "bfloat16 tensor cores (compute capability "
                                "9.0): bf16")
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def _trainer(tmp_path: Path, config: str, prec: str, device: str = "cpu") -> Trainer:
    """A trainer of ``config`` on ``device`` (the CPU unless asked: the bit-for-bit comparisons
    hold there, whatever the machine has)."""
    os.chdir(ROOT)
    cfg = apply_overrides(load_config(f"configs/{config}"),
                          [f"train.precision={prec}", f"train.device={device}"])
    return Trainer(cfg, RunFiles(tmp_path / prec), quiet=True)


def _train(tr: Trainer, steps: int) -> list[float]:
    losses = []
    for batch, _ in zip(tr.task.batches(), range(steps)):
        losses.append(tr.step(batch, tr.tc.lr))
    tr.close()
    return losses


def probe_says_fp32(monkeypatch: pytest.MonkeyPatch, products: Any) -> list[Any]:
    """``auto`` with products that would favour bf16 (``products``: what ``measure`` reports)
    and a step probe that always says fp32; the list of the step times it measures."""
    monkeypatch.delenv(precision.ENV_VAR, raising=False)
    monkeypatch.setattr(precision, "measure", lambda device: products)
    monkeypatch.setattr(step_probe, "MIN_GAIN", 1e9)            # the probe always says fp32
    measured: list[Any] = []
    real = step_probe.step_times
    monkeypatch.setattr(step_probe, "step_times",
                        lambda *a, **k: measured.append(t := real(*a, **k)) or t)
    return measured


@pytest.mark.parametrize("config", ["tiny-lm.yaml", "tiny-tagging.yaml"])
def test_the_probe_leaves_the_run_as_it_was(tmp_path, monkeypatch, config):
    """A run whose ``auto`` probed its step (and chose fp32) trains on the same batches with the
    same dropout draws as a run told fp32: the same losses and weights, bit for bit. (The LM
    carries its hidden state from batch to batch; the tagger shuffles.)"""
    calls = probe_says_fp32(monkeypatch, NATIVE)
    probed = _trainer(tmp_path, config, "auto")
    assert calls and probed.choice.precision == "fp32"
    assert "training step" in probed.choice.reason and "fp32" in probed.choice.reason
    logged = read_metrics(tmp_path / "auto", "precision")          # recorded in the run
    assert len(logged) == 1 and logged[0]["reason"] == probed.choice.reason
    probed_losses = _train(probed, 6)           # each trainer seeds the process's generator:
    told = _trainer(tmp_path, config, "fp32")   # one after the other
    assert probed_losses == _train(told, 6)
    for a, b in zip(probed.model.parameters(), told.model.parameters()):
        assert torch.equal(a, b)


def test_bf16_is_kept_only_where_the_step_is_faster(monkeypatch):
    times = {"fp32": 1.0, "bf16": 0.5}
    monkeypatch.setattr(step_probe, "step_times", lambda *a, **k: dict(times))
    cpu = torch.device("cpu")
    kept = step_probe.confirm(NATIVE, None, None, cpu)  # type: ignore[arg-type]
    assert kept.precision == "bf16" and "2.00× in bf16 (500 vs 1,000 ms): bf16" in kept.reason
    assert (kept.fp32_ms, kept.bf16_ms) == (NATIVE.fp32_ms, NATIVE.bf16_ms)   # the machine's
    times["bf16"] = 1.0 / 1.05                                  # a near tie keeps float32
    assert step_probe.confirm(NATIVE, None, None, cpu).precision == "fp32"  # type: ignore[arg-type]


def test_no_probe_where_the_machine_says_fp32(monkeypatch):
    monkeypatch.setattr(step_probe, "step_times", lambda *a, **k: pytest.fail("probed"))
    emulated = precision.Choice("cpu", "fp32", "emulated")
    assert step_probe.confirm(emulated, None, None, torch.device("cpu")) is emulated  # type: ignore[arg-type]
    old = precision.Choice("cuda:0", "fp32", "no bfloat16 tensor cores")
    assert step_probe.confirm(old, None, None, torch.device("cuda")) is old  # type: ignore[arg-type]
    meta = precision.Choice("meta", "bf16", "not measured")
    assert step_probe.confirm(meta, None, None, torch.device("meta")) is meta  # type: ignore[arg-type]


def test_on_cuda_the_step_decides(monkeypatch):
    """A GPU with tensor cores is only a candidate for bf16 (no product is timed there,
    ``precision.measure``); the run's own step, timed in both precisions, decides, by the same
    rule as on the CPU: the paper-width tree run (1.36× in bf16 on an H200) keeps bf16, a step
    barely faster in bf16 keeps float32. (Fake step times: no GPU needed.)"""
    times = {"fp32": 0.0544, "bf16": 0.040}
    seen = []
    monkeypatch.setattr(step_probe, "step_times",
                        lambda m, t, device, **k: seen.append(device) or dict(times))
    gpu = torch.device("cuda", 0)
    kept = step_probe.confirm(TENSOR_CORES, None, None, gpu)  # type: ignore[arg-type]
    assert seen == [gpu]
    assert kept.precision == "bf16" and kept.reason == (
        "bfloat16 tensor cores (compute capability 9.0); this model's training step 1.36× in "
        "bf16 (40 vs 54.4 ms): bf16")
    times["bf16"] = 0.0544 / 1.05
    slow = step_probe.confirm(TENSOR_CORES, None, None, gpu)  # type: ignore[arg-type]
    assert slow.precision == "fp32" and slow.reason.endswith("not 1.1× faster, fp32")


def test_the_cuda_candidate_comes_from_the_capability_alone(monkeypatch):
    """``measure`` on CUDA times nothing (a layer-sized product is launch-bound there): compute
    capability ≥ 8.0 is bf16's candidate, below it fp32; the CPU still times its products."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    never = lambda dt, dev, shape: pytest.fail("timed a product on CUDA")  # noqa: E731
    choice = precision.measure("cuda:0", timer=never)
    assert choice.precision == "bf16" and choice.reason == TENSOR_CORES.reason
    assert (choice.fp32_ms, choice.bf16_ms) == (None, None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert precision.measure("cuda:0", timer=never).precision == "fp32"
    shapes = []
    precision.measure("cpu", timer=lambda dt, dev, shape: shapes.append(shape) or 1.0)
    assert shapes    # the CPU: timed as before


def test_step_times_measures_both_precisions_on_a_copy(tmp_path):
    """The real measurement on a tiny run: a time per precision, the run's weights and task
    position untouched."""
    tr = _trainer(tmp_path, "tiny-lm.yaml", "fp32")
    before = [p.detach().clone() for p in tr.model.parameters()]
    state = tr.task.state_dict()
    t = step_probe.step_times(tr.model, tr.task, tr.device, turns=1)
    assert set(t) == {"fp32", "bf16"} and all(v > 0 for v in t.values())
    assert all(torch.equal(a, b) for a, b in zip(before, tr.model.parameters()))
    assert all(p.grad is None for p in tr.model.parameters())
    assert repr(tr.task.state_dict()) == repr(state)
    tr.close()


def test_the_probe_stops_once_the_gain_is_clear():
    """More turns only lower each minimum: a gain far from MIN_GAIN (either way) ends the
    timing; a near tie takes every turn."""
    g = step_probe.MIN_GAIN
    assert step_probe._clear({"fp32": [1.0], "bf16": [1.0 / (g * step_probe.CLEAR)]})
    assert step_probe._clear({"fp32": [1.0], "bf16": [g * step_probe.CLEAR]})
    assert not step_probe._clear({"fp32": [1.0], "bf16": [1.0 / g]})
    assert not step_probe._clear({"fp32": [1.0, 0.9], "bf16": [0.95, 0.9]})


def test_step_times_turns_end_early_on_a_clear_gain(tmp_path, monkeypatch):
    """With a gain beyond CLEAR after the first timed turn, one timed step per precision."""
    tr = _trainer(tmp_path, "tiny-lm.yaml", "fp32")
    for says, turns in ((True, [1]), (False, [1, 2, 3])):
        calls: list[int] = []

        def clear(t, says=says, calls=calls):
            calls.append(len(t["fp32"]))        # timed turns so far
            return says

        monkeypatch.setattr(step_probe, "_clear", clear)
        t = step_probe.step_times(tr.model, tr.task, tr.device, turns=3)
        assert calls == turns and set(t) == {"fp32", "bf16"}
    tr.close()


@cuda
def test_on_cuda_the_probe_is_made_and_leaves_the_run_as_it_was(tmp_path, monkeypatch):
    """On a GPU the probe times the run's real step (the copy's own CUDA graphs, the CUDA
    generator forked): a run whose probe said fp32 trains on the same batches with the same
    dropout draws as a run told fp32, to CUDA's run-to-run rounding (atomics in the embedding's
    backward: not bit for bit there)."""
    measured = probe_says_fp32(monkeypatch, TENSOR_CORES)
    probed = _trainer(tmp_path, "tiny-lm.yaml", "auto", device="cuda")
    assert probed.device.type == "cuda" and probed.choice.precision == "fp32"
    assert measured and all(v > 0 for v in measured[0].values())
    assert "tensor cores" in probed.choice.reason and "training step" in probed.choice.reason
    probed_losses = _train(probed, 6)
    told = _trainer(tmp_path, "tiny-lm.yaml", "fp32", device="cuda")
    assert probed_losses == pytest.approx(_train(told, 6), rel=1e-4)
    for a, b in zip(probed.model.parameters(), told.model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@cuda
def test_step_times_on_cuda_leave_the_models_graphs(tmp_path):
    """The real measurement on a GPU, after the model has trained (and captured graphs): the
    copy captures its own, the model's cache is the same object with the same counts."""
    tr = _trainer(tmp_path, "tiny-lm.yaml", "fp32", device="cuda")
    for batch, _ in zip(tr.task.batches(), range(2)):
        tr.step(batch, tr.tc.lr)
    caches = [v for m in tr.model.modules() for v in vars(m).values()
              if isinstance(v, step_probe.GraphCache)]
    before = [(id(c), dict(c.stats)) for c in caches]
    t = step_probe.step_times(tr.model, tr.task, tr.device, turns=2)
    assert set(t) == {"fp32", "bf16"} and all(v > 0 for v in t.values())
    assert [(id(c), dict(c.stats)) for c in caches] == before
    tr.close()
