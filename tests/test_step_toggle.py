"""benchmarks/step_toggle.py: each round steps the same batches at both values of the switch,
in alternating order, the verdict is the median ratio, and an attribute the model lacks is
refused (the timings themselves are never run here)."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest
from benchmark_scripts import load_benchmark


def _fake_trainer(steps: list[tuple[int, object]]) -> SimpleNamespace:
    model = SimpleNamespace(inner=SimpleNamespace(tied=None))
    tr = SimpleNamespace(model=model, tc=SimpleNamespace(lr=1.0),
                         choice=SimpleNamespace(precision="fp32"))
    tr.step = lambda batch, lr: steps.append((batch.id, model.inner.tied))
    return tr


def test_same_batches_at_both_values_in_alternating_order(tmp_path, monkeypatch) -> None:
    mod = load_benchmark("step_toggle")
    steps: list[tuple[int, object]] = []
    monkeypatch.setattr(mod, "step_trainer", lambda *a: _fake_trainer(steps))
    monkeypatch.setattr(mod, "endless", lambda tr: (SimpleNamespace(id=i, size=10)
                                                   for i in range(1000)))
    out = tmp_path / "toggle.json"
    monkeypatch.setattr(sys, "argv", ["step_toggle.py", "--attr", "inner.tied", "--a", "False",
                                      "--b", "true", "--rounds", "2", "--steps", "3",
                                      "--warmup", "2", "--out", str(out)])
    mod.main()
    assert steps[:2] == [(0, False), (1, True)]                # warm-up: both values
    first, second = steps[2:8], steps[8:14]
    assert first == [(2, False), (3, False), (4, False), (2, True), (3, True), (4, True)]
    assert second == [(5, True), (6, True), (7, True), (5, False), (6, False), (7, False)]
    rec = json.loads(out.read_text())
    assert [r["order"] for r in rec["rounds"]] == [["a", "b"], ["b", "a"]]
    assert all(r["tokens"] == 30 for r in rec["rounds"])
    assert rec["a"] is False and rec["b"] is True and len(rec["rounds"]) == 2
    assert rec["median_b_over_a"] == pytest.approx(
        sorted(r["b_over_a"] for r in rec["rounds"])[0] / 2
        + sorted(r["b_over_a"] for r in rec["rounds"])[1] / 2)


def test_an_attribute_the_model_lacks_is_refused(monkeypatch) -> None:
    mod = load_benchmark("step_toggle")
    monkeypatch.setattr(mod, "step_trainer", lambda *a: _fake_trainer([]))
    with pytest.raises(SystemExit, match="no attribute 'inner.nope'"):
        mod.toggle("c.yaml", [], "inner.nope", {"a": 0, "b": 1}, 1, 1, 0)


def test_an_attribute_of_a_treelm_module_is_found_there() -> None:
    mod = load_benchmark("step_toggle")
    from treelm.kernels import cpu_cache

    obj, name = mod.owner(object(), "treelm.kernels.cpu_cache.switch.on")
    assert obj is cpu_cache.switch and name == "on"
