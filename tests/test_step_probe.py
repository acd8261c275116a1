"""``treelm.train.step_probe``: ``auto`` keeps bf16 only where this run's own step is faster in it,
and the probe leaves the run exactly as it would have been without it."""

from __future__ import annotations

import os
from pathlib import Path

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


def _trainer(tmp_path: Path, config: str, prec: str) -> Trainer:
    os.chdir(ROOT)
    cfg = apply_overrides(load_config(f"configs/{config}"), [f"train.precision={prec}"])
    return Trainer(cfg, RunFiles(tmp_path / prec), quiet=True)


def _train(tr: Trainer, steps: int) -> list[float]:
    losses = []
    for batch, _ in zip(tr.task.batches(), range(steps)):
        losses.append(tr.step(batch, tr.tc.lr))
    tr.close()
    return losses


@pytest.mark.parametrize("config", ["tiny-lm.yaml", "tiny-tagging.yaml"])
def test_the_probe_leaves_the_run_as_it_was(tmp_path, monkeypatch, config):
    """A run whose ``auto`` probed its step (and chose fp32) trains on the same batches with the
    same dropout draws as a run told fp32: the same losses and weights, bit for bit. (The LM
    carries its hidden state from batch to batch; the tagger shuffles.)"""
    monkeypatch.delenv(precision.ENV_VAR, raising=False)
    monkeypatch.setattr(precision, "measure", lambda device: NATIVE)
    monkeypatch.setattr(step_probe, "MIN_GAIN", 1e9)            # the probe always says fp32
    calls = []
    real = step_probe.step_times
    monkeypatch.setattr(step_probe, "step_times",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
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


def test_no_probe_where_the_machine_says_fp32_or_off_the_cpu(monkeypatch):
    monkeypatch.setattr(step_probe, "step_times", lambda *a, **k: pytest.fail("probed"))
    emulated = precision.Choice("cpu", "fp32", "emulated")
    assert step_probe.confirm(emulated, None, None, torch.device("cpu")) is emulated  # type: ignore[arg-type]
    gpu = precision.Choice("cuda:0", "bf16", "tensor cores")
    assert step_probe.confirm(gpu, None, None, torch.device("cuda")) is gpu  # type: ignore[arg-type]


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
