"""The per-step recurrent products of a time loop on every GEMM backend, treelm's panel kernel
(``treelm/kernels/csrc/panel_gemm.cpp``) in both its builds: the AVX2 one (5 × 16 register tiles)
and the AVX-512 one (10 × 32) where the CPU has AVX-512.

    python benchmarks/panel_tiles.py [--repeats 9] [--threads 2 1] [--steps 70]
        [--min-batch-s 0.02] [--dtype float32|bfloat16] [--quick] [--out PATH]

For each shape (M × K times K × N, the weight stored (N, K) as the loops keep it: a forward
``h · Uᵀ`` and a backward ``g · U`` against the same ``U``) and thread count: the weight is
prepared once per backend outside the timing, as a time loop does (MKL and oneDNN packed, the
panels packed; ``mm`` reads it as it is), then ``--repeats`` rounds time every backend in turn
(a batch of calls lasting at least ``--min-batch-s``), the best round per backend counting. Per
backend: µs per call, GMAC/s and the fraction of the machine's float32 FMA peak at that many
threads (one core's peak, ``benchmarks/simd_peak.py``'s measurement of ``vfmadd231ps``, measured
here first, times the threads; the 256-bit peak, the ceiling of an AVX2 kernel, is recorded too).
``--dtype bfloat16``: autocast's products, on the backends that take them (``mm``, ``onednn`` and
the bfloat16 panels, ``vdpbf16ps``, where the build and CPU run them: ``panel_bf16()``), the peak
then ``vdpbf16ps``'s (``bf16 dot 512-bit``), and no AVX2 build (it has no bfloat16 panels).
Where the bfloat16 panels run on AMX's tiles (``panel_amx()``: the record's ``panel_amx``), each
row adds ``fraction_of_amx_peak``, against ``tdpbf16ps``'s rate (``bf16 amx tile``).
``chosen`` is what :mod:`treelm.kernels.gemm`'s rule (``Measurement.best``: packing plus
``--steps`` calls, the earlier backend on a near tie) takes from these figures among
``mm``/``mkl``/``onednn``/``panel`` with this build's panels, ``chosen_avx2_panel`` with the
AVX2 build's in their place.

Both builds load into one process (two extension modules of their own names), so that all the
backends take turns; the AVX2 build is compiled first where the cache lacks it. The machine
should do nothing else meanwhile (run it under the timing lock, ``DEVELOPERS.md``). ``--quick``
(two repeats, short batches) checks that the script works; its figures are marked so. The record
is ``benchmarks/results/panel_tiles-DATE.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import simd_peak  # noqa: E402
import torch  # noqa: E402
from common import write_result  # noqa: E402

from treelm.kernels import build  # noqa: E402
from treelm.kernels.gemm import backends  # noqa: E402
from treelm.kernels.gemm.choice import Measurement  # noqa: E402

#: (name, M, N, K, transpose): the weight U is (N, K); ``transpose`` multiplies by U instead of
#: Uᵀ (the backward's product), M × N · N × K then
SHAPES = [
    ("tree forward", 20, 1680, 400, False),
    ("tree backward", 20, 1680, 400, True),
    ("paper forward", 20, 4830, 1150, False),
    ("paper backward", 20, 4830, 1150, True),
    ("tree forward, eval batch", 64, 1680, 400, False),
    ("tree backward, eval batch", 64, 1680, 400, True),
    ("paper forward, eval batch", 64, 4830, 1150, False),
    ("paper backward, eval batch", 64, 4830, 1150, True),
    ("tree forward, batch 1", 1, 1680, 400, False),
    ("paper forward, batch 1", 1, 4830, 1150, False),
]


def avx2_build() -> ModuleType | None:
    """The extension built for AVX2 (``TREELM_CXX_ISA=avx2``), beside the loaded one; ``None``
    where the CPU lacks AVX2 or this process already runs the AVX2 build."""
    if build._cpu_isa() not in ("AVX2", "AVX512") or build._isa() == "AVX2":
        return None
    saved = os.environ.get(build.ISA_ENV)
    os.environ[build.ISA_ENV] = "avx2"
    try:
        module, _ = build.compile_extension()
    finally:
        if saved is None:
            del os.environ[build.ISA_ENV]
        else:
            os.environ[build.ISA_ENV] = saved
    return module


def _panel(ext: ModuleType, w: torch.Tensor, n: int) -> tuple[Any, float]:
    """A panel product against ``w`` (N, K) on extension ``ext``, and its packing's seconds."""
    t0 = time.perf_counter()
    packed = ext.panel_pack(w)
    pack = time.perf_counter() - t0
    # each module runs its own kernel (bfloat16 panels hold pairs of k: twice the width)
    width = ext.panel_columns() * (2 if w.dtype == torch.bfloat16 else 1)
    if packed.shape[2] != width:
        raise SystemExit(f"panel_tiles: {packed.shape[2]}-wide panels from a build that says "
                         f"{ext.panel_columns()} columns")
    return (lambda a: ext.panel_mm(a, packed, n)), pack


