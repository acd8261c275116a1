"""What the tree study (``benchmarks/trees.py``) and the tree screen (``trees_screen.py``) both do
with a run: train it to its end as a child ``treelm train``, tell whether it finished or another
process is training it, read its validation curve, and sum figures over seeds.

A child training dies with the process that started it (``PR_SET_PDEATHSIG``: SIGTERM, on which
``treelm train`` saves a checkpoint and stops), so a killed worker leaves no orphan holding the
run's lock; a run whose lock is held anyway (a training started by hand, or by a worker on
another machine sharing the filesystem) is reported as held, not retrained.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import signal
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

RULES = ("official", "split")
#: The baselines scored beside the runs, in table order.
BASELINES = ("right_branching", "left_branching", "balanced", "random",
             "random_levels_official", "random_levels_split")


class StudyError(Exception):
    """A problem with the arguments, a run or the record; printed as one line."""


try:     # looked up now, in the parent: the child between fork and exec only calls it
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _PRCTL = None


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent dies (Linux; elsewhere nothing)."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)       # PR_SET_PDEATHSIG


def run_command(cmd: list[str]) -> int:
    """Run one training to its end (tests replace the callers' reference to see commands)."""
    return subprocess.run(cmd, preexec_fn=_die_with_parent).returncode


def last_done(run: Path) -> dict[str, Any] | None:
    """The run's last ``done`` event (None before it has finished once)."""
    from treelm.rundir.files import RunFiles, read_metrics

    if not RunFiles(run).metrics.exists():
        return None
    done = read_metrics(run, "done")
    return done[-1] if done else None


def finished(run: Path) -> bool:
    return last_done(run) is not None


def held(run: Path) -> bool:
    """Whether a live process holds ``run``'s writer lock (it is training it), found without
    writing to ``run``: a shared ``flock`` on the lock file, read-only, fails while a writer
    holds its exclusive one (:mod:`treelm.rundir.lock`)."""
    import fcntl

    from treelm.rundir.files import RunFiles

    try:
        fd = os.open(RunFiles(run).lock, os.O_RDONLY)
    except FileNotFoundError:           # a writer holds the file as long as it holds the lock
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)                    # (which drops a shared lock taken)
    return False


def train_to_end(cmd: list[str], run: Path, runner: Callable[[list[str]], int]) -> None:
    """Train ``run`` with ``cmd`` through ``runner``; :class:`StudyError` unless it finished."""
    print("+", shlex.join(["treelm", *cmd[3:]]), file=sys.stderr, flush=True)
    code = runner(cmd)
    if code == 130:
        raise StudyError(f"{run}: training interrupted; rerun the same command to continue")
    if code != 0 or not finished(run):
        raise StudyError(f"{run}: training failed (exit {code}); rerun the same command to "
                         f"continue it")


def curve(run: Path) -> list[dict[str, float]]:
    """The validations of a run: tokens, minutes, perplexity and the logged tree F1."""
    from treelm.rundir.files import read_metrics

    return [{"tokens": v["tokens"], "minutes": round(v["elapsed"] / 60, 3), "ppl": v.get("ppl"),
             **{k.removeprefix("parse_f1/"): v[k] for k in v if k.startswith("parse_f1/")}}
            for v in read_metrics(run, "valid")]


def mean_std(values: Sequence[float]) -> dict[str, Any]:
    """Mean, sample standard deviation (0 for one value), count and the values."""
    vals = [float(v) for v in values]
    return {"mean": statistics.fmean(vals), "std": statistics.stdev(vals) if len(vals) > 1
            else 0.0, "n": len(vals), "runs": vals}
