"""A change to the C++ time loops, timed against the build before it: the ON-LSTM's forward and
backward loops of two builds of the extension, taking turns in one process.

    python benchmarks/loops_ab.py --old ../treelm-old [--rounds 15] [--calls 10]
        [--sizes "tree, batch 20" ...] [--threads 2] [--out PATH]

``--old``: a checkout of the commit before (a ``git worktree``); its loops are built (or found
in the cache of built loops) by its own ``treelm.kernels.build`` in a subprocess, and both
extensions are then loaded here side by side (their names differ by their sources' hash). Each
size of ``loop_schedules``' table (the tree config's layer at its training batch 20 and its
evaluation batch 64, the paper's at batch 20), in float32 and, where the panels take it
(``panel_bf16()``), with autocast's bfloat16 products: a round is ``--calls`` forward loops
(saving for backward) and as many backward loops of each build, the order alternating from
round to round, so that a machine whose speed drifts slows both alike. The panel products
throughout (``gemm.use_backend("panel")``), each thread owning its rows as the loops choose by
default. Before timing, both builds' outputs are compared: ``same_bits`` (a change to how the
loops fetch or schedule must leave every number as it was). Per loop the median ms a call of
each build, ``new_over_old`` (the median of the rounds' ratios: below 1 the new is faster) and
``rounds_new_faster``.

Why apart from ``step_ab.py``: a change worth 2-4% of the loops is about 0.5% of a training
step, which rounds of whole steps on a shared 2-core VM (±10% over minutes) cannot resolve; the
loops alone can. Run it alone on the machine (the timing lock, ``DEVELOPERS.md``); the record is
``benchmarks/results/loops_ab-DATE.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from treelm import omp  # noqa: E402

omp.configure()     # the OpenMP wait `treelm train` runs with, before torch loads libgomp
import torch  # noqa: E402
from common import result_path, write_result  # noqa: E402
from loop_schedules import SIZES  # noqa: E402

from treelm.kernels import build, gemm  # noqa: E402
from treelm.kernels.gemm import step_matmul  # noqa: E402
from treelm.kernels.sequence import cxx_operands  # noqa: E402

_OLD_BUILD = "from treelm.kernels import build; m = build.load(); print(m.__file__ if m else '')"


def old_extension(tree: Path) -> ModuleType:
    """The loops of the checkout ``tree``, built there by its own build module if need be."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    res = subprocess.run([sys.executable, "-c", _OLD_BUILD], cwd=tree, env=env,
                         capture_output=True, text=True)
    path = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
    if res.returncode or not path:
        sys.exit(f"loops_ab: {tree}: its loops did not build: {res.stderr.strip()[-300:]}")
    spec = importlib.util.spec_from_file_location(Path(path).name.split(".")[0], path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compare(exts: dict[str, ModuleType], size: tuple[int, int, int, int],
            low: torch.dtype | None, rounds: int, calls: int) -> dict[str, Any]:
    """One size and dtype: both builds' bits compared, then ``rounds`` alternating rounds."""
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
    outputs = {}
    for name, ext in exts.items():
        saved = ext.forward(xp, h0, c0, *fwd, L, True, True)
        M, gates, P, cs, tanh_c = saved[4:9]
        back = ext.backward(dout, None, None, None, None, gates, P, M, cs, tanh_c, *bwd, True)
        outputs[name] = [t for t in (*saved, *back) if t is not None and t.numel()]
    same = all(torch.equal(a, b) for a, b in zip(outputs["old"], outputs["new"]))
    M, gates, P, cs, tanh_c = exts["old"].forward(xp, h0, c0, *fwd, L, True, True)[4:9]

    def run(ext: ModuleType) -> tuple[float, float]:
        t0 = time.perf_counter()
        for _ in range(calls):
            ext.forward(xp, h0, c0, *fwd, L, True, True)
        t1 = time.perf_counter()
        for _ in range(calls):
            ext.backward(dout, None, None, None, None, gates, P, M, cs, tanh_c, *bwd, True)
        t2 = time.perf_counter()
        return (t1 - t0) / calls, (t2 - t1) / calls

    for ext in exts.values():       # warm-up: buffers, caches
        run(ext)
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in exts}
    for i in range(rounds):
        for name in (("old", "new") if i % 2 == 0 else ("new", "old")):
            times[name].append(run(exts[name]))
    out: dict[str, Any] = {"T": T, "B": B, "H": H, "levels": L,
                           "dtype": "bfloat16" if low is not None else "float32",
                           "same_bits": same}
    for j, loop in enumerate(("forward", "backward")):
        old = [t[j] for t in times["old"]]
        new = [t[j] for t in times["new"]]
        ratios = [n / o for n, o in zip(new, old)]
        out[loop] = {"ms_old": round(1e3 * statistics.median(old), 3),
                     "ms_new": round(1e3 * statistics.median(new), 3),
                     "new_over_old": round(statistics.median(ratios), 3),
                     "rounds_new_faster": sum(r < 1 for r in ratios)}
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, required=True, help="a checkout of the commit before")
    ap.add_argument("--rounds", type=int, default=15, help="alternating rounds (default 15)")
    ap.add_argument("--calls", type=int, default=10, help="loops per build a round (10)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    ap.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=list(SIZES))
    ap.add_argument("--out", type=Path, help="the record (default loops_ab-DATE.json)")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.calls < 1 or args.threads < 1:
        ap.error("--rounds, --calls and --threads must be >= 1")
    if not (args.old / "treelm" / "kernels" / "build.py").is_file():
        ap.error(f"--old {args.old}: not a treelm checkout")
    new = build.load()
    if new is None:
        sys.exit(f"loops_ab: the C++ loops are not available: {build.unavailable_reason()}")
    exts = {"old": old_extension(args.old.resolve()), "new": new}
    if exts["old"].__name__ == new.__name__:
        sys.exit(f"loops_ab: {args.old} builds the same loops as this tree ({new.__name__})")
    torch.set_num_threads(args.threads)
    dtypes = [None] + ([torch.bfloat16] if new.panel_bf16() else [])
    results = []
    for name in args.sizes:
        for low in dtypes:
            r = {"size": name, **compare(exts, SIZES[name], low, args.rounds, args.calls)}
            print(f"{name:20s} {r['dtype']:8s} same bits {r['same_bits']}  "
                  + "  ".join(f"{k} {r[k]['ms_old']:.2f} -> {r[k]['ms_new']:.2f} ms "
                              f"(x{r[k]['new_over_old']}, {r[k]['rounds_new_faster']}/"
                              f"{args.rounds})" for k in ("forward", "backward")),
                  file=sys.stderr)
            results.append(r)
    record = {"old": str(args.old), "old_build": exts["old"].__name__,
              "new_build": new.__name__, "threads": args.threads, "rounds": args.rounds,
              "calls": args.calls, "results": results}
    return write_result("loops_ab", record, path=args.out or result_path("loops_ab"))


if __name__ == "__main__":
    main()
