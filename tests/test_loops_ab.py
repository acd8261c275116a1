"""``benchmarks/loops_ab.py``: two builds of the C++ loops compared and timed, here one build
against itself at the tree size (a second build takes minutes), and a checkout whose loops are
this tree's refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from benchmark_scripts import load_benchmark

from treelm.kernels import build

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ext():
    if not build.enabled() or build.load() is None:
        pytest.skip("no C++ loops here")
    return build.load()


def test_a_build_against_itself_has_the_same_bits(ext) -> None:
    ab = load_benchmark("loops_ab")
    low = torch.bfloat16 if ext.panel_bf16() else None
    r = ab.compare({"old": ext, "new": ext}, (5, 3, 40, 4), low, 2, 1)
    assert r["same_bits"] is True
    assert (r["T"], r["B"], r["H"], r["levels"]) == (5, 3, 40, 4)
    for loop in ("forward", "backward"):
        f = r[loop]
        assert f["ms_old"] > 0 and f["ms_new"] > 0 and f["new_over_old"] > 0
        assert 0 <= f["rounds_new_faster"] <= 2


def test_a_checkout_of_the_same_loops_is_refused(ext, capsys) -> None:
    with pytest.raises(SystemExit, match="builds the same loops as this tree"):
        load_benchmark("loops_ab").main(["--old", str(ROOT), "--rounds", "1"])


def test_not_a_checkout(ext, tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        load_benchmark("loops_ab").main(["--old", str(tmp_path)])
