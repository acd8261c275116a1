"""What a study's runs rely on, carried over from the tree scripts' tests when ``treelm study``
replaced them (``benchmarks/trees_screen.py``, ``tree_runs.py``):

- a budget in tokens validates on token multiples (``train.eval_every_units``), so that a run's
  curve and its end are the same points on any machine, however loaded;
- the training child of a study's job dies with the job however the job dies (SIGKILL included:
  ``PR_SET_PDEATHSIG`` sends it SIGTERM, on which ``treelm train`` saves and stops), so that no
  orphan holds the run's lock, and it does not die of submitit's SIGUSR2.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from treelm.cli import main as treelm
from treelm.rundir.files import read_metrics

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "data" / "tiny.txt"


def test_eval_every_units_validates_on_multiples(tmp_path):
    run = tmp_path / "r"
    assert treelm(["train", "--config", str(ROOT / "configs" / "tiny-lm.yaml"), "--out",
                   str(run), f"data.file={TINY}", "train.max_units=1000",
                   "train.eval_every_units=250", "train.epochs=100", "--quiet"]) == 0
    valids = read_metrics(run, "valid")
    periodic = [v for v in valids if not v.get("epoch_end") and not v.get("budget_end")]
    assert [v["tokens"] // 250 for v in periodic] == [1, 2, 3]
    # the batch that crosses 1000 ends the budget: one final validation, not two
    assert valids[-1].get("budget_end") and sum(v["tokens"] >= 1000 for v in valids) == 1


def _wait_for(path: Path, timeout: float = 10.0) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


def _gone(pid: int, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_training_dies_with_the_job_that_started_it_and_ignores_usr2(tmp_path):
    """The job's child setup (``treelm.study.job``): USR2 leaves the child alone; SIGKILL of the
    job reaches the child as SIGTERM."""
    pid_file, term = tmp_path / "child.pid", tmp_path / "child.term"
    child = (f"import os, signal, sys, time; "
             f"signal.signal(signal.SIGTERM, lambda *_: (open({str(term)!r}, 'w').write('x'), "
             f"sys.exit(0))); open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
             f"time.sleep(120)")
    job = ("import subprocess, sys; from treelm.study.job import _child_setup; "
           f"subprocess.Popen([sys.executable, '-c', {child!r}], preexec_fn=_child_setup).wait()")
    worker = subprocess.Popen([sys.executable, "-c", job])
    pid = None
    try:
        pid = int(_wait_for(pid_file))
        time.sleep(0.2)                    # (the child's handlers are set before it writes)
        os.kill(pid, signal.SIGUSR2)
        assert not _gone(pid, 0.5), "SIGUSR2 killed the training child"
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        assert _gone(pid), "the child outlived its job"
        assert term.exists(), "the child died without SIGTERM"
    finally:
        worker.kill()
        if pid is not None and not _gone(pid, 0.1):
            os.kill(pid, signal.SIGKILL)
