"""``benchmarks/loop_schedules.py`` in its smallest run: both schedules of the C++ ON-LSTM loops
timed at one size, every figure in the record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_scripts import load_benchmark

from treelm.kernels import build


def test_one_pair_at_the_tree_size(tmp_path: Path) -> None:
    if not build.enabled() or build.load() is None:
        pytest.skip("no C++ loops here")
    out = tmp_path / "ls.json"
    rec = load_benchmark("loop_schedules").main(["--pairs", "2", "--calls", "1", "--sizes",
                                                 "tree, batch 20", "--out", str(out)])
    assert json.loads(out.read_text())["results"] == rec["results"]
    assert {r["dtype"] for r in rec["results"]} <= {"float32", "bfloat16"}
    for r in rec["results"]:
        assert (r["T"], r["B"], r["H"], r["levels"]) == (70, 20, 400, 40)
        assert 1.0 < r["panel_mib"]["forward"] < 4.0      # the default takes rows here
        for loop in ("forward", "backward"):
            f = r[loop]
            assert f["ms_rows"] > 0 and f["ms_steps"] > 0 and 0 <= f["pairs_rows_faster"] <= 2
