"""How fast a trained translation run decodes: sentences per second with the incremental decoder
state (each new symbol costs one decoder step) and without it (each new symbol recomputes the
decoder over the whole prefix, and the encoder too), greedy and beam 5.

    python benchmarks/decode_speed.py RUN [RUN ...] [--n 200] [--batch 50] [--beams 1 5]
        [--threads 2] [--out FILE]

The first ``--n`` test sentences of each run's own test split, batches of ``--batch``, through the
task's search (``Task.translate``, the one ``treelm translate`` and ``treelm eval`` run), one
untimed warm-up batch first. The runs come from ``treelm study studies/multi30k.yaml`` (what
``benchmarks/translate_budget.py`` trained and timed in one go before). Run it alone: the
figures are wall-clock. The record: ``benchmarks/results/decode_speed-<YYYYMMDD>.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import repo_path, write_result  # noqa: E402


def speed(task: Any, model: Any, sentences: list[str], beam: int, batch: int,
          incremental: bool) -> float:
    """Sentences translated per second (one untimed warm-up batch first)."""
    task.translate(model, sentences[:batch], beam, batch_size=batch, incremental=incremental)
    t0 = time.perf_counter()
    task.translate(model, sentences, beam, batch_size=batch, incremental=incremental)
    return len(sentences) / (time.perf_counter() - t0)


def measure(run: Path, n: int, batch: int, beams: list[int]) -> dict[str, Any]:
    """One run's sentences per second, per beam, incremental and recomputed."""
    from treelm.run import load_run

    r = load_run(run)
    sents = r.task.split("test").src[:n]
    return {"parameters": sum(p.numel() for p in r.model.parameters()),
            "sentences": len(sents), "batch": batch,
            "sentences_per_s": {f"beam{b}_{'incremental' if inc else 'recompute'}":
                                round(speed(r.task, r.model, sents, b, batch, inc), 2)
                                for b in beams for inc in (True, False)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="trained translation run directories")
    ap.add_argument("--n", type=int, default=200, help="test sentences timed (200)")
    ap.add_argument("--batch", type=int, default=50, help="sentences per batch (50)")
    ap.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, help="the record's path (default: the dated file)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    runs = {repo_path(run): measure(run, args.n, args.batch, args.beams) for run in args.runs}
    write_result("decode_speed", {"runs": runs}, path=args.out)


if __name__ == "__main__":
    main()
