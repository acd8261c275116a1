"""Where a study's jobs run: submitit's local subprocesses or Slurm jobs, and how a driver that
was stopped and started again finds them.

A job is known by its launcher and id alone (kept in the study's state file), never by a lock of
ours, and asked of the launcher that submitted it, whatever launcher today's command names
(:func:`scheduler_states`): a local job is its submitit controller's process (alive when that pid
runs submitit's controller for this study's folder), a Slurm job is what ``squeue`` lists
(pending, running, requeued...). The run directory's own writer lock is the only guard against a
second trainer. A job that has ended without its run's scores says why from the result submitit
kept (:func:`ended`): the training's own error line, or none where the job was cancelled or
killed or its node failed.

Local: submitit's ``LocalExecutor`` starts every job it is given at once and stops a job after
``timeout_min`` (2 minutes by default): the driver gives it at most ``jobs`` runs at a time and a
time limit of its own (``launcher.time``, default 7 days; at the limit the job saves and is
requeued, as on Slurm). Slurm: one job per run, or what is left as one job array, with the
partition, time, CPUs, GPUs and memory of ``launcher:`` or the command line. Which launcher a
study's new submissions go to, when the state file, the study file and the command line name
different ones, is :func:`choose_launcher`'s.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import submitit

from treelm.errors import TreelmError
from treelm.study.job import USAGE, RunJob, read_failure
from treelm.study.spec import Launcher

LOCAL_DEFAULT_MINUTES = 7 * 24 * 60
#: The options of ``launcher:`` that the local launcher reads (Slurm reads all but ``jobs``).
LOCAL_OPTIONS = ("jobs", "threads", "time")


def choose_launcher(section: Launcher, state: dict[str, Any],
                    flags: dict[str, Any]) -> tuple[Launcher, str | None]:
    """The launcher of the study's new submissions and, where it is not the one the state
    remembers, one line saying so: the state's (the study's launcher and its options, as last
    submitted), so that ``treelm study S.yaml`` alone goes on as the first command began; the
    study file's ``section`` instead where it changed since, or where a flag names another
    launcher; then the flags on top. Jobs submitted already are followed through their own
    launcher whatever this one is."""
    saved = Launcher(**state["launcher"]["launcher"]) if state.get("launcher") else None
    changed = saved is not None and dataclasses.asdict(section) != state["launcher"]["section"]
    if saved is None or changed or flags.get("name", saved.name) != saved.name:
        base = section
    else:
        base = saved
    launcher = dataclasses.replace(base, **flags)
    if saved is None or launcher == saved:
        return launcher, None
    by = " and ".join(w for w, given in (("the study file's launcher: section", changed),
                                         ("the command line", bool(flags))) if given)
    return launcher, (f"treelm study: new submissions go to {launcher_text(launcher)}, from "
                      f"{by}; the study was submitted with {launcher_text(saved)}, and its "
                      f"jobs are followed there")


def launcher_text(la: Launcher) -> str:
    """``slurm (partition debug, time 10)``: a launcher and the options it was given that it
    reads."""
    default = Launcher()
    reads = LOCAL_OPTIONS if la.name == "local" else [
        f.name for f in dataclasses.fields(la) if f.name not in ("name", "jobs")]
    opts = [f"{k} {v:g}" if isinstance(v := getattr(la, k), float) else f"{k} {v}"
            for k in reads if getattr(la, k) != getattr(default, k)]
    return la.name + (f" ({', '.join(opts)})" if opts else "")


def cores() -> int:
    return len(os.sched_getaffinity(0))


def local_plan(launcher: Launcher, runs: int) -> tuple[int, int]:
    """Runs at once and threads per run on this machine, for a study of ``runs`` runs: one run
    per core, one thread each, unless the study has fewer runs than cores (then they share the
    cores). Flags or ``launcher:`` set either; the other follows from the cores. One thread
    per run is measured as the better use of a CPU's cores (``benchmarks/study_throughput.py``):
    small recurrent steps scale poorly across threads, and runs side by side do not wait on
    each other."""
    n = cores()
    if launcher.threads and not launcher.jobs:
        return max(1, n // launcher.threads), launcher.threads
    jobs = launcher.jobs or max(1, min(n, runs))
    return jobs, launcher.threads or max(1, n // jobs)


def _alive_local(job_id: str, folder: Path) -> bool:
    """Whether the submitit controller ``job_id`` (a pid) still runs for ``folder``."""
    try:
        cmd = Path(f"/proc/{int(job_id)}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return False
    return b"submitit.local._local" in cmd and os.fsencode(str(folder)) in cmd


#: Slurm states after which a job does nothing more (everything else, a requeue's passing
#: REQUEUED and COMPLETING among them, is a job that will still run or is running).
TERMINAL = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL",
                      "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"})
#: States of a job waiting for its start (a requeued one too).
WAITING = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"})


def slurm_states(job_ids: list[str]) -> dict[str, str]:
    """``squeue``'s state of each job the scheduler still holds, in any state (array tasks one
    by one; ``-t all``: a finished job stays listed, in a terminal state, for Slurm's
    ``MinJobAge``); a job that has left the queue altogether is absent."""
    if not job_ids:
        return {}
    if shutil.which("squeue") is None:
        raise TreelmError("squeue not found: this machine cannot see the Slurm jobs of this "
                          "study (run the driver on a login node of the cluster)")
    cmd = ["squeue", "-h", "-r", "-t", "all", "-o", "%i %T", "-j",
           ",".join(sorted({j.split("_")[0] for j in job_ids}))]
    for attempt in range(6):    # a busy controller times out now and then: never read that
        out = subprocess.run(cmd, capture_output=True, text=True)   # as "no job any more"
        if out.returncode == 0:
            break
        time.sleep(2 * (attempt + 1))
    else:
        why = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
        raise TreelmError(f"squeue cannot tell the state of this study's jobs ({why}); run "
                          f"the study again when the controller answers")
    states = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return {j: states[j] for j in job_ids if j in states}


def scheduler_states(jobs: dict[str, str], folder: Path,
                     live: dict[str, Any] | None = None) -> dict[str, str]:
    """The state of each job (id -> the name of the launcher that submitted it) that its
    scheduler still knows: Slurm's (``squeue -t all``: terminal ones too, for a while), and
    ``RUNNING`` for a local job whose controller runs (``live``: the submitit handles of the jobs
    this process submitted, which also reap them). A job absent has ended."""
    out: dict[str, str] = {}
    for job_id, name in jobs.items():
        if name == "local" and _local_running(job_id, folder, live or {}):
            out[job_id] = "RUNNING"
    out.update(slurm_states([j for j, name in jobs.items() if name == "slurm"]))
    return out


def held(state: str | None) -> str | None:
    """``queued`` or ``running`` for a job its scheduler still holds in ``state``, else None."""
    if state is None or state.split()[0] in TERMINAL:
        return None
    return "queued" if state in WAITING else "running"


def _local_running(job_id: str, folder: Path, live: dict[str, Any]) -> bool:
    h = live.get(job_id)
    if h is not None:                 # ours: its Popen knows (and reaps it)
        return bool(h.state == "RUNNING")
    return _alive_local(job_id, folder)


#: The exit status of a training stopped by a signal after it saved (``treelm train``).
INTERRUPTED = 130


@dataclass
class Ended:
    """Why a run's job ended without its scores, in one line, and what a rerun would do."""

    why: str
    code: int | None                  # the training's exit status, where the job saw it
    log: Path | None                  # the job's stderr (the training's passes through it)
    rerun_helps: bool                 # killed, cancelled, preempted, its node lost: it resumes

    @property
    def usage(self) -> bool:
        """The training refused its config (exit 2): a rerun as it is fails the same way."""
        return self.code == USAGE


