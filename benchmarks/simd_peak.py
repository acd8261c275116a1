"""How many multiply-adds per second one core does in float32 and in bfloat16: the CPU's own
ceiling for what bfloat16 can do to a matrix product.

    python benchmarks/simd_peak.py [--seconds 0.5] [--repeats 7] [--out PATH]

A float32 product runs on fused multiply-adds (``vfmadd231ps``: one multiply-add per float32 lane
per instruction); a bfloat16 product on x86 runs on ``vdpbf16ps`` (AVX512-BF16: per float32 lane,
the dot product of two pairs of bfloat16 added to the lane, i.e. two multiply-adds) or on AMX
tiles (``tdpbf16ps``: 8,192 multiply-adds an instruction, measured here as ``bf16 amx tile``
where the CPU has amx_bf16 and Linux grants the tile state; its rate is the record's
``amx_bf16_peak_gmacs_per_s``, apart from ``bf16_peak_gmacs_per_s``, the vector instruction's).
Whether bfloat16 can be more than twice as fast as float32 for a product on the vector units
therefore depends on how many ``vdpbf16ps`` a core issues per cycle against ``vfmadd231ps``:

    peak ratio = (bf16 multiply-adds / s) / (fp32 multiply-adds / s)
               = 2 × (vdpbf16ps issued / s) / (vfmadd231ps issued / s)

This script measures both on one core, in 512-bit and 256-bit registers, with ``ACC`` independent
accumulators (enough to hide each instruction's latency), each loop compiled here by the system C
compiler (``-O2`` and exactly the vector flags the instruction needs), loaded with ctypes, timed in
C. The best of ``--repeats`` runs of ``--seconds`` each, the kinds taking turns. It measures the
instructions, not a library: oneDNN's bfloat16 products (``benchmarks/precision.py``'s
``products``) can at most approach this ratio.

A whole training step in bfloat16 mixed precision is faster than float32 by less than its
products are (the gates, softmax, optimiser and every reduction stay float32), so where the peak
ratio is 2 a whole step cannot reach 2×. The record (``benchmarks/results/simd_peak-DATE.json``)
holds the CPU model and flags. No AVX512-BF16 on the CPU: only the float32 rows are measured.
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

ACC = 12   # independent accumulators: latency 4-6 cycles × up to 2 instructions per cycle

_SOURCE = r"""
#include <immintrin.h>
#include <time.h>

static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
}
#define LOOP(T, ZERO, SET, STEP, SUM, OUT)                                       \
    T a = SET(1.0f), b = SET(1e-7f);                                             \
    %(declare)s                                                                  \
    __asm__ volatile("" : %(opaque)s);   /* accumulators not known equal: no merging */ \
    double t0 = now();                                                           \
    for (long n = 0; n < iters; ++n) {                                           \
        %(steps)s                                                                \
        __asm__ volatile("" : "+v"(a), "+v"(b));   /* a, b unknown each time */  \
    }                                                                            \
    double dt = now() - t0;                                                      \
    T s = acc0;                                                                  \
    %(sums)s                                                                     \
    OUT;                                                                         \
    return dt;

static volatile float sink;
"""

#: kind -> (vector flags, register bits, one instruction's C on accumulator c and operands x, y,
#: the operands' value, multiply-adds per instruction)
_KINDS = {
    "fp32 fma 512-bit": ("-mavx512f", 512, "_mm512_fmadd_ps(x, y, c)", "_mm512_set1_ps(v)",
                         16),
    "fp32 fma 256-bit": ("-mavx2 -mfma", 256, "_mm256_fmadd_ps(x, y, c)",
                         "_mm256_set1_ps(v)", 8),
    # bfloat16 1.0 in every 16-bit half of the register
    "bf16 dot 512-bit": ("-mavx512f -mavx512bf16", 512,
                         "_mm512_dpbf16_ps(c, (__m512bh)(x), (__m512bh)(y))",
                         "_mm512_castsi512_ps(_mm512_set1_epi16(0x3f80))", 32),
    "bf16 dot 256-bit": ("-mavx512f -mavx512vl -mavx512bf16", 256,
                         "_mm256_dpbf16_ps(c, (__m256bh)(x), (__m256bh)(y))",
                         "_mm256_castsi256_ps(_mm256_set1_epi16(0x3f80))", 16),
}

#: AMX (``tdpbf16ps``: a 16 × 32 bfloat16 tile by a 32 × 16 one into a 16 × 16 float32 tile,
#: 8,192 multiply-adds an instruction), where the CPU has it and Linux grants the tile state: 4
#: accumulator tiles in turn, ``ACC`` products an iteration as the vector loops do; ``run``
#: returns -1 where the state is not granted
_AMX_KIND = "bf16 amx tile"
_AMX_MACS = 16 * 16 * 32
_AMX_SOURCE = r"""
#include <immintrin.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
}
static volatile float sink;
struct cfg { unsigned char palette, start, reserved[14]; unsigned short colsb[16];
             unsigned char rows[16]; } __attribute__((aligned(64)));

