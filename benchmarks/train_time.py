"""How long one training takes, whole (start-up, validations and tree scores included): the
figure the README gives beside its first commands ("Trees in ten CPU minutes").

    NLTK_DATA=../shared/data/nltk_data python benchmarks/train_time.py \
        [--config configs/ptb-onlstm-trees.yaml] [--run DIR] [--from-run DIR] [--isa avx2]
        [--out FILE] [key=value ...]

Trains ``--config`` with ``treelm train`` into ``--run`` (a temporary directory by default) and
records, from the run's own metrics log, its wall time (the ``done`` event's elapsed: the whole
run as ``train.max_minutes`` counts it), tokens, precision (``auto``'s choice and why), threads,
the final validation and its tree F1, and the run's own account of its time by phase (start,
steps, validation, checkpoints, the loop's rest: ``Trainer``'s ``seconds_by_phase``) with the
steps' own tokens/s, which ``benchmarks/step_profile.py`` measures apart, and the GEMM backends
the run measured and chose (``gemm_choices``). ``--from-run``
records a run already trained that way (alone on the machine, with the command given) instead
of training one. Run it alone: it is a timing.

``--isa avx2`` trains on the AVX2 path of a CPU that has more (AVX-512): PyTorch, MKL, oneDNN
and treelm's C++ loops limited to AVX2 and FMA, as ``benchmarks/cells.py --isa`` does; the record
says ``"proxy": "avx2"`` and its variables. A proxy, not an AVX2 CPU: the caches, clocks and
memory are this machine's. ``benchmarks/train_time_classes.sh`` records the three CPU classes
the README gives (bf16 where ``auto`` takes it, fp32, the AVX2 proxy).
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
from common import ISA_PROXIES, isa_environment, isa_record, write_result  # noqa: E402


def summary(run: Path) -> dict[str, Any]:
    from treelm.rundir.files import read_metrics

    done = read_metrics(run, "done")[-1]
    valid = read_metrics(run, "valid")
    precision = read_metrics(run, "precision")
    threads = {e.get("threads") for e in read_metrics(run, "train")}
    phases = done.get("seconds_by_phase") or {}
    account = {}
    if phases:      # the run's own account of its time (runs before it have none)
        account = {"seconds_by_phase": phases,
                   "share_by_phase": {p: round(v / done["elapsed"], 4) for p, v in phases.items()},
                   # the optimisation steps alone, as step_profile times them
                   "step_tokens_per_s": round(done["tokens"] / phases["steps"]),
                   "whole_over_steps": round(phases["steps"] / done["elapsed"], 4)}
    return {"minutes": round(done["elapsed"] / 60, 2), "seconds": round(done["elapsed"], 1),
            "tokens": done["tokens"], "tokens_per_s": round(done["tokens"] / done["elapsed"]),
            "precision": done.get("precision"),
            "precision_reason": precision[0].get("reason") if precision else None,
            "threads": sorted(t for t in threads if t is not None),
            "validations": len(valid), "best_valid_ppl": done.get("best_valid_ppl"),
            "final_tree_f1": {k.removeprefix("parse_f1/"): v for k, v in valid[-1].items()
                              if k.startswith("parse_f1/")} if valid else {}, **account}


def gemm_choices(run: Path, steps: int) -> list[dict[str, Any]]:
    """The products' backends the run measured (its last checkpoint carries them, for a
    resume): per shape the best time per call and packing of each backend, in ms, and the one
    chosen, a loop's for ``steps`` steps (the config's BPTT; variable BPTT moves it a little).
    Why in the record: each process measures its own choices, and among near ties they flip,
    so two runs of one code differ in speed and rounding; this says which choices a run made."""
    from treelm.kernels.gemm.choice import Measurement, ShapeKey
    from treelm.rundir.checkpoint import load_trainer_state

    rows = []
    for row in load_trainer_state(run).get("gemm", []):
        key, m = ShapeKey(**row["key"]), Measurement(row["call_ms"], row["pack_ms"])
        if not m.call_ms:
            continue
        n = 1 if key.once else steps
        rows.append({"product": key.describe(), "steps": n, "chosen": m.best(n),
                     "call_ms": {b: round(v, 4) for b, v in m.call_ms.items()},
                     "pack_ms": {b: round(v, 4) for b, v in m.pack_ms.items()}})
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="configs/ptb-onlstm-trees.yaml")
    ap.add_argument("--run", type=Path, help="run directory to train into (default: temporary)")
    ap.add_argument("--from-run", type=Path, help="record this finished run instead of training")
    ap.add_argument("--trained-by", help="with --from-run: the command that trained it")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--isa", choices=sorted(ISA_PROXIES),
                    help="train on this instruction set's path (the AVX2 proxy on AVX-512)")
    ap.add_argument("overrides", nargs="*", metavar="key=value")
    args = ap.parse_args(argv)
    if args.isa and args.from_run is None:
        isa_environment(ap, args.isa, from_python=argv is not None)
    with tempfile.TemporaryDirectory(prefix="train_time-") as d:
        run = args.from_run or args.run or Path(d) / "run"
        trained_by = args.trained_by
        if args.from_run is None:
            cmd = [sys.executable, "-m", "treelm.cli", "train", "--config", args.config,
                   "--out", str(run), "--force", "--quiet", *args.overrides]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            trained_by = " ".join(["treelm", *cmd[3:]])
        record = {"config": args.config, "trained_by": trained_by,
                  **(isa_record(args.isa) if args.isa else {}), **summary(run)}
        record["gemm_choices"] = gemm_choices(run, _bptt(run))
    return write_result("train_time", record, path=args.out)


def _bptt(run: Path) -> int:
    """The run's ``train.bptt``, from the config it saved (a loop's steps for
    :func:`gemm_choices`; with ``--from-run`` too, whatever ``--config`` says)."""
    from treelm.config import load_config
    from treelm.rundir.files import RunFiles
    from treelm.tasks import saved_config

    return int(saved_config(load_config(RunFiles(run).config))["train"].get("bptt", 70))


if __name__ == "__main__":
    main()
