"""The one-node Slurm of ``tests/slurm_cluster.py`` (the ``slurm_cluster`` fixture, registered in
conftest): a batch job, a requeue, USR2 delivery, the sacct shim and a submitit round trip (skipped
with one line where Slurm cannot start)."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest


def _wait_for(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} not written after {timeout}s"
        time.sleep(0.1)


def test_batch_job_runs_and_writes_its_output(slurm_cluster, tmp_path):
    out = tmp_path / "out.txt"
    job = slurm_cluster.sbatch(f"--output={out}", "--wrap", "echo hi from $SLURM_JOB_ID")
    slurm_cluster.wait_state(job)
    assert out.read_text() == f"hi from {job}\n", slurm_cluster.logs()


def test_requeued_job_runs_again(slurm_cluster, tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out.txt"
    job = slurm_cluster.sbatch(
        "--requeue", "--open-mode=append", f"--output={out}", "--wrap",
        f"echo ${{SLURM_RESTART_COUNT:-0}} >> {runs}; sleep 2")
    _wait_for(runs)
    slurm_cluster.run("scontrol", "requeue", job)
    slurm_cluster.release(job)  # else it waits out the requeue delay
    info = slurm_cluster.wait_state(job)
    assert runs.read_text().split() == ["0", "1"], (out.read_text(), slurm_cluster.logs())
    assert info["Restarts"] == "1"


SIGNALLED = """\
import os, signal, subprocess, sys, time
folder, role = sys.argv[1:]
signal.signal(signal.SIGUSR2, lambda *_: open(f"{folder}/{role}.usr2", "w").close())
if role == "step":
    kids = [subprocess.Popen([sys.executable, __file__, folder, "child"]),
            subprocess.Popen([sys.executable, __file__, folder, "session"],
                             start_new_session=True)]
open(f"{folder}/{role}.ready", "w").close()
deadline = time.time() + 20
while not os.path.exists(f"{folder}/{role}.usr2") and time.time() < deadline:
    time.sleep(0.05)
if role == "step":
    for kid in kids:
        kid.wait()
"""


def test_usr2_reaches_the_step_and_its_children(slurm_cluster, tmp_path):
    """``scancel --signal=USR2 JOBID`` (what submitit's ``_interrupt`` sends, and what
    ``--signal=USR2@90`` sends at the time limit) reaches every process of the srun step:
    proctrack/linuxproc signals the step's whole process tree, a child in its own session too."""
    script = tmp_path / "signalled.py"
    script.write_text(SIGNALLED)
    job = slurm_cluster.sbatch(
        "--signal=USR2@90", f"--output={tmp_path / 'out.txt'}", "--wrap",
        f"srun --unbuffered {sys.executable} {script} {tmp_path} step")
    for role in ("step", "child", "session"):
        _wait_for(tmp_path / f"{role}.ready")
    slurm_cluster.run("scancel", "--signal=USR2", job)
    slurm_cluster.wait_state(job)
    got = sorted(p.stem for p in tmp_path.glob("*.usr2"))
    assert got == ["child", "session", "step"], slurm_cluster.logs()


def test_submitit_round_trip(slurm_cluster, tmp_path, monkeypatch):
    submitit = pytest.importorskip("submitit")
    # the sacct shim: without it every state reads UNKNOWN (no accounting here)
    monkeypatch.setenv("PATH", slurm_cluster.env["PATH"])
    executor = submitit.AutoExecutor(folder=tmp_path / "jobs", cluster="slurm")
    executor.update_parameters(slurm_partition=slurm_cluster.partition, timeout_min=5,
                               cpus_per_task=1)
    # functions the job can import (not this module's: the job does not see tests/)
    job = executor.submit(os.getenv, "SLURM_JOB_ID")
    assert job.result() == job.job_id, slurm_cluster.logs()
    assert job.get_info()["State"] == "COMPLETED"  # forces a query; job.state may be cached

    job = executor.submit(time.sleep, 60)
    slurm_cluster.wait_state(job.job_id, ("RUNNING",))
    job.cancel()
    slurm_cluster.wait_state(job.job_id, ("CANCELLED",))
    assert job.done(force_check=True) and job.state.startswith("CANCELLED")  # not hanging


def test_the_sacct_shim_answers_like_sacct(slurm_cluster):
    job = slurm_cluster.sbatch("--output=/dev/null", "--wrap", "true")
    slurm_cluster.wait_state(job)
    out = slurm_cluster.run("sacct", "-o", "JobID,State,NodeList", "--parsable2", "-j", job,
                            "-j", "999999999").stdout
    assert out.splitlines() == ["JobID|State|NodeList",
                                f"{job}|COMPLETED|{slurm_cluster.node}"], textwrap.shorten(out, 200)
