"""``benchmarks/product_cache.py``: the step's profiled products classified and their rates by
hand, a profiled step, and a small run of the three cache states."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_scripts import load_benchmark

pc = load_benchmark("product_cache")


def test_shapes_are_classified_with_their_rows_free() -> None:
    assert pc._classify(pc._mkn("aten::mm", [[1680, 1420], [1420, 400]])) == \
        "weight gradient δGᵀ·x (δW_ih, δU)"
    assert pc._classify(pc._mkn("aten::addmm", [[1680], [1360, 400], [400, 1680]])) == \
        "input projection x·W_ihᵀ + b"
    # oneDNN's linear takes its weight as (N, K)
    assert pc._classify(pc._mkn("mkldnn::_linear_pointwise", [[1420, 1680], [400, 1680]])) == \
        "δx = δG·W_ih"
    assert pc._classify(pc._mkn("aten::mm", [[2001, 1300], [1300, 400]])) == "head δE = δZᵀ·h"
    # a recurrent step's product (B = 20 rows) and a tail's are none of them
    assert pc._classify(pc._mkn("aten::mm", [[20, 1680], [1680, 400]])) is None
    assert pc._classify(pc._mkn("aten::mm", [[8000, 400], [400, 100]])) is None


def test_rates_inside_the_step_by_hand() -> None:
    products = [
        {"op": "aten::mm", "shapes": [[1680, 1400], [1400, 400]], "calls": 2, "us": 1400.0},
        {"op": "aten::mm", "shapes": [[1680, 700], [700, 400]], "calls": 1, "us": 700.0},
        {"op": "aten::mm", "shapes": [[20, 1680], [1680, 400]], "calls": 70, "us": 9000.0}]
    rates = pc.in_step(products, tokens=1400)
    assert list(rates) == ["weight gradient δGᵀ·x (δW_ih, δU)"]
    # 2 × 1680·1400·400 + 1680·700·400 multiply-adds in 2,100 µs, over 1,400 tokens
    macs = 2 * 1680 * 1400 * 400 + 1680 * 700 * 400
    assert rates["weight gradient δGᵀ·x (δW_ih, δU)"] == {
        "gmacs_per_s": round(macs / 2.1e-3 / 1e9, 1), "us_per_token": 1.5}


def test_the_step_is_profiled_for_its_products() -> None:
    prods, totals = pc.profile_step("fp32", steps=2, warmup=1, config="configs/tiny-lm.yaml")
    assert prods and all(p["calls"] > 0 and p["us"] > 0 and p["tokens"] > 0 for p in prods)
    assert {p["op"] for p in prods} <= set(pc.OPS)
    assert totals["us"] > sum(p["us"] for p in prods) and totals["tokens"] > 0
    assert 0 < len(totals["others"]) <= pc.OTHERS
    assert not set(totals["others"]) & (set(pc.OPS) | set(pc.LOOPS))
    # tiny-lm: 16 -> 20 -> 16, chunk 4: G·H forward and backward per layer, G = 4H + 2H/4
    assert totals["loops_macs_per_token"] == 2 * (90 * 20 + 72 * 16)


def test_the_step_split_by_hand() -> None:
    prods = [{"op": "aten::mm", "shapes": [[1000, 100], [100, 200]], "calls": 4, "us": 10.0}]
    totals = {"tokens": 100.0, "us": 50.0, "loops_us": 30.0, "loops_macs_per_token": 6e5,
              "others": {"aten::copy_": 7.0, "aten::cat": 3.0}}
    # peak 1,000 GMAC/s a core, 2 cores: 2e6 multiply-adds a µs; the products 80e6 (40 µs at
    # the peak), the loops 60e6 (30 µs)
    out = pc.split(prods, totals, peak=1000.0, cores=2)
    assert out["library products"] == {"us_per_token": 0.1, "share": 0.2,
                                       "above_peak_us_per_token": round((10 - 40) / 100, 2),
                                       "mmac_per_token": 0.8, "fraction_of_peak": 4.0}
    assert out["loops"] == {"us_per_token": 0.3, "share": 0.6,
                            "above_peak_us_per_token": round((30 - 30) / 100, 2),
                            "mmac_per_token": 0.6, "fraction_of_peak": 1.0}
    assert out["everything else"] == {"us_per_token": 0.1, "share": 0.2,
                                      "above_peak_us_per_token": 0.1, "top_ops_us_per_token":
                                      {"aten::copy_": 0.07, "aten::cat": 0.03}}


def test_a_small_run_writes_every_state(tmp_path: Path) -> None:
    out = tmp_path / "pc.json"
    rec = pc.main(["--rows", "256", "--repeats", "2", "--flush-mb", "1", "--peak-seconds",
                   "0.01", "--steps", "0", "--out", str(out)])
    assert json.loads(out.read_text())["results"] == rec["results"]
    assert rec["flush_bytes"] == 1 << 20
    for precision in ("bf16", "fp32"):
        rows = rec["results"][precision]
        assert [r["product"] for r in rows] == list(pc.PRODUCTS)
        for r in rows:
            assert (r["m"], r["k"], r["n"]) == pc.dims(pc.PRODUCTS[r["product"]], 256)
            assert "in the step" not in r                 # --steps 0: no step profiled
            for state in pc.STATES:
                assert r[state]["gmacs_per_s"] > 0
                assert r[state]["gmacs_per_s"] == pytest.approx(
                    r["m"] * r["k"] * r["n"] / (r[state]["ms"] / 1e3) / 1e9, rel=0.05)


def test_the_last_level_cache_is_read_or_assumed() -> None:
    assert pc.last_level_cache_bytes() >= 1 << 20
