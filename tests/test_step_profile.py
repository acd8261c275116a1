"""``benchmarks/step_profile.py`` on the tiny config: the phases cover the whole step (their shares
add up to one and their times to the step's), the rate is the tokens over that time, and the
operators are the profiler's, per token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


def _load():
    return load_benchmark("step_profile")


def test_phases_add_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    out = tmp_path / "sp.json"
    rec = _load().main(["--configs", "configs/tiny-lm.yaml", "--steps", "3", "--warmup", "1",
                        "--top", "4", "--out", str(out), "--peak-seconds", "0.01",
                        "train.threads=1"])
    assert json.loads(out.read_text())["results"] == rec["results"]
    (r,) = rec["results"]
    assert r["batch_size"] == 4 and r["bptt"] == 12 and r["steps"] == 3
    shares = sum(p["share"] for p in r["phases"].values())
    assert shares == pytest.approx(1.0, abs=1e-3)
    ms = sum(p["ms_per_step"] for p in r["phases"].values())
    assert ms == pytest.approx(r["ms_per_step"], rel=1e-2)
    assert r["tokens_per_s"] == pytest.approx(r["tokens"] / (ms * r["steps"] / 1e3), rel=1e-2)
    assert len(r["top_ops"]) == 4 and all(o["us_per_token"] > 0 for o in r["top_ops"])
    assert r["tokens_per_s_over_last"] == 1.0
    # the step's multiply-adds against the peak simd_peak's loops measured (1 thread here)
    assert r["gmacs_per_s"] == pytest.approx(r["tokens_per_s"] * r["train_mmac_per_token"] / 1e3,
                                             rel=1e-2)
    peak = rec["peak"]["fp32_peak_gmacs_per_s_per_core"]
    assert r["fraction_of_fp32_peak"] == pytest.approx(r["gmacs_per_s"] / peak, rel=1e-2)


def test_step_macs_by_hand() -> None:
    """The tiny config's step: ON-LSTM layers G (I + H) with G = 4H + 2H/C (16 -> 20 -> 16,
    chunk 4: 90·36 + 72·36), a full softmax over V words of 16 features, × 3 for the backward."""
    import torch

    from treelm.nn.output import FullSoftmax

    class Stub:
        model = torch.nn.Sequential(FullSoftmax(50, 16))
        task = type("T", (), {"corpus": type("C", (), {"train": torch.zeros(9)})})()

    cfg = {"model": {"type": "lm", "cell": "onlstm", "sizes": [16, 20, 16],
                     "cell_options": {"chunk_size": 4}}, "train": {}}
    assert _load().step_macs(cfg, Stub()) == 3 * (90 * 36 + 72 * 36 + 50 * 16)
    assert _load().step_macs({**cfg, "model": {**cfg["model"], "cell": "gru"}}, Stub()) is None


def test_missing_config_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _load().main(["--configs", "configs/nope.yaml"])
    assert "config configs/nope.yaml not found" in capsys.readouterr().err


def test_report_renders_the_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``benchmarks/report.py`` turns the record into a section: one row per config, its phases
    and its operators, with the record's own figures."""
    monkeypatch.chdir(ROOT)
    out = tmp_path / "step_profile-20991231.json"
    rec = _load().main(["--configs", "configs/tiny-lm.yaml", "--steps", "2", "--warmup", "0",
                        "--top", "3", "--out", str(out), "--peak-seconds", "0.01",
                        "train.threads=1"])
    report = load_benchmark("report")
    text = "\n".join(report.step_profile_section(out, json.loads(out.read_text())))
    (r,) = rec["results"]
    assert f"| `configs/tiny-lm.yaml` | 4 × 12 | {r['optimizer']} |" in text
    assert f"{r['tokens_per_s']:,.0f} | 1.00× |" in text
    assert f"`{r['top_ops'][0]['op']}`" in text and "forward+loss" in text


def test_fractions_of_each_peak_by_hand() -> None:
    """A bf16 step's GMAC/s against the float32 FMA peak, ``vdpbf16ps``'s and, where measured,
    AMX's tiles' (each × the threads); a float32 step gets neither bf16 fraction."""
    import torch

    sp = _load()
    peak = {"fp32_peak_gmacs_per_s_per_core": 100.0, "bf16_peak_gmacs_per_s_per_core": 50.0,
            "amx_bf16_peak_gmacs_per_s_per_core": 1000.0}
    threads = torch.get_num_threads()
    r = {"tokens_per_s": 1000.0, "precision": "bf16"}
    sp.fractions(r, 2e7, peak)                   # 20 MMAC a token: 20 GMAC/s
    assert r["gmacs_per_s"] == 20.0
    assert r["fraction_of_fp32_peak"] == pytest.approx(0.2 / threads, rel=1e-3)
    assert r["fraction_of_bf16_peak"] == pytest.approx(0.4 / threads, rel=1e-3)
    assert r["fraction_of_amx_peak"] == pytest.approx(0.02 / threads, rel=1e-3)
    f = {"tokens_per_s": 1000.0, "precision": "fp32"}
    sp.fractions(f, 2e7, {**peak, "amx_bf16_peak_gmacs_per_s_per_core": None})
    assert "fraction_of_bf16_peak" not in f and "fraction_of_amx_peak" not in f
