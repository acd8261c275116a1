"""``treelm study --launcher slurm`` against a real one-node Slurm (``slurm_cluster``, skipped
with one line where Slurm cannot start): the study's runs submitted as a job array, one job
signalled part-way as Slurm signals a job before its time limit or a preemption (USR2), its
training saved on SIGTERM, the job requeued and the run resumed to the same record as the local
launcher's; a rerun of the driver while jobs are queued or running submits nothing."""

from __future__ import annotations

import json
import subprocess

from test_study import figures, finish, valid_events, wait_for, write_study


def slurm(cluster, *args: str) -> str:
    return cluster.run(*args).stdout


def test_a_study_on_slurm_requeues_a_signalled_job_and_resumes_it(slurm_cluster, tmp_path,
                                                                    monkeypatch):
    monkeypatch.setenv("PATH", slurm_cluster.env["PATH"])   # sbatch, squeue, submitit's sacct
    study = write_study(tmp_path, units=8000, seeds=1)
    args = ("--launcher", "slurm", "--partition", slurm_cluster.partition, "--time", "10",
            "--cpus-per-task", "1", "--threads", "1")
    out, err = finish(study, *args, "--no-wait")
    assert "paper/1: submitted (slurm job" in err and "symmetric/1: submitted" in err, err
    state = json.loads((tmp_path / "runs" / "study-state.json").read_text())
    job = state["jobs"]["paper/1"]["job_id"]
    # a second driver while the jobs are queued or running: nothing is submitted twice
    out, err = finish(study, *args, "--no-wait")
    assert "submitted" not in err, err
    assert json.loads((tmp_path / "runs" / "study-state.json").read_text()) == state
    run = tmp_path / "runs" / "paper-seed1"
    wait_for(lambda: valid_events(run) >= 1, what="paper/1 training on Slurm")
    slurm_cluster.run("scancel", "--signal=USR2", job)      # time limit / preemption
    wait_for(lambda: "PENDING" in slurm(slurm_cluster, "squeue", "-h", "-j", job, "-o", "%T")
             or _restarts(slurm_cluster, job) > 0, what="the job requeued")
    # (the requeue delay of the fixture, cred_expire + 1 s, is waited out)
    out, err = finish(study, *args)                          # follow it to the end
    assert "submitted" not in err, err                       # the requeued job, not a new one
    after = json.loads((tmp_path / "runs" / "study-state.json").read_text())
    assert after["jobs"]["paper/1"]["job_id"] == job
    logs = "".join(p.read_text() for p in (tmp_path / "runs" / ".submitit").glob(f"{job}*.err"))
    assert "interrupted (SIGTERM): saved a checkpoint" in logs, logs[-3000:]
    assert "resuming" in logs, logs[-3000:]
    assert _restarts(slurm_cluster, job) >= 1
    rec = json.loads((tmp_path / "record.json").read_text())
    assert sorted(rec["runs"]) == ["paper/1", "symmetric/1"]
    # the same runs through the local launcher, uninterrupted: the same figures
    here = tmp_path / "local"
    here.mkdir()
    local = write_study(here, units=8000, seeds=1)
    finish(local)
    same = json.loads((here / "record.json").read_text())
    assert figures(rec["runs"]) == figures(same["runs"])


def _restarts(cluster, job: str) -> int:
    try:
        return int(cluster.job(job).get("Restarts", "0"))
    except (subprocess.CalledProcessError, ValueError):
        return 0

