"""What one float32 product costs on each GEMM backend, beside the core's FMA peak: which library
to trust with a training step's single products on this CPU.

    python benchmarks/gemm_backends.py [--threads 1 2] [--repeats 20] [--out PATH]

For the tree config's single products (the output layer's head and tail, a layer's input
projection and weight gradient, at batch 20 × BPTT 70) and the ``precision`` probe's shape, each
backend of :mod:`treelm.kernels.gemm` that takes a single product (``torch.mm``, on x86 MKL's
sgemm; oneDNN's linear on the weight as it is), ``torch.mm`` and oneDNN in bfloat16, and
treelm's own panels (float32, and bfloat16 where the extension has them) packed at every call,
as a single product would have to, runs ``--repeats`` times, the backends taking turns; the
best counts (another process only ever adds time). GMAC/s per core and the fraction of
``simd_peak``'s float32 rate at the vector width PyTorch runs here.

Why: MKL picks its kernels by vendor. On an AMD EPYC with AVX-512 (Zen 5) its sgemm ran the AVX2
code (``mkl_blas_def_sgemm_kernel_0_zen``) while oneDNN ran AVX-512, so ``torch.mm`` in float32
was the slower library by 2x there; :mod:`treelm.kernels.gemm` measures instead of naming vendors,
and this record says by how much. The panels are here because they beat the libraries on a time
loop's few rows: on these many rows they did not (2 Zen 4 cores, ``gemm_backends-zen4-*``), so
single products do not run on them. Run it alone: it is a timing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
from common import write_result  # noqa: E402

from treelm.kernels.gemm.backends import _prepare, usable_backends  # noqa: E402

_SHORT = {torch.float32: "fp32", torch.bfloat16: "bf16"}

#: (name, M, K, N) of a · Wᵀ: the tree config's single products (1400 = 20 × 70 rows)
SHAPES = [("head logits (1400×400)·(400×2001)", 1400, 400, 2001),
          ("tail words E·R (8000×400)·(400×100)", 8000, 400, 100),
          ("input projection (1400×400)·(400×1680)", 1400, 400, 1680),
          ("weight gradient (1680×1400)·(1400×400)", 1680, 1400, 400),
          ("input gradient (1400×1680)·(1680×400)", 1400, 1680, 400),
          ("precision probe (256×512)·(512×1024)", 256, 512, 1024)]


def _best(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Seconds per call of each function, the best of ``repeats`` turns after one warm-up call;
    a function whose warm-up fails (oneDNN in bfloat16 on its AVX2 path: the proxy) is left
    out."""
    runs = {}
    for k, fn in fns.items():
        try:
            fn()
        except RuntimeError:
            continue
        runs[k] = fn
    best = {k: float("inf") for k in runs}
    for _ in range(repeats):
        for k, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def measure(threads: int, repeats: int, fp32_peak: float | None) -> list[dict[str, Any]]:
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    rows = []
    for name, m, k, n in SHAPES:
        a, w = torch.randn(m, k, generator=g), torch.randn(n, k, generator=g)
        ab, wb = a.bfloat16(), w.bfloat16()
        # each backend as treelm.kernels.gemm prepares it for a single product
        mm, onednn = (_prepare(b, w, m, False, True) for b in ("mm", "onednn"))
        fns: dict[str, Callable[[], object]] = {
            "torch.mm fp32": lambda a=a, f=mm: f(a),
            "onednn fp32": lambda a=a, f=onednn: f(a),
            "torch.mm bf16": lambda a=ab, w=wb: torch.mm(a, w.t())}
        if "onednn" in usable_backends(torch.bfloat16):
            onednn_bf16 = _prepare("onednn", wb, m, False, True)
            fns["onednn bf16"] = lambda a=ab, f=onednn_bf16: f(a)
        # treelm's panels as a single product would run on them: packed at every call
        for dtype, (x, y) in ((torch.float32, (a, w)), (torch.bfloat16, (ab, wb))):
            if "panel" in usable_backends(dtype):
                fns[f"panel {_SHORT[dtype]} (packing included)"] = (
                    lambda x=x, y=y, m=m: _prepare("panel", y, m, False, False)(x))
        secs = _best(fns, repeats)
        row: dict[str, Any] = {"product": name, "threads": threads}
        for k_, s in secs.items():
            rate = m * k * n / s / 1e9 / threads
            row[k_] = {"ms": round(s * 1e3, 3), "gmacs_per_s_per_core": round(rate, 1)}
            if fp32_peak and "fp32" in k_:
                row[k_]["fraction_of_fp32_peak"] = round(rate / fp32_peak, 3)
        row["onednn_over_mm_fp32"] = round(secs["torch.mm fp32"] / secs["onednn fp32"], 2)
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--out", type=Path, help="the record (default gemm_backends-DATE.json)")
    args = ap.parse_args()
    from step_profile import peaks

    peak = peaks()
    rows = [r for t in args.threads for r in measure(t, args.repeats,
                                                     peak["fp32_peak_gmacs_per_s_per_core"])]
    for r in rows:
        print(f"{r['threads']} thr  {r['product']:42s} torch.mm "
              f"{r['torch.mm fp32']['gmacs_per_s_per_core']:6.1f}  oneDNN "
              f"{r['onednn fp32']['gmacs_per_s_per_core']:6.1f}  GMAC/s a core "
              f"({r['onednn_over_mm_fp32']:.2f}x)", file=sys.stderr)
    write_result("gemm_backends", {"torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
                                   "peak": peak, "repeats": args.repeats, "results": rows},
                 path=args.out)


if __name__ == "__main__":
    main()
