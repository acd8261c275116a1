"""The step's large products hot and cold: why they run below their rate alone (issue 56 item 2).

    python benchmarks/product_cache.py [--precision bf16 fp32] [--repeats 15]
        [--steps 40] [--warmup 300] [--out PATH]

The products a training step of the tree config makes over a whole batch (T·B = 1400 rows at
batch 20 × BPTT 70, 400 → 400 with G = 1680 gate rows, the adaptive head's 2001 logits), each
made as the step makes it: in bfloat16 autocast's ``torch.addmm`` / ``torch.mm`` on bfloat16
operands, a weight gradient's left operand the transposed view δGᵀ; in float32
:mod:`treelm.kernels.gemm`'s measured backend, as the fused layer and the output layer call it.
Each is timed in three states of the caches:

- **hot**: called again and again on the same operands, as ``gemm_backends.py`` and the
  libraries' own figures time a product;
- **cold, clean**: after reading a buffer of 3 × the last-level cache, so that the operands
  come from memory;
- **cold, dirty**: after writing such a buffer, so that the cache is also full of lines that
  must be written back first. A training step writes about 100 MB of activations, saved
  buffers and gradients between two products of one layer, so in the step a product's
  operands are cold.

Each call is timed alone (the flush outside the clock); a state's figure is the median of
``--repeats`` calls. GMAC/s and the fraction of the peak of the threads' cores
(``simd_peak``'s ``vdpbf16ps`` or ``vfmadd`` rate, measured here first). Then, beside them,
each product's rate inside the tree config's training step in the same precision, in this
process (``--steps`` steps under ``torch.profiler`` after ``--warmup``, as ``step_profile.py``
runs them): every operand shape it made, every BPTT length's rows counted as the product's.
A product's time there is its operator's self time, which leaves out the copies the operator
makes of its operands (they count as ``aten::copy_``); alone they count: oneDNN's float32
linear copies a transposed left operand first, so the head's δE runs at about 58% alone and
86% in the step, its copy under everything else.

And the step's time per token in three parts, each against its time at the peak: the library
products (all of them, the small ones too), the C++ loops (their per-step recurrent products,
h Uᵀ and δz U, with the gate math around them) and everything else (element-wise work, copies,
the optimiser, the autograd engine): where the step's distance from the peak lies.

Every product alone is timed before any step runs, so that the training's state (its heap,
the libraries' caches) cannot slow them (once, after 340 steps in the same process, the input
projection alone ran 17% slower and the other products as fast). Run it alone: this VM's speed
moves by up to 20% from one run to the next, so compare the columns of one record, not records.
Record: ``benchmarks/results/product_cache-DATE.json``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from treelm import omp  # noqa: E402

omp.configure()     # OpenMP's threads wait as under `treelm train`: set before torch loads libgomp
import torch  # noqa: E402
from common import endless, step_trainer, write_result  # noqa: E402
from step_profile import PRODUCTS as OPS  # noqa: E402
from step_profile import peaks, profiled  # noqa: E402

ROWS, H, G, HEAD = 1400, 400, 1680, 2001    # the tree config's batch rows, sizes and head
#: the products: name -> (M, K, N) of the step's ``a @ b`` (rows R = T·B)
PRODUCTS = {
    "input projection x·W_ihᵀ + b": ("R", H, G),
    "δx = δG·W_ih": ("R", G, H),
    "weight gradient δGᵀ·x (δW_ih, δU)": (G, "R", H),
    "head logits h·Eᵀ": ("R", H, HEAD),
    "head δh = δZ·E": ("R", HEAD, H),
    "head δE = δZᵀ·h": (HEAD, "R", H),
}
STATES = ("hot", "cold, clean", "cold, dirty")
#: fewer rows than this are a recurrent step's product (B rows), not a whole batch's (T·B)
MIN_ROWS = 200


def last_level_cache_bytes() -> int:
    """The largest cache this CPU reports (sysfs), 32 MiB where it says nothing."""
    best = 0
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip().upper()
        scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
        try:
            best = max(best, int(text.rstrip("KM")) * scale)
        except ValueError:
            continue
    return best or 32 << 20


def dims(shape: tuple[Any, ...], rows: int) -> tuple[int, int, int]:
    return tuple(rows if x == "R" else x for x in shape)  # type: ignore[return-value]


def make(name: str, precision: str, rows: int, g: torch.Generator
         ) -> tuple[Callable[[], object], str]:
    """The product ``name`` as the step makes it, on fresh random operands, and the backend it
    runs on (float32: :mod:`treelm.kernels.gemm`'s choice for it in this process)."""
    from treelm.kernels.gemm import FixedMatmul, transpose_contiguous
    from treelm.kernels.gemm.choice import _colmajor

    m, k, n = dims(PRODUCTS[name], rows)
    bf16 = precision == "bf16"
    dt = torch.bfloat16 if bf16 else torch.float32

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dt)

    def fp32(a: torch.Tensor, b: torch.Tensor) -> tuple[Callable[[], object], str]:
        """``a @ b`` as :func:`treelm.kernels.gemm.matmul` makes it."""
        f = FixedMatmul(b, a.shape[0], transpose=True, a_t=_colmajor(a))
        return (lambda: f(a)), f.backend

    if name.startswith("input projection"):
        x, w, b = rand(m, k), rand(n, k), rand(n)
        if bf16:
            return (lambda: torch.addmm(b, x, w.t())), "torch.addmm"
        proj = FixedMatmul(w, m)
        return (lambda: proj(x, add=b)), proj.backend
    if name.startswith("weight gradient") or name.startswith("head δE"):
        d, x = rand(k, m), rand(k, n)             # δ (rows, M) and x (rows, N): δᵀ x
        if bf16:
            return (lambda: torch.mm(d.t(), x)), "torch.mm"
        if name.startswith("head"):               # linear_ce: δZᵀ as a transposed view
            return fp32(d.t(), x)
        return fp32(transpose_contiguous(d), x)   # the fused layer's δGᵀ, copied once
    a, b = rand(m, k), rand(k, n)                 # δx = δG W, head logits h Eᵀ, head δh
    if name.startswith("head logits"):
        b = rand(n, k).t()
    return ((lambda: torch.mm(a, b)), "torch.mm") if bf16 else fp32(a, b)


