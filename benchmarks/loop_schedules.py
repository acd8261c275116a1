"""The C++ ON-LSTM's time loops under their two schedules, taking turns in one process: threads
that own a run of the batch's rows for the whole sequence (one parallel region), against a region
per step's product and one per step's gate pass (``treelm/kernels/csrc/onlstm.cpp``).

    python benchmarks/loop_schedules.py [--pairs 30] [--calls 10] [--threads 2] [--out PATH]

Both schedules run the panel products (``gemm.use_backend("panel")``) and give the same bits
(``tests/test_kernels_onlstm_cxx.py``); only the time differs. For each size (the tree config's
layer at its training batch 20 and its evaluation batch 64, the paper's layer at batch 20) and
dtype (float32; bfloat16 products, autocast's, where the panels take them: ``panel_bf16()``),
a pair is ``--calls`` forward loops (saving for backward) and as many backward loops under each
schedule, the order alternating from pair to pair, so that a machine whose speed drifts slows
both alike. Per schedule the median ms per call; ``rows_over_steps`` the median of the pairs'
ratios (below 1: owning rows is faster) and ``pairs_rows_faster``. ``panel_mib`` is the size of
the panels each thread reads whole at every step when it owns rows: the loops take that schedule
by default only up to ``ROWS_PANEL_BYTES`` (``csrc/common.h``: 4 MiB), which these figures
chose. Run it alone on the machine (the timing lock, ``DEVELOPERS.md``); the record is
``benchmarks/results/loop_schedules-DATE.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
from common import result_path, write_result  # noqa: E402

from treelm.kernels import build, gemm  # noqa: E402
from treelm.kernels.gemm import step_matmul  # noqa: E402
from treelm.kernels.sequence import cxx_operands  # noqa: E402

#: name: (T, B, H, levels)
SIZES = {
    "tree, batch 20": (70, 20, 400, 40),
    "tree, eval batch 64": (70, 64, 400, 40),
    "paper, batch 20": (70, 20, 1150, 115),
}
SCHEDULES = {"rows": 2, "steps": 0}     # the loops' `rows` argument: own rows, per step


def measure(ext: Any, size: tuple[int, int, int, int], low: torch.dtype | None, pairs: int,
            calls: int) -> dict[str, Any]:
    """One size and dtype: both schedules, ``pairs`` alternating pairs."""
    T, B, H, L = size
    G = 4 * H + 2 * L
    torch.manual_seed(0)
    xp = torch.randn(T, B, G)
    xp = xp.to(low) if low is not None else xp
    h0, c0 = torch.zeros(B, H), torch.zeros(B, H)
    u = torch.randn(G, H) * (1 / H ** 0.5)
    dout = torch.randn(T, B, H)
    with gemm.use_backend("panel"):
        fwd = cxx_operands(step_matmul(u, B, T, False, low))
        bwd = cxx_operands(step_matmul(u, B, T, True, low))
    saved = ext.forward(xp, h0, c0, *fwd, L, True, True)
    M, gates, P, cs, tanh_c = saved[4:9]

    def run(rows: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        for _ in range(calls):
            ext.forward(xp, h0, c0, *fwd, L, True, True, rows)
        t1 = time.perf_counter()
        for _ in range(calls):
            ext.backward(dout, None, None, None, None, gates, P, M, cs, tanh_c, *bwd, True, rows)
        t2 = time.perf_counter()
        return (t1 - t0) / calls, (t2 - t1) / calls

    for rows in SCHEDULES.values():     # warm-up: buffers, caches
        run(rows)
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in SCHEDULES}
    for i in range(pairs):
        order = list(SCHEDULES) if i % 2 == 0 else list(reversed(SCHEDULES))
        for name in order:
            times[name].append(run(SCHEDULES[name]))
    out: dict[str, Any] = {"T": T, "B": B, "H": H, "levels": L,
                           "dtype": "bfloat16" if low is not None else "float32",
                           "panel_mib": {"forward": round(fwd[2].nbytes / 2 ** 20, 2),
                                         "backward": round(bwd[2].nbytes / 2 ** 20, 2)}}
    for j, loop in enumerate(("forward", "backward")):
        rows = [t[j] for t in times["rows"]]
        steps = [t[j] for t in times["steps"]]
        out[loop] = {
            "ms_rows": round(1e3 * statistics.median(rows), 3),
            "ms_steps": round(1e3 * statistics.median(steps), 3),
            "rows_over_steps": round(statistics.median(r / s for r, s in zip(rows, steps)), 3),
            "pairs_rows_faster": sum(r < s for r, s in zip(rows, steps)),
        }
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=30, help="alternating pairs (default 30)")
    ap.add_argument("--calls", type=int, default=10, help="loops per schedule a pair (10)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    ap.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=list(SIZES))
    ap.add_argument("--out", type=Path, help="the record (default loop_schedules-DATE.json)")
    args = ap.parse_args(argv)
    if args.pairs < 1 or args.calls < 1 or args.threads < 1:
        ap.error("--pairs, --calls and --threads must be >= 1")
    ext = build.load()
    if ext is None:
        sys.exit(f"loop_schedules: the C++ loops are not available: {build.unavailable_reason()}")
    torch.set_num_threads(args.threads)
    dtypes = [None] + ([torch.bfloat16] if ext.panel_bf16() else [])
    results = []
    for name in args.sizes:
        for low in dtypes:
            r = {"size": name, **measure(ext, SIZES[name], low, args.pairs, args.calls)}
            print(f"{name:20s} {r['dtype']:8s} panels {r['panel_mib']['forward']:6.2f} MiB  "
                  + "  ".join(f"{k} {r[k]['ms_steps']:.2f} -> {r[k]['ms_rows']:.2f} ms "
                              f"(x{r[k]['rows_over_steps']}, {r[k]['pairs_rows_faster']}/"
                              f"{args.pairs})" for k in ("forward", "backward")),
                  file=sys.stderr)
            results.append(r)
    record = {"threads": args.threads, "pairs": args.pairs, "calls": args.calls,
              "results": results}
    return write_result("loop_schedules", record,
                        path=args.out or result_path("loop_schedules"))


if __name__ == "__main__":
    main()
