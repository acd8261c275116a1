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


TREES = """(S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))))
(S (NP (PRP it)) (VP (VBD ran)))
(S (NP (DT a) (NN dog)) (VP (VBD barked)))
"""


def test_dev_trees_positions_read_against_the_padded_grid(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """Sentences of 6, 2 and 3 words in batches of 2 (longest first: [6, 3], [2]) pad to 2·6 + 2
    positions; read 2 steps a pass, the first batch drops its 3-word sentence after the
    second pass: 2·2 + 2·2 + 1·2, then the 2-word one alone: 12 of 14."""
    from treelm.syntax import levels

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(levels, "STEPS", 4)         # 4 // 2 = 2 steps a pass
    (tmp_path / "dev.mrg").write_text(TREES)
    run = {"machine": {"torch_threads": 1}, "precision": "fp32", "validations": 1,
           "seconds": 10.0, "seconds_by_phase": {"validation": 1.0}}
    (tmp_path / "tt.json").write_text(json.dumps(run))
    rec = load_benchmark("validation_floor").main([
        "--record", str(tmp_path / "tt.json"), "--config", "configs/tiny-lm.yaml",
        "--out", str(tmp_path / "vf.json"), "--peak-seconds", "0.01",
        f"train.eval_parse.treebank={tmp_path / 'dev.mrg'}", "train.eval_parse.batch_size=2"])
    assert rec["dev_tree_words"] == 11
    assert rec["dev_tree_positions_padded"] == 14
    assert rec["dev_tree_positions_read"] == 12


def test_refuses_a_record_without_validations(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text(json.dumps({"minutes": 1.0}))
    with pytest.raises(SystemExit):
        load_benchmark("validation_floor").main(["--record", str(tmp_path / "x.json")])