def timed(fn: Callable[[], object], flush: Callable[[], object] | None, repeats: int
          ) -> float:
    """Median seconds of ``repeats`` calls of ``fn``, each after ``flush`` (outside the clock)."""
    fn()
    times = []
    for _ in range(repeats):
        if flush is not None:
            flush()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def in_step(products: list[dict[str, Any]], tokens: int) -> dict[str, dict[str, float]]:
    """Each product's rate inside the step: ``{name: {"gmacs_per_s", "us_per_token"}}`` from
    the profiled products ``[{"op", "shapes", "calls", "us"}]`` (self time in µs, over
    ``tokens`` tokens), every shape of a product summed."""
    acc: dict[str, list[float]] = {}
    for p in products:
        mkn = _mkn(p["op"], p["shapes"])
        name = _classify(mkn) if mkn else None
        if name is None:
            continue
        a = acc.setdefault(name, [0.0, 0.0])
        a[0] += mkn[0] * mkn[1] * mkn[2] * p["calls"]
        a[1] += p["us"]
    return {k: {"gmacs_per_s": round(v[0] / v[1] / 1e3, 1), "us_per_token": round(v[1] / tokens, 2)}
            for k, v in acc.items() if v[1] > 0}


def profile_step(precision: str, steps: int, warmup: int, config: str
                 ) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """``steps`` training steps of ``config`` (after ``warmup``) under the profiler: their
    products as :func:`in_step` takes them, and the step's time split (:func:`split`'s
    input)."""
    with tempfile.TemporaryDirectory() as tmp:
        tr = step_trainer(config, [f"train.precision={precision}"], tmp)
        tr.net.train()
        it = endless(tr)
        for _ in range(warmup):
            tr.step(next(it), tr.tc.lr)
        prof, tokens = profiled(tr, it, steps)
        prods = [{"op": e.key, "shapes": [list(x) for x in e.input_shapes if x],
                  "calls": e.count, "us": e.self_cpu_time_total, "tokens": tokens}
                 for e in prof.key_averages(group_by_input_shape=True) if e.key in OPS]
        ops = prof.key_averages()
        model = tr.cfg["model"]
        sizes, chunk = model["sizes"], model.get("cell_options", {}).get("chunk_size", 10)
        totals = {
            "tokens": float(tokens),
            "us": float(sum(e.self_cpu_time_total for e in ops)),
            "loops_us": float(sum(e.self_cpu_time_total for e in ops if e.key in LOOPS)),
            # a token's recurrent products in the loops, forward (h U ᵀ) and backward (δz U)
            "loops_macs_per_token": float(2 * sum((4 * h + 2 * (h // chunk)) * h
                                                  for h in sizes[1:])),
        }
        rest = sorted((e for e in ops if e.key not in OPS and e.key not in LOOPS),
                      key=lambda e: e.self_cpu_time_total, reverse=True)
        return prods, {**totals, "others": {e.key: float(e.self_cpu_time_total)
                                            for e in rest[:OTHERS]}}


#: the operators of "everything else" named in the record, the costliest first
OTHERS = 10
#: the profiler's names of the fused ON-LSTM's C++ loops (forward and backward)
LOOPS = ("CxxONLSTMFunction", "CxxONLSTMFunctionBackward", "CxxProjectedONLSTMFunction",
         "CxxProjectedONLSTMFunctionBackward")


def split(prods: list[dict[str, Any]], totals: dict[str, float], peak: float,
          cores: int) -> dict[str, dict[str, float]]:
    """The step's time per token in three parts (the library products, the C++ loops with
    their per-step products, everything else), each with its multiply-adds, the fraction of the
    peak they ran at, and the time above what they would take at the peak."""
    tokens, at = totals["tokens"], peak * cores * 1e3        # multiply-adds a µs at the peak
    lib_us = sum(p["us"] for p in prods)
    lib_macs = sum(math.prod(mkn) * p["calls"] for p in prods
                   if (mkn := _mkn(p["op"], p["shapes"])))
    loop_macs = totals["loops_macs_per_token"] * tokens
    parts = {"library products": (lib_us, lib_macs), "loops": (totals["loops_us"], loop_macs),
             "everything else": (totals["us"] - lib_us - totals["loops_us"], 0.0)}
    out = {}
    for name, (us, macs) in parts.items():
        row = {"us_per_token": round(us / tokens, 2), "share": round(us / totals["us"], 3),
               "above_peak_us_per_token": round((us - macs / at) / tokens, 2)}
        if macs:
            row["mmac_per_token"] = round(macs / tokens / 1e6, 3)
            row["fraction_of_peak"] = round(macs / us / at, 3)
        out[name] = row
    out["everything else"]["top_ops_us_per_token"] = {  # type: ignore[assignment]
        k: round(v / tokens, 2) for k, v in totals.get("others", {}).items()}
    return out


def _mkn(op: str, shapes: list[list[int]]) -> tuple[int, int, int] | None:
    """(M, K, N) of a profiled product from its operands' shapes."""
    two = [s for s in shapes if len(s) == 2]
    if len(two) < 2:
        return None
    a, b = two[0], two[1]
    if op == "mkldnn::_linear_pointwise":          # a (M, K), weight (N, K)
        return a[0], a[1], b[0]
    return a[0], a[1], b[1]                        # mm, addmm: a (M, K), b (K, N)


def _classify(mkn: tuple[int, int, int]) -> str | None:
    """Which of :data:`PRODUCTS` a product is, its rows free."""
    for name, shape in PRODUCTS.items():
        if all(x == "R" or x == y for x, y in zip(shape, mkn)):
            rows = [y for x, y in zip(shape, mkn) if x == "R"]
            if rows and all(y >= MIN_ROWS and y not in (H, G, HEAD) for y in rows):
                return name
    return None


def measure(precision: str, rows: int, repeats: int, flush_bytes: int, peak: float | None
            ) -> list[dict[str, Any]]:
    g = torch.Generator().manual_seed(0)
    junk = torch.ones(flush_bytes // 4)
    flushes: dict[str, Callable[[], object] | None] = {
        "hot": None, "cold, clean": lambda: junk.sum(), "cold, dirty": lambda: junk.add_(1.0)}
    cores = torch.get_num_threads()
    out = []
    for name in PRODUCTS:
        fn, backend = make(name, precision, rows, g)
        m, k, n = dims(PRODUCTS[name], rows)
        row: dict[str, Any] = {"product": name, "m": m, "k": k, "n": n, "backend": backend}
        for state in STATES:
            s = timed(fn, flushes[state], repeats)
            rate = m * k * n / s / 1e9
            row[state] = {"ms": round(s * 1e3, 3), "gmacs_per_s": round(rate, 1)}
            if peak:
                row[state]["fraction_of_peak"] = round(rate / (cores * peak), 3)
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--precision", nargs="+", choices=("bf16", "fp32"), default=["bf16", "fp32"])
    ap.add_argument("--repeats", type=int, default=15, help="calls per state (default 15)")
    ap.add_argument("--rows", type=int, default=ROWS, help=f"T·B (default {ROWS})")
    ap.add_argument("--flush-mb", type=float, default=None,
                    help="the flushing buffer (default 3 × the last-level cache)")
    ap.add_argument("--steps", type=int, default=40,
                    help="training steps profiled for the rates inside the step (0: none)")
    ap.add_argument("--warmup", type=int, default=300, help="untimed steps first (default 300)")
    ap.add_argument("--config", default="configs/ptb-onlstm-trees.yaml", help=argparse.SUPPRESS)
    ap.add_argument("--peak-seconds", type=float, default=0.2, help="simd_peak's loops")
    ap.add_argument("--out", type=Path, help="the record (default product_cache-DATE.json)")
    args = ap.parse_args(argv)
    llc = last_level_cache_bytes()
    flush = int(args.flush_mb * (1 << 20)) if args.flush_mb else 3 * llc
    peak = peaks(args.peak_seconds)
    rates = {p: peak["bf16_peak_gmacs_per_s_per_core" if p == "bf16"
                     else "fp32_peak_gmacs_per_s_per_core"] for p in args.precision}
    # every product alone first, in a fresh process; then the steps
    results = {p: measure(p, args.rows, args.repeats, flush, rates[p]) for p in args.precision}
    splits: dict[str, dict[str, dict[str, float]]] = {}
    for p, rows in results.items():
        rate = rates[p]
        inside_step: dict[str, dict[str, float]] = {}
        if args.steps:
            prods, totals = profile_step(p, args.steps, args.warmup, args.config)
            inside_step = in_step(prods, int(totals["tokens"]))
            if rate:
                splits[p] = split(prods, totals, rate, torch.get_num_threads())
        for r in rows:
            inside = inside_step.get(r["product"])
            if inside:
                r["in the step"] = dict(inside)
                if rate:
                    r["in the step"]["fraction_of_peak"] = round(
                        inside["gmacs_per_s"] / (torch.get_num_threads() * rate), 3)
            parts = [f"{s} {r[s].get('fraction_of_peak', r[s]['gmacs_per_s'])}"
                     for s in (*STATES, "in the step") if s in r]
            print(f"{p} {r['product']:36s} " + "  ".join(parts), file=sys.stderr)
        for part, row in splits.get(p, {}).items():
            print(f"{p} step: {part:18s} {row}", file=sys.stderr)
    return write_result("product_cache", {
        "rows": args.rows, "repeats": args.repeats, "last_level_cache_bytes": llc,
        "flush_bytes": flush, "peak": peak, "config": args.config, "steps": args.steps,
        "warmup": args.warmup, "results": results, "step_split": splits},
        path=args.out)


if __name__ == "__main__":
    main()
