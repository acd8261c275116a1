"""The driver of ``treelm study``: what is done, in progress and left; submit what is left; gather
the record as runs finish. It may be stopped at any moment and started again.

Each run is in one of these states, read afresh at every look (never from memory alone):

    done      RUN/study.json exists (trained to its end and scored) for the study's overrides
    running   its job is alive or completing, asked of the launcher that submitted it (state
              file: launcher and job id), or a process holds the run's writer lock (someone
              trains it by hand)
    queued    its job waits in its scheduler's queue (pending, requeued)
    recorded  the record holds it and its directory is not here (a fresh checkout): kept
    failed    its job ended with an error and without a study.json (its result says why)
    left      none of these: submitted next (resumed from its last checkpoint if it has one)

The state file ``RUNS/study-state.json`` keeps the submitted jobs, each with the launcher that
submitted it (a pending Slurm job holds no lock, so the file is how a second driver knows it is
there), the launcher of the study's submissions and its options (so that a rerun needs no flags:
a flag or a changed ``launcher:`` section decides for new submissions only), the record's path
and the thread count given to each run. The record is written by this driver alone.

A job that ends without its run's scores is resubmitted (``retries``) unless its training refused
its config (exit 2: the same config fails the same way): then the run fails at once, and the
driver says the training's own error line and the job's log. Before anything is submitted every
run is checked as ``treelm train`` and the job would check it
(:func:`treelm.study.checks.check_runs`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treelm.errors import TreelmError
from treelm.rundir.files import RunFiles, atomic_write_text
from treelm.rundir.lock import is_held
from treelm.study.checks import check_run_dir, check_runs
from treelm.study.job import STUDY_FILE, RunJob
from treelm.study.record import (
    new_record,
    newest_record,
    other_version,
    read_record,
    resummarized,
    write_record,
)
from treelm.study.spec import RunSpec, Study, describe, from_cwd

if TYPE_CHECKING:
    from treelm.study.launch import Ended

STATE = "study-state.json"
RESULTS = Path("benchmarks/results")


def scored(spec: RunSpec) -> dict[str, Any] | None:
    """The run's ``study.json`` when it was scored for these overrides, else None."""
    path = spec.run_dir / STUDY_FILE
    if not path.exists():
        return None
    entry = json.loads(path.read_text(encoding="utf-8"))
    return entry if entry.get("overrides") == spec.overrides else None


