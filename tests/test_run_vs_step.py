"""``benchmarks/run_vs_step.py`` in one pair on the tiny config: a short training's steps rate,
read from its own ``done`` event, against ``step_profile``'s, each in a process of its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_scripts import load_benchmark


def test_one_pair_on_the_tiny_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     root: Path) -> None:
    monkeypatch.chdir(root)
    out = tmp_path / "rvs.json"
    rec = load_benchmark("run_vs_step").main([
        "--config", "configs/tiny-lm.yaml", "--pairs", "1", "--units", "400", "--warmup", "20",
        "--steps", "10", "--out", str(out), "train.threads=1"])
    assert json.loads(out.read_text())["pairs"] == rec["pairs"]
    (pair,) = rec["pairs"]
    assert pair["order"] == ["run", "step"]
    run, step = pair["run"], pair["step"]
    assert run["tokens"] >= 400 and run["tokens_per_s"] == pytest.approx(
        run["tokens"] / run["seconds_by_phase"]["steps"], rel=1e-3)
    assert step["tokens_per_s"] > 0 and step["warmup"] == 20 and step["steps"] == 10
    assert pair["run_over_step"] == pytest.approx(run["tokens_per_s"] / step["tokens_per_s"],
                                                  abs=1e-4)
    assert rec["median_run_over_step"] == pair["run_over_step"]
