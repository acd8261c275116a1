"""Kill a training run with SIGKILL mid-epoch, resume it, and compare with an uninterrupted run.

    python benchmarks/resume_check.py --config configs/ptb-onlstm-cpu.yaml --kill-after 90 \
        model.sizes=[200,200,200,200] train.epochs=1 train.max_minutes=null \
        train.lr_schedule=constant train.save_every_minutes=0.5

Trains the config twice from the same seed: once straight through, once killed (SIGKILL, no
warning) ``--kill-after`` seconds in and then continued with ``treelm train --resume``. Reports the
final validation figure of both, their relative difference and whether the logged loss curves are
identical, as JSON in ``benchmarks/results/resume_check-<YYYYMMDD>.json``. Use an epoch-bounded
budget (``train.max_minutes=null``): a wall-time budget or a time-based learning-rate schedule
depends on how fast each run happens to go, by design.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from treelm.rundir.files import read_metrics  # noqa: E402

TREELM = [sys.executable, "-m", "treelm.cli"]


def curve(run: Path) -> list[tuple]:
    return [(m["event"], m["step"], m.get("loss")) for m in read_metrics(run)
            if m["event"] != "done"]


def final(run: Path) -> dict:
    return read_metrics(run, "done")[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--kill-after", type=float, default=60.0, help="seconds before SIGKILL")
    ap.add_argument("--runs", default="runs/resume_check")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    ref, killed = Path(args.runs) / "uninterrupted", Path(args.runs) / "killed"
    base = ["train", "--config", args.config, "--force", "--quiet", *args.overrides]
    t0 = time.perf_counter()
    subprocess.run([*TREELM, *base, "--out", str(ref)], check=True)
    t_ref = time.perf_counter() - t0
    proc = subprocess.Popen([*TREELM, *base, "--out", str(killed)])
    time.sleep(args.kill_after)
    if proc.poll() is not None:
        sys.exit("the run finished before --kill-after; kill earlier")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    subprocess.run([*TREELM, "train", "--resume", str(killed), "--quiet"], check=True)
    a, b = final(ref), final(killed)
    key = next(k for k in a if k.startswith("best_valid_") and k != "best_valid_loss")
    rel = abs(a[key] - b[key]) / a[key]
    write_result("resume_check", {
        "config": args.config, "overrides": args.overrides, "kill_after_s": args.kill_after,
        "uninterrupted_seconds": round(t_ref, 1),
        f"uninterrupted_{key}": a[key], f"resumed_{key}": b[key],
        "relative_difference": rel, "within_0.5_percent": rel <= 0.005,
        "identical_loss_curves": curve(ref) == curve(killed),
    })


if __name__ == "__main__":
    main()
