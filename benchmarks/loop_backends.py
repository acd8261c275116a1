"""The fused ON-LSTM's training pass with its time loop's products forced onto one backend at a
time: what each backend costs inside the loop, against what :mod:`treelm.kernels.gemm` measured
for it alone.

    python benchmarks/loop_backends.py [--size paper] [--backends panel onednn] [--rounds 5]
        [--repeats 5] [--out PATH]

Each round builds ``benchmarks/cells.py``'s ``onlstm.fused`` at ``--size`` once per backend, in
turns, with every loop product (``steps > 1``: the per-step products forward and backward) on
that backend and the single products chosen as usual, and times ``--repeats`` training passes
(forward + backward) after two warm-up passes; the median pass counts. The measured choice
(every backend tried alone, packing included) is recorded beside it, so the record shows where
the two disagree: on 2 Zen 5 cores at the paper's size the panels measured a few percent cheaper
alone and the forward's choice flipped to oneDNN on noise, costing 10% of the pass. Run it alone:
it is a timing.
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
from cells import SIZES, _runs, models  # noqa: E402
from common import write_result  # noqa: E402

from treelm.kernels import gemm  # noqa: E402
from treelm.kernels.gemm import choice  # noqa: E402


def passes(size: dict[str, int], backend: str, repeats: int) -> tuple[float, list[dict]]:
    """Median training pass (ms) with loop products on ``backend``, and the loop decisions."""
    real = choice.Measurement.best

    def best(self: choice.Measurement, steps: int, among: tuple[str, ...] = gemm.BACKENDS
             ) -> str:
        return backend if steps > 1 and backend in self.call_ms else real(self, steps, among)

    choice.Measurement.best = best      # type: ignore[method-assign]
    try:
        gemm.clear_cache()
        train = _runs(models()["onlstm.fused"], size, torch.device("cpu"))["train"]
        for _ in range(2):
            train()
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            train()
            ts.append(time.perf_counter() - t0)
        loops = [r for r in gemm.decisions() if r["steps"] > 1]
    finally:
        choice.Measurement.best = real  # type: ignore[method-assign]
    for r in loops:         # what the measurement alone would have taken
        m = choice.Measurement(r.get("call_ms", {}), r.get("pack_ms", {}))
        r["measured_choice"] = m.best(r["steps"]) if m.call_ms else None
    return statistics.median(ts) * 1e3, loops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="paper")
    ap.add_argument("--backends", nargs="+", default=["panel", "onednn"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, help="the record (default loop_backends-DATE.json)")
    args = ap.parse_args()
    size = SIZES[args.size]
    runs: dict[str, list[float]] = {b: [] for b in args.backends}
    decisions: dict[str, list[dict]] = {}
    for rnd in range(args.rounds):
        for b in args.backends:
            ms, loops = passes(size, b, args.repeats)
            runs[b].append(round(ms, 2))
            decisions.setdefault(b, loops)
            print(f"round {rnd + 1}: loop products on {b}: {ms:.1f} ms a pass", file=sys.stderr)
    result: dict[str, Any] = {
        "size": args.size, **{k: size[k] for k in size}, "threads": torch.get_num_threads(),
        "rounds": args.rounds, "repeats": args.repeats,
        "ms_per_pass": runs, "median_ms": {b: statistics.median(v) for b, v in runs.items()},
        "loop_decisions": decisions}
    write_result("loop_backends", result, path=args.out)


if __name__ == "__main__":
    main()
