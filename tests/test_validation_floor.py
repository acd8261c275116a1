"""``benchmarks/validation_floor.py`` on the tiny config: a validation's multiply-adds counted from
the model's sizes and the validation text, and the floor's arithmetic against a run's record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


def test_floor_of_the_tiny_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    run = {"machine": {"torch_threads": 2, "cpu": "Example"}, "precision": "fp32",
           "validations": 4, "seconds": 100.0,
           "seconds_by_phase": {"steps": 80.0, "validation": 20.0}}
    (tmp_path / "tt.json").write_text(json.dumps(run))
    out = tmp_path / "vf.json"
    floor = load_benchmark("validation_floor")
    rec = floor.main(["--record", str(tmp_path / "tt.json"), "--config", "configs/tiny-lm.yaml",
                      "--out", str(out), "--peak-seconds", "0.01"])
    assert json.loads(out.read_text())["floor_share_of_run"] == rec["floor_share_of_run"]
    # the stack by hand: 16 -> 20 -> 16, chunk 4: G (I + H) per layer, G = 4H + 2H/4
    assert rec["stack_mmac_per_token"] == pytest.approx((90 * 36 + 72 * 36) / 1e6, abs=1e-4)
    assert rec["dev_tree_words"] == 0 and rec["valid_tokens"] > 0
    gmac = rec["valid_tokens"] * (rec["stack_mmac_per_token"] + rec["output_mmac_per_token"]) / 1e3
    assert rec["gmac"] == pytest.approx(gmac, rel=1e-2, abs=0.01)
    peak = 2 * rec["peak"]["fp32_peak_gmacs_per_s_per_core"]
    assert rec["peak_gmacs_per_s"] == pytest.approx(peak, rel=1e-3)
    floor = rec["gmac"] / peak
    assert rec["floor_share_of_run"] == pytest.approx(4 * floor / 100.0, rel=2e-2, abs=1e-4)
    assert rec["measured_seconds_per_validation"] == 5.0
    assert rec["measured_share_of_run"] == 0.2


def test_refuses_a_record_without_validations(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text(json.dumps({"minutes": 1.0}))
    with pytest.raises(SystemExit):
        load_benchmark("validation_floor").main(["--record", str(tmp_path / "x.json")])