class Driver:
    """The study's driver; ``flags``: the launcher options of today's command line, which decide
    for new submissions only (:func:`treelm.study.launch.choose_launcher`)."""

    def __init__(self, study: Study, launch_factory: Callable[[], Any] | None = None,
                 say: Callable[[str], None] | None = None,
                 flags: dict[str, Any] | None = None) -> None:
        self.study = study
        self.specs = study.run_specs()
        self.state_path = study.runs / STATE
        self.state = self._read_state()
        self.section = study.launcher       # the study file's launcher: section
        self.flags = dict(flags or {})
        self._launch_factory = launch_factory
        self._launch: Any = None
        self.say = say or (lambda m: print(m, file=sys.stderr, flush=True))
        self.failed: dict[str, Ended] = {}
        self.ended: dict[str, Ended] = {}   # why each run's last job ended (states() reads it)
        self.folder = study.runs / ".submitit"

    # ------------------------------------------------------------------ state
    def _read_state(self) -> dict[str, Any]:
        if self.state_path.exists():
            return json.loads(self.state_path.read_text(encoding="utf-8"))
        return {"study": self.study.name, "jobs": {}}

    def _write_state(self) -> None:
        self.study.runs.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.state_path, json.dumps(self.state, indent=1) + "\n")

    @property
    def launch(self) -> Any:
        if self._launch is None:
            from treelm.study.launch import Launch

            self._launch = (self._launch_factory() if self._launch_factory else
                            Launch(self.study.launcher, self.folder))
        return self._launch

    def record_path(self) -> Path:
        """The record this study writes: the state's, else the study file's ``record:``, else
        the newest committed one of this name, else a new one dated today."""
        if self.state.get("record"):
            return Path(self.state["record"])
        if self.study.record:
            return self.study.record
        found = newest_record(RESULTS, self.study.name)
        if found is not None:
            return found
        return RESULTS / f"{self.study.name}-{time.strftime('%Y%m%d')}.json"

    # ------------------------------------------------------------------ looking
    def states(self) -> dict[str, str]:
        """Each run's state (see the module's docstring); the job of each run not done asked of
        the launcher that submitted it (so a finished study needs no scheduler to be read)."""
        from treelm.study.launch import held, scheduler_states

        jobs = self.state["jobs"]
        recorded = self._recorded()
        out = {}
        for spec in self.specs:
            if scored(spec) is not None:
                out[spec.key] = "done"
            elif spec.key in recorded and not spec.run_dir.exists():
                out[spec.key] = "recorded"      # scored before, its directory gone: kept
        live = self._launch.handles() if self._launch is not None else None
        known = scheduler_states({j["job_id"]: j["launcher"] for k, j in jobs.items()
                                  if k not in out}, self.folder, live)
        self.ended = {}
        for spec in self.specs:
            job = jobs.get(spec.key)
            holds = held(known.get(job["job_id"])) if job else None
            if spec.key in out:
                continue
            elif holds is not None:
                out[spec.key] = holds           # queued or running: never submitted again
            elif is_held(RunFiles(spec.run_dir).lock):
                out[spec.key] = "running"
            elif job:
                self.ended[spec.key] = self._ended(job, known.get(job["job_id"]))
                out[spec.key] = "left" if self.ended[spec.key].rerun_helps else "failed"
            else:
                out[spec.key] = "left"
        return {spec.key: out[spec.key] for spec in self.specs}

    def _ended(self, job: dict[str, Any], state: str | None) -> Ended:
        from treelm.study.launch import ended

        return ended(self.folder, job["job_id"], job["launcher"], state, job.get("submitted"))

    def _recorded(self) -> set[str]:
        """The runs the study's record holds (a record of this version of the study: ``gather``
        refuses another's), whose directories need not be here (``runs/`` is not committed)."""
        path = self.record_path()
        if not path.exists():
            return set()
        return set(read_record(path)["runs"])

    # ------------------------------------------------------------------ the record
    def gather(self, command: str | None = None) -> dict[str, Any]:
        """Add every scored run to the record (keeping the entries of runs gone from disk),
        the baselines once, and write it."""
        from treelm.study.score import machine

        path = self.record_path()
        record = (read_record(path) if path.exists() else
                  new_record(describe(self.study), command or "", machine()))
        before = json.dumps(record, sort_keys=True)
        if path.exists() and (differs := other_version(record["study"],
                                                       describe(self.study))) is not None:
            # another study under this name: its figures are not this one's to extend
            dated = RESULTS / f"{self.study.name}-{time.strftime('%Y%m%d')}.json"
            # today's record is the one in the way: only a new name (or moving it) helps
            other = (f"a new record: (e.g. {dated}) or a new name:" if dated != path
                     else "a new name: (its record is then another file), or move this record")
            raise TreelmError(f"{path}: the record of another version of this study (its "
                              f"{differs} differs); give the study {other}")
        record["study"] = describe(self.study)
        if command:
            cmds = record.setdefault("commands", [])
            if command not in cmds:
                cmds.append(command)
        changed = False
        for spec in self.specs:
            entry = scored(spec)
            if entry is None:
                continue
            entry = {"variant": spec.variant, "seed": spec.seed,
                     "run_dir": from_cwd(spec.run_dir), **entry}
            if record["runs"].get(spec.key) != entry:
                record["runs"][spec.key] = entry
                changed = True
        if self.study.trees and not record.get("baselines"):
            from treelm.study.parts import tree_baselines

            record["baselines"] = tree_baselines(self.study.trees)
            changed = True
        if self.study.trees and self.study.trees.ensemble_groups:
            from treelm.study.ensemble import refresh

            changed = refresh(record) or changed
        if changed or not path.exists() or resummarized(record) != before:
            write_record(path, record)
        self.state["record"] = str(path)
        self._write_state()
        return record

    # ------------------------------------------------------------------ running
    def job(self, spec: RunSpec, threads: int) -> RunJob:
        env: dict[str, str | None] = dict(self.study.env)
        if "NLTK_DATA" in os.environ:     # every path a job reads is absolute
            env.setdefault("NLTK_DATA", os.pathsep.join(
                str(Path(p).resolve()) for p in os.environ["NLTK_DATA"].split(os.pathsep)))
        if self.study.launcher.name == "local":   # submitit's local jobs hide GPUs otherwise
            env.setdefault("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
        trees = self.study.trees.for_jobs() if self.study.trees else None
        return RunJob(spec.key, str(spec.run_dir), str(self.study.config), spec.overrides,
                      threads, env, trees, [dataclasses.asdict(e) for e in self.study.evals],
                      self.study.name)

    def submit(self, specs: list[RunSpec], threads: int) -> None:
        for spec in specs:
            check_run_dir(spec)
        ids = self.launch.submit([self.job(s, threads) for s in specs])
        for spec, job_id in zip(specs, ids):
            self.state["jobs"][spec.key] = {"launcher": self.study.launcher.name,
                                            "job_id": job_id, "submitted": time.time(),
                                            "threads": threads}
            self.say(f"treelm study: {spec.key}: submitted ({self.study.launcher.name} job "
                     f"{job_id}, {threads} thread{'s' * (threads != 1)})")
        self.state["launcher"] = {"launcher": dataclasses.asdict(self.study.launcher),
                                  "section": dataclasses.asdict(self.section)}
        self._write_state()

    @contextlib.contextmanager
    def _deciding(self) -> Iterator[None]:
        """While the driver reads the state and submits: two drivers of one study (started by
        mistake, or a rerun while an earlier one still follows its jobs) decide one after the
        other, each from the state the other wrote, so neither submits a run twice. The flock
        guards the state file's read-submit-write, on this machine; runs are guarded by their
        own lock."""
        import fcntl

        self.study.runs.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.study.runs / f".{STATE}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self.state = self._read_state()
            yield
        finally:
            os.close(fd)

    def plan(self) -> tuple[int | None, int]:
        """Runs at once (None: as many as the scheduler takes) and threads per new run. The
        threads depend on the study and the machine alone, never on how many runs are left,
        so a run started by a rerun rounds as it would have in an uninterrupted study."""
        from treelm.study.launch import local_plan

        la = self.study.launcher
        if la.name == "local":
            return local_plan(la, len(self.specs))
        return None, la.threads or la.cpus_per_task or 1

    def run(self, wait: bool = True, poll: float = 2.0, retries: int = 1) -> dict[str, Any]:
        """Check the runs left, then submit them and, with ``wait``, follow them to the end of
        the study. A job this driver submitted that ends without its run's scores is submitted
        again ``retries`` times, unless its training refused its config (exit 2)."""
        command = shlex.join(["treelm", *sys.argv[1:]]) if sys.argv else "treelm study"
        attempts: dict[str, int] = {}
        mine: dict[str, str] = {}           # run -> the job this driver submitted for it
        states = self.states()              # (checked before anything is made or written)
        check_runs(self.study, [s for s in self.specs if states[s.key] in ("left", "failed")])
        with self._deciding():
            from treelm.study.launch import choose_launcher

            self.study.launcher, note = choose_launcher(self.section, self.state, self.flags)
            self.gather(command)
            seen_done = {k for k, s in self.states().items() if s == "done"}
        if note:
            self.say(note)
        jobs, threads = self.plan()
        while True:
            with self._deciding():
                states = self.states()
                fresh = [k for k, s in states.items() if s == "done" and k not in seen_done]
                for key in fresh:
                    seen_done.add(key)
                    self.say(f"treelm study: {key}: done ({len(seen_done)} of {len(states)})")
                if fresh:
                    self.gather(command)
                for key, s in states.items():   # our job ended without the run's scores
                    job = self.state["jobs"].get(key)
                    if s in ("left", "failed") and job and mine.get(key) == job["job_id"]:
                        del mine[key]
                        self._ended_here(key, self.ended[key], attempts[key], retries)
                left = [s for s in self.specs
                        if states[s.key] in ("left", "failed") and s.key not in self.failed]
                busy = sum(1 for s in states.values() if s in ("running", "queued"))
                take = left if jobs is None else left[:max(0, jobs - busy)]
                for s in take:
                    attempts[s.key] = attempts.get(s.key, 0) + 1
                if take:
                    self.submit(take, threads)
                    mine.update({s.key: self.state["jobs"][s.key]["job_id"] for s in take})
                    busy += len(take)
            if not take:
                if not wait or not busy:
                    break
                time.sleep(poll)
        if self.failed:
            again = [k for k, e in self.failed.items() if e.rerun_helps]
            self.say(f"treelm study: {len(self.failed)} run(s) failed ({', '.join(self.failed)})"
                     + (f"; run the study again to resume {', '.join(again)}" if again else ""))
        with self._deciding():
            return self.gather(command)

    def _ended_here(self, key: str, end: Ended, attempts: int, retries: int) -> None:
        """A job this driver submitted ended without its run's scores: the run is submitted
        again, or (its training refused its config, or its attempts are spent) failed, said in
        one line, with the job's log."""
        if not end.usage and attempts <= retries:
            self.say(f"treelm study: {key}: {end.why}; submitting it again (attempt "
                     f"{attempts + 1} of {retries + 1})")
            return
        self.failed[key] = end
        self.say(f"treelm study: {key}: {end.why}")
        if end.log is not None:
            self.say(f"treelm study: {key}: log {end.log}")
