"""``benchmarks/cells.py --interleave``: the models' timed runs take turns, and each ratio is
also the median over rounds of one round's ratio, computed from the runs the record holds."""

from __future__ import annotations

import statistics
from pathlib import Path

from benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


def test_interleaved_rounds_and_paired_ratios(tmp_path: Path) -> None:
    cells = load_benchmark("cells")
    rec = cells.main(["--sizes", "cpu", "--models", "nn.LSTM", "onlstm.fused", "--repeats", "3",
                      "--warmup", "0", "--threads", "1", "--interleave", "--json",
                      "--out", str(tmp_path / "cells.json")])
    assert rec["interleaved"] is True
    by = {r["model"]: r for r in rec["results"]}
    for mode in ("train", "inference"):
        runs = {m: by[m][mode]["ms_runs"] for m in by}
        assert all(len(r) == 3 for r in runs.values())
        rounds = [b / a for a, b in zip(runs["onlstm.fused"], runs["nn.LSTM"])]
        assert rec["ratios_paired"]["cpu"][mode]["fused_over_nn_lstm"] == statistics.median(
            rounds)
        # the plain ratio of medians is there too, now without the reference cell
        assert rec["ratios"][f"cpu.{mode}"]["fused_over_nn_lstm"] > 0
