"""``treelm study --launcher slurm`` against a real one-node Slurm (``slurm_cluster``, skipped
with one line where Slurm cannot start), step by step as ``docs/studies.md`` shows it:

- submitted once with ``--launcher slurm --no-wait`` (one array task at a time, so that one run
  runs while the other waits), after which ``treelm study S.yaml`` alone is the whole command:
  a plain ``--status`` shows the queued and the running run as such, a plain rerun while the
  jobs are held submits nothing, and after ``scancel`` of one job a plain rerun resubmits that
  run to Slurm (not locally) and follows the study to a record with the local launcher's
  figures;
- one job signalled part-way as Slurm signals a job before its time limit or a preemption
  (USR2): its training saves on SIGTERM, the job is requeued and the run resumes to the same
  record as the local launcher's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_study import WHOLE, figures, finish, trainers, valid_events, wait_for, write_study

UNITS = WHOLE          # as many tokens as the local launcher's runs (``tiny_study_seed1``)


def slurm(cluster, *args: str) -> str:
    return cluster.run(*args).stdout


@pytest.fixture(scope="module")
def local_record(tiny_study_seed1) -> dict[str, Any]:
    """The same runs through the local launcher, uninterrupted (``tiny_study_seed1``)."""
    return json.loads(tiny_study_seed1.read_text())


def _state(where: Path) -> dict[str, Any]:
    return json.loads((where / "runs" / "study-state.json").read_text())


def _row(out: str, run: str) -> str:
    """The --status table's row of ``run``."""
    return next(line for line in out.splitlines() if line.startswith(f"{run} "))


def test_the_documented_slurm_steps(slurm_cluster, tmp_path, monkeypatch, local_record):
    monkeypatch.setenv("PATH", slurm_cluster.env["PATH"])   # sbatch, squeue, submitit's sacct
    study = write_study(tmp_path, units=UNITS, seeds=1)
    # 1. submit, one array task at a time: paper/1 runs, symmetric/1 waits for it
    out, err = finish(study, "--launcher", "slurm", "--partition", slurm_cluster.partition,
                      "--time", "10", "--cpus-per-task", "1", "--threads", "1",
                      "--array-parallelism", "1", "--no-wait")
    assert "paper/1: submitted (slurm job" in err and "symmetric/1: submitted" in err, err
    state = _state(tmp_path)
    first, second = (state["jobs"][k]["job_id"] for k in ("paper/1", "symmetric/1"))
    assert state["launcher"]["launcher"]["name"] == "slurm"
    run = tmp_path / "runs" / "paper-seed1"
    wait_for(lambda: valid_events(run) >= 1 and trainers(run), timeout=300,
             what="paper/1 training on Slurm")
    stopped = trainers(run)
    for pid in stopped:                 # held where it is while --status looks (the job runs)
        os.kill(pid, signal.SIGSTOP)
    try:
        # 2. a plain --status: the running and the queued run as such, asked of Slurm
        out, err = finish(study, "--status")
        assert "1 running, 1 queued" in out.splitlines()[0], out
        assert _row(out, "paper/1").split()[1] == "running", out
        assert _row(out, "symmetric/1").split()[1] == "queued", out
        assert slurm(slurm_cluster, "squeue", "-h", "-j", second, "-o", "%T").strip() \
            == "PENDING"
        # 3. a plain rerun while the jobs are held: nothing submitted, the state unchanged
        out, err = finish(study, "--no-wait")
        assert "submitted" not in err and "new submissions" not in err, err
        assert _state(tmp_path) == state
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
    # 4. scancel paper/1's job: a plain rerun resubmits it to Slurm, then follows the study
    slurm_cluster.run("scancel", first)
    wait_for(lambda: slurm(slurm_cluster, "squeue", "-h", "-t", "all", "-j", first, "-o",
                           "%T").strip() == "CANCELLED", timeout=60, what="paper/1 cancelled")
    out, err = finish(study, timeout=600)
    assert "paper/1: submitted (slurm job" in err and "local job" not in err, err
    assert "symmetric/1: submitted" not in err, err
    after = _state(tmp_path)
    assert after["jobs"]["paper/1"]["launcher"] == "slurm"
    assert after["jobs"]["paper/1"]["job_id"] != first
    assert after["jobs"]["symmetric/1"]["job_id"] == second
    assert "2 done" in out.splitlines()[0], out
    # 5. the record: the local launcher's figures
    rec = json.loads((tmp_path / "record.json").read_text())
    assert sorted(rec["runs"]) == ["paper/1", "symmetric/1"]
    assert figures(rec["runs"]) == figures(local_record["runs"])
    assert figures(rec["summary"]) == figures(local_record["summary"])


def test_a_study_on_slurm_requeues_a_signalled_job_and_resumes_it(slurm_cluster, tmp_path,
                                                                    monkeypatch, local_record):
    monkeypatch.setenv("PATH", slurm_cluster.env["PATH"])
    study = write_study(tmp_path, units=UNITS, seeds=1)
    out, err = finish(study, "--launcher", "slurm", "--partition", slurm_cluster.partition,
                      "--time", "10", "--cpus-per-task", "1", "--threads", "1", "--no-wait")
    assert "paper/1: submitted (slurm job" in err and "symmetric/1: submitted" in err, err
    job = _state(tmp_path)["jobs"]["paper/1"]["job_id"]
    run = tmp_path / "runs" / "paper-seed1"
    wait_for(lambda: valid_events(run) >= 1, timeout=300, what="paper/1 training on Slurm")
    slurm_cluster.run("scancel", "--signal=USR2", job)      # time limit / preemption
    wait_for(lambda: "PENDING" in slurm(slurm_cluster, "squeue", "-h", "-j", job, "-o", "%T")
             or _restarts(slurm_cluster, job) > 0, what="the job requeued")
    # (the requeue delay of the fixture, cred_expire + 1 s, is waited out)
    out, err = finish(study, timeout=600)                    # follow it to the end
    assert "submitted" not in err, err                       # the requeued job, not a new one
    assert _state(tmp_path)["jobs"]["paper/1"]["job_id"] == job
    logs = "".join(p.read_text() for p in (tmp_path / "runs" / ".submitit").glob(f"{job}*.err"))
    assert "interrupted (SIGTERM): saved a checkpoint" in logs, logs[-3000:]
    assert "resuming" in logs, logs[-3000:]
    assert _restarts(slurm_cluster, job) >= 1
    rec = json.loads((tmp_path / "record.json").read_text())
    assert sorted(rec["runs"]) == ["paper/1", "symmetric/1"]
    assert figures(rec["runs"]) == figures(local_record["runs"])


def _restarts(cluster, job: str) -> int:
    try:
        return int(cluster.job(job).get("Restarts", "0"))
    except (subprocess.CalledProcessError, ValueError):
        return 0
