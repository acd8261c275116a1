"""``benchmarks/simd_peak.py``: the kinds it measures are exactly those whose instructions the
CPU has (AMX's ``tdpbf16ps`` among them where ``/proc/cpuinfo`` names amx_tile and amx_bf16),
each loop compiles, runs and gives its multiply-adds per instruction."""

from __future__ import annotations

import shutil

import pytest
from benchmark_scripts import load_benchmark


def test_kinds_follow_the_cpu_flags() -> None:
    sp = load_benchmark("simd_peak")
    have = sp._flags()
    kinds = sp.runnable()
    assert ("bf16 amx tile" in kinds) == ({"amx_tile", "amx_bf16"} <= have)
    assert ("fp32 fma 512-bit" in kinds) == ("avx512f" in have)
    assert sp.runnable("bf16 amx") == [k for k in kinds if k == "bf16 amx tile"]


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) here")
def test_every_kind_here_measures() -> None:
    """Each kind this CPU runs, timed briefly (a check that the loops work, not a figure): a
    positive rate, its multiply-adds per instruction as the instruction defines them, and the
    record's peaks taken from the right rows."""
    sp = load_benchmark("simd_peak")
    kinds = sp.runnable()
    if not kinds:
        pytest.skip("this CPU runs none of simd_peak's instructions")
    rec = sp.record(seconds=0.01, repeats=1)
    rows = rec["one_core"]
    macs = {"fp32 fma 512-bit": 16, "fp32 fma 256-bit": 8, "bf16 dot 512-bit": 32,
            "bf16 dot 256-bit": 16, "bf16 amx tile": 16 * 16 * 32}
    for k, row in rows.items():
        assert row["gmacs_per_s"] > 0 and row["macs_per_instruction"] == macs[k], k
    dots = [r["gmacs_per_s"] for k, r in rows.items() if k.startswith("bf16 dot")]
    assert rec["bf16_peak_gmacs_per_s"] == (max(dots) if dots else None)
    assert rec["amx_bf16_peak_gmacs_per_s"] == rows.get("bf16 amx tile", {}).get("gmacs_per_s")