def ended(folder: Path, job_id: str, launcher: str, state: str | None = None,
          since: float | None = None) -> Ended:
    """Why job ``job_id`` ended without its run's scores: the error submitit kept in its result
    (a result older than ``since``, the job's submission, is another job's: local ids are pids),
    else its scheduler's last ``state`` or, with none, that it was cancelled, killed or lost."""
    paths = submitit.core.utils.JobPaths(folder, job_id=job_id)
    log = paths.stderr if paths.stderr.exists() else None
    result = paths.result_pickle
    outcome: Any = None
    try:
        if since is None or launcher != "local" or result.stat().st_mtime >= since - 1:
            outcome = submitit.core.utils.pickle_load(result)
    except Exception:   # noqa: BLE001 - absent, or half written by a job that was killed
        outcome = None
    if isinstance(outcome, tuple) and outcome and outcome[0] == "error":
        code, line = read_failure(str(outcome[1]))
        return Ended(line, code, log, code is not None and (code < 0 or code == INTERRUPTED))
    if isinstance(outcome, tuple) and outcome and outcome[0] == "success":
        return Ended("its job ended, but the run's study.json is not this study's", None, log,
                     False)
    how = (f"its Slurm job ended {state.split()[0]}" if state else
           "its job ended (cancelled or killed, or its node failed)")
    return Ended(f"{how} before the run finished", None, log, True)


class Launch:
    """Submits jobs and tells which of the study's jobs are still queued or running."""

    def __init__(self, launcher: Launcher, folder: Path) -> None:
        self.launcher, self.folder = launcher, folder
        folder.mkdir(parents=True, exist_ok=True)
        if launcher.name == "local":
            self.executor: Any = submitit.LocalExecutor(folder=str(folder))
            self.executor.update_parameters(
                timeout_min=launcher.time or LOCAL_DEFAULT_MINUTES)
        else:
            if shutil.which("sbatch") is None:
                raise TreelmError("--launcher slurm: sbatch not found on this machine")
            self.executor = submitit.AutoExecutor(folder=str(folder), cluster="slurm")
            self.executor.update_parameters(**self.slurm_parameters())
        self._live: dict[str, Any] = {}     # job id -> submitit job submitted by this driver

    def slurm_parameters(self) -> dict[str, Any]:
        la = self.launcher
        params: dict[str, Any] = {"timeout_min": int(la.time or 60),
                                  "cpus_per_task": la.cpus_per_task or la.threads or 1,
                                  "tasks_per_node": 1, "nodes": 1, "name": "treelm-study"}
        if la.partition:
            params["slurm_partition"] = la.partition
        if la.gpus:
            params["gpus_per_node"] = la.gpus
        if la.mem_gb:
            params["mem_gb"] = la.mem_gb
        if la.array_parallelism:
            params["slurm_array_parallelism"] = la.array_parallelism
        if la.extra:
            params["slurm_additional_parameters"] = dict(la.extra)
        return params

    def submit(self, jobs: list[RunJob]) -> list[str]:
        """Submit ``jobs``; their ids, in order."""
        if self.launcher.name == "slurm" and self.launcher.array and len(jobs) > 1:
            with self.executor.batch():
                handles = [self.executor.submit(j) for j in jobs]
        else:
            handles = [self.executor.submit(j) for j in jobs]
        for h in handles:
            self._live[str(h.job_id)] = h
        return [str(h.job_id) for h in handles]

    def handles(self) -> dict[str, Any]:
        """The submitit jobs this launcher submitted, by id: their state is asked of them (a
        local job's Popen knows it, and reaps the job), not of the scheduler."""
        return dict(self._live)
