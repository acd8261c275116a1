"""How long one training takes, whole (start-up, validations and tree scores included): the
figure the README gives beside its first commands ("Trees in ten CPU minutes").

    NLTK_DATA=../shared/data/nltk_data python benchmarks/train_time.py \
        [--config configs/ptb-onlstm-trees.yaml] [--run DIR] [--from-run DIR] [key=value ...]

Trains ``--config`` with ``treelm train`` into ``--run`` (a temporary directory by default) and
records, from the run's own metrics log, its wall time (the ``done`` event's elapsed: the whole
run as ``train.max_minutes`` counts it), tokens, precision (``auto``'s choice and why), threads,
the final validation and its tree F1. ``--from-run`` records a run already trained that way
(alone on the machine, with the command given) instead of training one. Run it alone: it is a
timing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import write_result  # noqa: E402


def summary(run: Path) -> dict[str, Any]:
    from treelm.rundir.files import read_metrics

    done = read_metrics(run, "done")[-1]
    valid = read_metrics(run, "valid")
    precision = read_metrics(run, "precision")
    threads = {e.get("threads") for e in read_metrics(run, "train")}
    return {"minutes": round(done["elapsed"] / 60, 2), "seconds": round(done["elapsed"], 1),
            "tokens": done["tokens"], "tokens_per_s": round(done["tokens"] / done["elapsed"]),
            "precision": done.get("precision"),
            "precision_reason": precision[0].get("reason") if precision else None,
            "threads": sorted(t for t in threads if t is not None),
            "validations": len(valid), "best_valid_ppl": done.get("best_valid_ppl"),
            "final_tree_f1": {k.removeprefix("parse_f1/"): v for k, v in valid[-1].items()
                              if k.startswith("parse_f1/")} if valid else {}}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="configs/ptb-onlstm-trees.yaml")
    ap.add_argument("--run", type=Path, help="run directory to train into (default: temporary)")
    ap.add_argument("--from-run", type=Path, help="record this finished run instead of training")
    ap.add_argument("--trained-by", help="with --from-run: the command that trained it")
    ap.add_argument("--out", type=Path)
    ap.add_argument("overrides", nargs="*", metavar="key=value")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="train_time-") as d:
        run = args.from_run or args.run or Path(d) / "run"
        trained_by = args.trained_by
        if args.from_run is None:
            cmd = [sys.executable, "-m", "treelm.cli", "train", "--config", args.config,
                   "--out", str(run), "--force", "--quiet", *args.overrides]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            trained_by = " ".join(["treelm", *cmd[3:]])
        record = {"config": args.config, "trained_by": trained_by, **summary(run)}
    return write_result("train_time", record, path=args.out)


if __name__ == "__main__":
    main()
