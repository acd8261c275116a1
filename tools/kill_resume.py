"""Fault injection: SIGKILL a training at many random moments, resume each, compare with one run.

    nice -n 5 python tools/kill_resume.py --trials 50 --seed 0
    python tools/kill_resume.py --config configs/tiny-logic.yaml --trials 20

Trains ``--config`` (default ``configs/tiny-lm.yaml``, seconds) once straight through: the
reference. Then, ``--trials`` times, trains it again from the same seed, kills it with SIGKILL (no
warning, no handler) at a random moment, and continues it with ``treelm train --resume`` to the
end. A trial counts as

* **loadable** when the killed run opens with :func:`treelm.run.load_run` (its ``last`` and
  ``best`` checkpoints) and its last trainer state reads, before the resume touches it;
* **identical** when, after the resume, the final weights equal the reference's byte for byte
  (the ``last`` and ``best`` checkpoints' tensors, and the ``model.safetensors`` files) and the
  metrics log's events equal the reference's as ``tests/test_train.py``'s SIGKILL test compares
  them: every event, its step and its loss rounded to 1e-6. Each event's other fields, the times
  (``elapsed``, ``tok_s``) left out, are compared too and reported apart.

**When the kills fall.** Every run saves after every batch (``train.save_every_batches=1``, added
to the overrides), so that a large share of its time is spent inside checkpoint writes. A moment
is drawn (seeded by ``--seed``) as a checkpoint number ``k``, uniform over the reference's, and a
delay uniform over one step of the reference (its time per checkpoint): the kill comes that long
after ``checkpoint.json`` first names ``ckpt/k``. Drawn by progress rather than by the clock, the
moments spread over the whole run whatever else loads the machine (the step-0 checkpoint is the
earliest: before it a killed start leaves nothing to resume, by design, see
``treelm.train.persistence``). ``--aimed`` of the trials (default 0.3), after their moment, wait
for the next write to begin (a ``.*.tmp`` file in ``ckpt/``, polled every 0.5 ms) and kill then,
inside it. Where a kill fell is not assumed but read from what it left: an unfinished
``ckpt/N`` (a temporary file, or a directory newer than the one ``checkpoint.json`` names) is a
kill inside a checkpoint write; an older directory not named any more, a kill in the clean-up after
the pointer moved; a metrics line without its newline, a kill inside a log write. The record counts
each.

**Bit for bit.** Processes agree only if they compute alike: ``TREELM_GEMM`` is pinned
(``--gemm``, default ``mm``), ``TREELM_AUTO_PRECISION=fp32`` (as the test suite), and
``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` are 1 (the tiny configs train on one thread).

The record (``benchmarks/results/kill_resume-<YYYYMMDD>.json``) has the counts and every trial.
Run directories live in a temporary folder; a failing trial's is kept and named in the record.

It lives in ``tools/``, not ``benchmarks/``: it checks that a killed training resumes whole and
the same and measures no speed; its record goes where the benchmarks' go
(``benchmarks/common.py``), and ``benchmarks/report.py`` renders it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import write_result  # noqa: E402

TREELM = [sys.executable, "-m", "treelm.cli"]
TIMES = ("elapsed", "tok_s")        # fields that differ between any two runs


def _env(gemm: str) -> dict[str, str]:
    return {**os.environ, "TREELM_GEMM": gemm, "TREELM_AUTO_PRECISION": "fp32",
            "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _train_cmd(config: str, run: Path, overrides: list[str]) -> list[str]:
    return [*TREELM, "train", "--config", config, "--out", str(run), "--force", "--quiet",
            *overrides]


def _wait_pointer(run: Path, proc: subprocess.Popen) -> float | None:
    """Wait for the step-0 checkpoint (``checkpoint.json``); the time it appeared, or None when
    the process ended first."""
    pointer = run / "checkpoint.json"
    while not pointer.exists():
        if proc.poll() is not None:
            return None
        time.sleep(0.002)
    return time.perf_counter()


def _last_number(run: Path) -> int:
    """The number of the checkpoint ``checkpoint.json`` names as ``last`` (0 when unreadable)."""
    try:
        return int(json.loads((run / "checkpoint.json").read_text())["last"].split("/")[1])
    except (OSError, ValueError, KeyError):
        return 0


def _writing(run: Path) -> bool:
    """A checkpoint write under way: a temporary file in ``ckpt/`` or for the pointer."""
    if (run / ".checkpoint.json.tmp").exists():
        return True
    try:
        return any(name.startswith(".") for d in os.scandir(run / "ckpt") if d.is_dir()
                   for name in os.listdir(d.path))
    except FileNotFoundError:       # a directory removed while listed: the clean-up, not a write
        return False


def _aftermath(run: Path) -> dict[str, Any]:
    """Where the kill fell, read from what it left in the run directory."""
    ptr = json.loads((run / "checkpoint.json").read_text())
    named = {ptr["last"].split("/")[1], ptr["best"].split("/")[1]}
    dirs = sorted(d.name for d in (run / "ckpt").iterdir() if d.is_dir())
    tmp = sorted(str(p.relative_to(run)) for p in run.rglob(".*.tmp"))
    newer = [d for d in dirs if d not in named and d > max(named)]
    older = [d for d in dirs if d not in named and d < max(named)]
    log = (run / "metrics.jsonl").read_bytes()
    return {"in_checkpoint_write": bool(tmp or newer), "in_cleanup": bool(older),
            "partial_log_line": bool(log) and not log.endswith(b"\n"),
            "left": tmp + [f"ckpt/{d}" for d in newer + older],
            "last_good": ptr["last"]}


def _loadable(run: Path) -> tuple[bool, str]:
    from treelm.errors import TreelmError
    from treelm.run import load_run
    from treelm.rundir.checkpoint import load_trainer_state

    try:
        load_run(run, "last")
        load_run(run, "best")
        state = load_trainer_state(run)
        return True, f"step {state['loop']['step']}"
    except (TreelmError, OSError, KeyError) as e:
        return False, f"{type(e).__name__}: {e}"


def _events(run: Path) -> tuple[list[tuple], list[dict]]:
    """The SIGKILL test's view of the log (event, step, loss to 1e-6), and every field but the
    times."""
    from treelm.rundir.files import read_metrics

    records = read_metrics(run)
    curve = []
    for m in records:
        x = m.get("loss", m.get("best_valid_loss"))
        curve.append((m["event"], m["step"], None if x is None else round(x, 6)))
    fields = [{k: v for k, v in m.items() if k not in TIMES} for m in records]
    return curve, fields


def _weights(run: Path) -> dict[str, Any]:
    """The tensors of the ``last`` and ``best`` checkpoints as bytes, and the files' bytes."""
    from safetensors.torch import load_file

    from treelm.rundir.checkpoint import read_pointer

    ptr = read_pointer(run)
    out: dict[str, Any] = {}
    for which in ("last", "best"):
        path = run / ptr[which] / "model.safetensors"
        out[which] = {k: (str(t.dtype), tuple(t.shape), t.numpy().tobytes())
                      for k, t in load_file(str(path)).items()}
        out[f"{which}_file"] = path.read_bytes()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="configs/tiny-lm.yaml")
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    ap.add_argument("--aimed", type=float, default=0.3,
                    help="share of the trials that wait for a checkpoint write to kill in it")
    ap.add_argument("--gemm", default="mm", help="TREELM_GEMM for every process (default mm)")
    ap.add_argument("--keep", action="store_true", help="keep every trial's run directory")
    ap.add_argument("overrides", nargs="*", help="config overrides (key=value)")
    args = ap.parse_args()
    os.chdir(ROOT)                  # configs name their data relative to the repository
    env = _env(args.gemm)
    os.environ.update({k: env[k] for k in ("TREELM_GEMM", "TREELM_AUTO_PRECISION")})
    overrides = [*args.overrides, "train.save_every_batches=1"]
    work = Path(tempfile.mkdtemp(prefix="kill_resume-"))
    rng = random.Random(args.seed)

    # the reference, timed from its step-0 checkpoint to its end
    ref = work / "reference"
    t0 = time.perf_counter()
    proc = subprocess.Popen(_train_cmd(args.config, ref, overrides), env=env,
                            stdout=subprocess.DEVNULL)
    t_ptr = _wait_pointer(ref, proc)
    if proc.wait() != 0 or t_ptr is None:
        sys.exit(f"the reference run failed (exit {proc.returncode})")
    span = time.perf_counter() - t_ptr
    ref_seconds = time.perf_counter() - t0
    ref_curve, ref_fields = _events(ref)
    ref_w = _weights(ref)
    last = _last_number(ref)            # checkpoints the run writes, the step-0 one first
    step = span / max(1, last - 1)      # seconds per checkpoint (a batch and its save)
    print(f"reference: {ref_seconds:.1f} s, {span:.1f} s after its step-0 checkpoint; "
          f"{last} checkpoints, {len(ref_curve)} events", file=sys.stderr, flush=True)

    trials: list[dict[str, Any]] = []
    missed = 0
    while len(trials) < args.trials:
        i = len(trials)
        run = work / f"trial-{i:03d}"
        aimed = rng.random() < args.aimed
        target, delay = rng.randint(1, last), rng.uniform(0.0, step)
        t_start = time.perf_counter()
        proc = subprocess.Popen(_train_cmd(args.config, run, overrides), env=env,
                                stdout=subprocess.DEVNULL)
        t_ptr = _wait_pointer(run, proc)
        if t_ptr is None:
            sys.exit(f"trial {i}: the run ended before its step-0 checkpoint "
                     f"(exit {proc.returncode})")
        while _last_number(run) < target and proc.poll() is None:
            time.sleep(0.001)
        t_k = time.perf_counter()
        while time.perf_counter() - t_k < delay and proc.poll() is None:
            time.sleep(0.001)
        if aimed:
            while not _writing(run) and proc.poll() is None:
                time.sleep(0.0005)
        if proc.poll() is not None:         # it finished first: draw another moment
            missed += 1
            shutil.rmtree(run, ignore_errors=True)
            continue
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kill_s = time.perf_counter() - t_ptr
        trial: dict[str, Any] = {"trial": i, "aimed": aimed, "after_checkpoint": target,
                                 "delay_s": round(delay, 4),
                                 "kill_s_after_step0": round(kill_s, 3),
                                 "kill_s_after_start": round(time.perf_counter() - t_start, 3)}
        trial.update(_aftermath(run))
        trial["loadable"], trial["loaded"] = _loadable(run)
        res = subprocess.run([*TREELM, "train", "--resume", str(run), "--quiet"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        trial["resume_exit"] = res.returncode
        if res.returncode != 0:
            trial["resume_error"] = res.stderr.strip().splitlines()[-1:]
            trial["identical"] = trial["identical_fields"] = False
        else:
            curve, fields = _events(run)
            w = _weights(run)
            trial["same_events"] = curve == ref_curve
            trial["same_weights"] = all(w[k] == ref_w[k] for k in ("last", "best"))
            trial["same_weight_files"] = all(w[k] == ref_w[k] for k in ("last_file",
                                                                        "best_file"))
            trial["identical"] = trial["same_events"] and trial["same_weights"]
            trial["identical_fields"] = fields == ref_fields
            if not trial["identical"]:
                first = next((j for j, (a, b) in enumerate(zip(curve, ref_curve)) if a != b),
                             min(len(curve), len(ref_curve)))
                trial["first_difference"] = {"event": first,
                                             "resumed": curve[first:first + 1],
                                             "reference": ref_curve[first:first + 1]}
        ok = trial["loadable"] and trial["identical"]
        if ok and not args.keep:
            shutil.rmtree(run, ignore_errors=True)
        else:
            trial["run_dir"] = str(run)
        trials.append(trial)
        where = ("in a checkpoint write" if trial["in_checkpoint_write"] else
                 "in a clean-up" if trial["in_cleanup"] else "between writes")
        print(f"trial {i:3d}: killed {kill_s:6.2f} s after step 0 ({where}"
              f"{', aimed' if aimed else ''}), loadable {trial['loadable']}, "
              f"identical {trial['identical']}", file=sys.stderr, flush=True)

    n = len(trials)

    def count(key: str) -> int:
        return sum(bool(t.get(key)) for t in trials)

    record = {
        "config": args.config, "overrides": overrides, "seed": args.seed, "aimed": args.aimed,
        "env": {k: env[k] for k in ("TREELM_GEMM", "TREELM_AUTO_PRECISION", "OMP_NUM_THREADS",
                                    "MKL_NUM_THREADS")},
        "reference_seconds": round(ref_seconds, 2),
        "reference_seconds_after_step0": round(span, 2),
        "reference_events": len(ref_curve), "reference_checkpoints": last,
        "trials": n,
        "loadable": count("loadable"),
        "identical": count("identical"),
        "identical_all_fields_but_times": count("identical_fields"),
        "identical_weight_files": count("same_weight_files"),
        "loadable_percent": round(100 * count("loadable") / n, 1),
        "identical_percent": round(100 * count("identical") / n, 1),
        "kills_in_checkpoint_writes": count("in_checkpoint_write"),
        "kills_in_checkpoint_writes_aimed": sum(t["in_checkpoint_write"] and t["aimed"]
                                                for t in trials),
        "kills_in_cleanup": count("in_cleanup"),
        "kills_in_log_writes": count("partial_log_line"),
        "aimed_trials": count("aimed"),
        "draws_after_the_end": missed,
        "work_dir": str(work),
        "trial_records": trials,
    }
    write_result("kill_resume", record, folder="tools")
    if all(t["loadable"] and t["identical"] for t in trials) and not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