double run(long iters) {
    static int granted = -1;
    if (granted < 0) granted = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
    if (!granted) return -1.0;
    struct cfg c; memset(&c, 0, sizeof c); c.palette = 1;
    for (int t = 0; t < 6; ++t) { c.rows[t] = 16; c.colsb[t] = 64; }
    static unsigned short a[16 * 32] __attribute__((aligned(64)));
    static unsigned short b[16 * 32] __attribute__((aligned(64)));
    static float out[16 * 16] __attribute__((aligned(64)));
    for (int i = 0; i < 16 * 32; ++i) { a[i] = 0x3f80; b[i] = 0x3380; }   /* 1.0, 6e-8 */
    _tile_loadconfig(&c);
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    _tile_loadd(4, a, 64); _tile_loadd(5, b, 64);
    double t0 = now();
    for (long n = 0; n < iters; ++n) {
        %(steps)s
    }
    double dt = now() - t0;
    _tile_stored(0, out, 64); sink = out[0];
    _tile_release();
    return dt;
}
"""

_BODY = """
double run(long iters) {
#define STEP(c, x, y) %(step)s
#define SET(v) %(set)s
    LOOP(__m%(w)d, _mm%(w)d_setzero_ps, SET, STEP, _mm%(w)d_add_ps,
         float o[%(lanes)d]; _mm%(w)d_storeu_ps(o, s); sink = o[0])
}"""

#: the CPU flags each kind needs (``/proc/cpuinfo`` names)
_NEEDS = {"fp32 fma 512-bit": {"avx512f"}, "fp32 fma 256-bit": {"avx2", "fma"},
          "bf16 dot 512-bit": {"avx512f", "avx512_bf16"},
          "bf16 dot 256-bit": {"avx512f", "avx512vl", "avx512_bf16"},
          _AMX_KIND: {"amx_tile", "amx_bf16"}}


def _flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def source(kind: str, work: Path) -> tuple[Path, Path, str]:
    """``kind``'s loop written as C in ``work``: its source, its library's path, its flags."""
    stem = kind.replace(" ", "_").replace("-", "")
    src, lib = work / f"{stem}.c", work / f"{stem}.so"
    if kind == _AMX_KIND:
        src.write_text(_AMX_SOURCE % {"steps": " ".join(
            f"_tile_dpbf16ps({i % 4}, 4, 5);" for i in range(ACC))})
        return src, lib, "-mamx-tile -mamx-bf16"
    flags, width, step, value, _ = _KINDS[kind]
    body = _BODY % {"step": step, "set": value, "w": width, "lanes": width // 32}
    # the accumulators spelled out one by one: an array of them would live in memory at -O2
    src.write_text(_SOURCE % {
        "declare": " ".join(f"T acc{i} = ZERO();" for i in range(ACC)),
        "opaque": ", ".join(f'"+v"(acc{i})' for i in range(ACC)),
        "steps": " ".join(f"acc{i} = STEP(acc{i}, a, b);" for i in range(ACC)),
        "sums": " ".join(f"s = SUM(s, acc{i});" for i in range(1, ACC))} + body)
    return src, lib, flags


def build(kinds: list[str], work: Path) -> dict[str, ctypes.CDLL]:
    """Each of ``kinds``' loops compiled into a shared library in ``work`` (the compilers run
    side by side: a second of start-up saved where a benchmark measures the peak first), loaded
    with its ``run`` typed."""
    jobs = {}
    for kind in kinds:
        src, lib, flags = source(kind, work)
        cmd = ["cc", "-O2", "-shared", "-fPIC", *flags.split(), str(src), "-o", str(lib)]
        jobs[kind] = (lib, subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.PIPE, text=True))
    libs = {}
    for kind, (lib, cc) in jobs.items():
        _, err = cc.communicate()
        if cc.returncode:
            raise SystemExit(f"simd_peak: compiling {kind} failed: {err.strip()[:300]}")
        dll = ctypes.CDLL(str(lib))
        dll.run.restype, dll.run.argtypes = ctypes.c_double, [ctypes.c_long]
        libs[kind] = dll
    return libs


def measure(kinds: list[str], seconds: float = 0.5, repeats: int = 7) -> dict[str, dict]:
    """One core's rate of each of ``kinds`` (keys of ``_KINDS`` the CPU runs): instructions and
    multiply-adds per second, the best of ``repeats`` runs of about ``seconds`` each."""
    with tempfile.TemporaryDirectory() as tmp:
        libs = build(kinds, Path(tmp))
        # AMX's tile state not granted (a kernel before Linux 5.16): that row is left out
        kinds = [k for k in kinds if libs[k].run(1) >= 0]
        iters = {}
        for k in kinds:   # size each loop to about `seconds`
            n = 1_000_000
            while (dt := libs[k].run(n)) < 0.05:
                n *= 4
            iters[k] = max(1, int(n * seconds / dt))
        best = {k: float("inf") for k in kinds}
        for _ in range(repeats):
            for k in kinds:   # the kinds take turns: a clock that drifts slows all alike
                best[k] = min(best[k], libs[k].run(iters[k]) / iters[k])
    rows = {}
    for k in kinds:
        per_instr = _AMX_MACS if k == _AMX_KIND else _KINDS[k][4]
        rows[k] = {"instructions_per_ns": round(ACC / best[k] / 1e9, 3),
                   "gmacs_per_s": round(ACC * per_instr / best[k] / 1e9, 1),
                   "macs_per_instruction": per_instr}
    return rows


def runnable(prefix: str = "") -> list[str]:
    """The kinds (starting with ``prefix``) whose instructions this CPU has."""
    have = _flags()
    return [k for k in _NEEDS if k.startswith(prefix) and _NEEDS[k] <= have]


def record(seconds: float = 0.5, repeats: int = 7) -> dict[str, Any]:
    """Every kind this CPU has, measured (:func:`measure`), with the peaks and their ratio: the
    record's fields (``benchmarks/step_profile.py`` takes them too)."""
    kinds = runnable()
    rows = measure(kinds, seconds, repeats)
    fp32 = max((rows[k]["gmacs_per_s"] for k in rows if k.startswith("fp32")), default=None)
    bf16 = max((rows[k]["gmacs_per_s"] for k in rows if k.startswith("bf16 dot")),
               default=None)
    amx = rows.get(_AMX_KIND, {}).get("gmacs_per_s")
    return {"one_core": rows, "accumulators": ACC, "seconds": seconds,
            "repeats": repeats, "skipped (CPU lacks the flags)": [k for k in _NEEDS
                                                                   if k not in kinds],
            "fp32_peak_gmacs_per_s": fp32, "bf16_peak_gmacs_per_s": bf16,
            "amx_bf16_peak_gmacs_per_s": amx,
            "bf16_over_fp32_peak": round(bf16 / fp32, 2) if fp32 and bf16 else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=0.5, help="each timed run")
    ap.add_argument("--repeats", type=int, default=7, help="runs per kind, the best kept")
    ap.add_argument("--out", type=Path, default=None, help="record (default: results/)")
    args = ap.parse_args()
    write_result("simd_peak", record(args.seconds, args.repeats), path=args.out)


if __name__ == "__main__":
    main()