def measure_shape(m: int, n_w: int, k_w: int, transpose: bool, panels: dict[str, ModuleType],
                  repeats: int, min_batch_s: float,
                  dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    """Every backend on ``a (m × K) · Uᵀ`` (``U · `` with ``transpose``), U (n_w, k_w), both
    in ``dtype``."""
    gen = torch.Generator().manual_seed(0)
    u = (torch.randn(n_w, k_w, generator=gen) / k_w ** 0.5).to(dtype)
    k, n = (n_w, k_w) if transpose else (k_w, n_w)
    a = torch.randn(m, k, generator=gen).to(dtype)
    want = (a.double() @ (u.double() if transpose else u.double().t())).float()
    # float32: the sums' order only; bfloat16: the result's rounding (2^-8 of its size) too
    tol = 1e-3 if dtype == torch.float32 else 2.0 ** -7 * want.abs().max().item()
    products: dict[str, Any] = {}
    pack_ms: dict[str, float] = {}
    # each packing done twice, the faster counting, as the choice measures it: the first also
    # pays one-off costs (fresh pages, a primitive's set-up) that a loop re-packing does not
    for backend in backends.usable_backends(dtype):
        if backend == "panel":
            continue
        for _ in range(2):
            products.pop(backend, None)       # free the previous packing first
            t0 = time.perf_counter()
            products[backend] = backends._prepare(backend, u, m, transpose, once=False)
            if backend in backends.PACKING or backend == "onednn":
                pack_ms[backend] = min(pack_ms.get(backend, float("inf")),
                                       (time.perf_counter() - t0) * 1e3)
    for label, ext in panels.items():
        rhs = u.t() if transpose else u      # the (N, K) operand, a view where transposed
        for _ in range(2):
            products.pop(label, None)
            products[label], pack = _panel(ext, rhs, n)
            pack_ms[label] = min(pack_ms.get(label, float("inf")), pack * 1e3)
    calls: dict[str, int] = {}
    with torch.no_grad():
        for label, fn in products.items():
            got = fn(a)
            err = (got.float() - want).abs().max().item()
            if err > tol:
                raise SystemExit(f"panel_tiles: {label} is off by {err:g} on {m}x{k}x{n}")
            fn(a)
            t0 = time.perf_counter()
            fn(a)
            one = time.perf_counter() - t0
            calls[label] = max(1, int(min_batch_s / max(one, 1e-7)))
        best = {label: float("inf") for label in products}
        for _ in range(repeats):              # the backends take turns each round
            for label, fn in products.items():
                t0 = time.perf_counter()
                for _ in range(calls[label]):
                    fn(a)
                best[label] = min(best[label], (time.perf_counter() - t0) / calls[label])
    return {"us_per_call": {b: round(t * 1e6, 2) for b, t in best.items()},
            "pack_ms": {b: round(t, 2) for b, t in pack_ms.items()}, "calls_per_batch": calls}


def choice_of(row: dict[str, Any], panel_label: str | None, steps: int) -> str:
    """What the GEMM choice's rule takes from these figures, with ``panel_label``'s times as
    those of the backend ``panel`` (``None``: without panels)."""
    meas = Measurement()
    for backend in backends.BACKENDS:
        label = panel_label if backend == "panel" else backend
        if label is None or label not in row["us_per_call"]:
            continue
        meas.call_ms[backend] = row["us_per_call"][label] / 1e3
        if label in row["pack_ms"]:
            meas.pack_ms[backend] = row["pack_ms"][label]
    return meas.best(steps)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=9, help="rounds over the backends, best kept")
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    ap.add_argument("--steps", type=int, default=70,
                    help="calls per packing for the choice's rule (a BPTT window)")
    ap.add_argument("--min-batch-s", type=float, default=0.02, help="seconds per timed batch")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                    help="the products' dtype (bfloat16: autocast's, against the bf16 peak)")
    ap.add_argument("--quick", action="store_true", help="check the script works (2 repeats)")
    ap.add_argument("--out", type=Path, default=None, help="record (default: results/)")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.min_batch_s = 2, 0.002

    native = build.load()
    if native is None:
        raise SystemExit(f"panel_tiles: no C++ extension ({build.unavailable_reason()})")
    isa = build._isa().lower()
    dtype = getattr(torch, args.dtype)
    low = dtype == torch.bfloat16
    panels = {f"panel-{isa}": native} if not low or native.panel_bf16() else {}
    other = None if low else avx2_build()
    if other is not None:
        panels["panel-avx2"] = other
    native_label = f"panel-{isa}"

    kind = "bf16 dot" if low else "fp32 fma"
    zmm = simd_peak.runnable(f"{kind} 512")
    ymm = simd_peak.runnable(f"{kind} 256")
    if not zmm + ymm:
        raise SystemExit(f"panel_tiles: this CPU runs no {kind} instruction to take a peak from")
    # bfloat16 panels on AMX's tiles (panel_amx()): their own ceiling, tdpbf16ps's, beside
    amx = simd_peak.runnable("bf16 amx") if low and native.panel_amx() else []
    peak_rows = simd_peak.measure(zmm + ymm + amx, seconds=0.1 if args.quick else 0.3,
                                  repeats=2 if args.quick else 5)
    amx_peak = next((peak_rows[k]["gmacs_per_s"] for k in amx if k in peak_rows), None)
    core_peak = max(peak_rows[k]["gmacs_per_s"] for k in zmm + ymm)
    ymm_peak = max((peak_rows[k]["gmacs_per_s"] for k in ymm), default=None)

    results = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        for name, m, n_w, k_w, transpose in SHAPES:
            k, n = (n_w, k_w) if transpose else (k_w, n_w)
            row = measure_shape(m, n_w, k_w, transpose, panels, args.repeats, args.min_batch_s,
                                dtype)
            macs = m * k * n
            peak = core_peak * threads
            row["gmacs_per_s"] = {b: round(macs / t / 1e3, 1)
                                  for b, t in row["us_per_call"].items()}
            row["fraction_of_peak"] = {b: round(g / peak, 3)
                                       for b, g in row["gmacs_per_s"].items()}
            if amx_peak:
                row["fraction_of_amx_peak"] = {b: round(g / (amx_peak * threads), 3)
                                               for b, g in row["gmacs_per_s"].items()}
            row["chosen"] = choice_of(row, native_label, args.steps)
            if "panel-avx2" in row["us_per_call"] and native_label != "panel-avx2":
                row["chosen_avx2_panel"] = choice_of(row, "panel-avx2", args.steps)
            results.append({"shape": name, "m": m, "k": k, "n": n,
                            "product": "a·U" if transpose else "a·Uᵀ", "threads": threads,
                            **row})
            times = "  ".join(f"{b} {t:.0f}" for b, t in row["us_per_call"].items())
            print(f"{threads} thr  {name:28s} {m}x{k}x{n}: {times} µs -> {row['chosen']}",
                  file=sys.stderr, flush=True)
    record = {
        "dtype": args.dtype,
        "builds": {label: ext.panel_columns() for label, ext in panels.items()},
        "panel_amx": bool(low and native.panel_amx()),
        "build_columns_note": "columns per panel of each build (32: the AVX-512 tiles)",
        "peak": {"one_core_gmacs_per_s": core_peak, "one_core_256bit_gmacs_per_s": ymm_peak,
                 "amx_one_core_gmacs_per_s": amx_peak,
                 "kinds": peak_rows, "note": "fraction_of_peak = GMAC/s / (one core × threads)"},
        "repeats": args.repeats, "min_batch_s": args.min_batch_s, "steps": args.steps,
        "results": results,
    }
    if args.quick:
        record["quick"] = True
    torch.set_num_threads(max(args.threads))   # the machine line's threads: the most timed
    write_result("panel_tiles", record, path=args.out)
    return record


if __name__ == "__main__":
    main()
