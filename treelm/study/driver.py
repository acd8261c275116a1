"""The driver of ``treelm study``: what is done, in progress and left; submit what is left; gather
the record as runs finish. It may be stopped at any moment and started again.

Each run is in one of these states, read afresh at every look (never from memory alone):

    done      RUN/study.json exists (trained to its end and scored) for the study's overrides
    running   its job is alive (state file: launcher and job id), or a process holds the run's
              writer lock (someone trains it by hand)
    queued    its Slurm job waits in the queue
    recorded  the record holds it and its directory is not here (a fresh checkout): kept
    failed    its job ended without a study.json (this driver saw it, with its error)
    left      none of these: submitted next (resumed from its last checkpoint if it has one)

The state file ``RUNS/study-state.json`` keeps the submitted jobs (a pending Slurm job holds no
lock, so the file is how a second driver knows it is there), the record's path and the thread
count given to each run. The record is written by this driver alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from treelm.errors import TreelmError
from treelm.rundir.files import RunFiles, atomic_write_text
from treelm.rundir.lock import is_held
from treelm.study.job import STUDY_FILE, RunJob
from treelm.study.record import new_record, newest_record, read_record, write_record
from treelm.study.spec import RunSpec, Study, describe, from_cwd

STATE = "study-state.json"
RESULTS = Path("benchmarks/results")


def scored(spec: RunSpec) -> dict[str, Any] | None:
    """The run's ``study.json`` when it was scored for these overrides, else None."""
    path = spec.run_dir / STUDY_FILE
    if not path.exists():
        return None
    entry = json.loads(path.read_text(encoding="utf-8"))
    return entry if entry.get("overrides") == spec.overrides else None


def check_run_dir(spec: RunSpec) -> None:
    """A run directory trained for other values than the study now asks is refused: its scores
    would be another study's. Compared on the keys the study sets."""
    import yaml

    from treelm.config import apply_overrides

    files = RunFiles(spec.run_dir)
    if not files.config.exists():
        return
    saved = yaml.safe_load(files.config.read_text(encoding="utf-8")) or {}
    want = apply_overrides({}, spec.overrides)
    for key, value in _flat(want):
        node: Any = saved
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node != value and not (key == "train.threads"):
            raise TreelmError(f"{spec.run_dir}: trained with {key} = {node!r}, but the study "
                              f"now asks {value!r}; move the run away or restore the study")


def _flat(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict) and k != "eval_parse" and v:
            out += _flat(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out


class Driver:
    def __init__(self, study: Study, launch_factory: Callable[[], Any] | None = None,
                 say: Callable[[str], None] | None = None) -> None:
        self.study = study
        self.specs = study.run_specs()
        self.state_path = study.runs / STATE
        self.state = self._read_state()
        self._launch_factory = launch_factory
        self._launch: Any = None
        self.say = say or (lambda m: print(m, file=sys.stderr, flush=True))
        self.failed: dict[str, str] = {}

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
                            Launch(self.study.launcher, self.study.runs / ".submitit"))
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
        """Each run's state (see the module's docstring)."""
        jobs = self.state["jobs"]
        mine = [j for k, j in jobs.items()]
        launchers = {j["launcher"] for j in mine}
        active: set[str] = set()
        queued: set[str] = set()
        if launchers == {self.study.launcher.name} and mine:
            ids = [j["job_id"] for j in mine]
            active = self.launch.active(ids)
            if self.study.launcher.name == "slurm":
                from treelm.study.launch import WAITING, slurm_states

                queued = {j for j, s in slurm_states(ids).items() if s in WAITING}
        elif mine:                        # jobs of another launcher: their runs' locks tell
            active = set()
        recorded = self._recorded()
        out = {}
        for spec in self.specs:
            job = jobs.get(spec.key)
            if scored(spec) is not None:
                out[spec.key] = "done"
            elif spec.key in recorded and not spec.run_dir.exists():
                out[spec.key] = "recorded"      # scored before, its directory gone: kept
            elif job and job["job_id"] in queued:
                out[spec.key] = "queued"
            elif (job and job["job_id"] in active) or is_held(RunFiles(spec.run_dir).lock):
                out[spec.key] = "running"
            elif spec.key in self.failed:
                out[spec.key] = "failed"
            else:
                out[spec.key] = "left"
        return out

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
        if path.exists() and _trained(record["study"]) != _trained(describe(self.study)):
            # another study under this name: its figures are not this one's to extend
            raise TreelmError(
                f"{path}: the record of another version of this study (its "
                f"{_first_change(record['study'], describe(self.study))} differs); give the "
                f"study a new record: (e.g. {RESULTS}/{self.study.name}-"
                f"{time.strftime('%Y%m%d')}.json) or a new name:")
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
            record["baselines"] = tree_baselines(self.study)
            changed = True
        if changed or not path.exists() or _resummarized(record) != before:
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
        trees = None
        if self.study.trees:
            from dataclasses import asdict

            from treelm.study.spec import _abs_or_name

            trees = asdict(self.study.trees)
            trees["dev"] = _abs_or_name(trees["dev"])
            if trees["test"]:
                trees["test"] = _abs_or_name(trees["test"])
        from dataclasses import asdict as _asdict
        return RunJob(spec.key, str(spec.run_dir), str(self.study.config), spec.overrides,
                      threads, env, trees, [_asdict(e) for e in self.study.evals],
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
        """Submit what is left and, with ``wait``, follow the runs to the end of the study."""
        command = shlex.join(["treelm", *sys.argv[1:]]) if sys.argv else "treelm study"
        attempts: dict[str, int] = {}
        jobs, threads = self.plan()
        with self._deciding():
            self.gather(command)
            seen_done = {k for k, s in self.states().items() if s == "done"}
        while True:
            with self._deciding():
                states = self.states()
                fresh = [k for k, s in states.items() if s == "done" and k not in seen_done]
                for key in fresh:
                    seen_done.add(key)
                    self.say(f"treelm study: {key}: done ({len(seen_done)} of {len(states)})")
                if fresh:
                    self.gather(command)
                for key, s in states.items():   # our job ended without scores
                    if s == "left" and attempts.get(key, 0) > retries and key not in self.failed:
                        job = self.state["jobs"][key]
                        self.failed[key] = (self.launch.error(job["job_id"])
                                            or "its job ended without scores")
                        self.say(f"treelm study: {key}: failed ({self.failed[key]})")
                states = self.states()
                left = [s for s in self.specs if states[s.key] == "left"]
                busy = sum(1 for s in states.values() if s in ("running", "queued"))
                take = left if jobs is None else left[:max(0, jobs - busy)]
                for s in take:
                    attempts[s.key] = attempts.get(s.key, 0) + 1
                if take:
                    self.submit(take, threads)
                    busy += len(take)
            if not take:
                if not wait or not busy:
                    break
                time.sleep(poll)
        if self.failed:
            self.say(f"treelm study: {len(self.failed)} run(s) failed: "
                     + "; ".join(f"{k}: {w}" for k, w in self.failed.items())
                     + "; run the study again to resume them")
        with self._deciding():
            return self.gather(command)


def _resummarized(record: dict[str, Any]) -> str:
    """The record as it would be written now (what dev chooses may have changed)."""
    from treelm.study.record import summarize

    return json.dumps({**record, "summary": summarize(record)}, sort_keys=True)


#: What makes two versions of a study train or score other runs.
TRAINED = ("config", "variants", "seeds", "budget", "overrides", "score")


def _trained(desc: dict[str, Any]) -> dict[str, Any]:
    """What of a study's description decides its runs and scores: its keys of ``TRAINED``, the
    seeds aside (more seeds extend a study) and each eval entry without its default fields (a
    field added to ``score.eval`` later changes nothing that was scored)."""
    import dataclasses

    from treelm.study.spec import Eval

    defaults = {f.name: f.default for f in dataclasses.fields(Eval)}
    out = {k: desc.get(k) for k in TRAINED}
    out["seeds"] = None
    score = dict(out.get("score") or {})
    score["eval"] = [{k: v for k, v in e.items() if defaults.get(k, object()) != v}
                     for e in score.get("eval") or []]
    out["score"] = score
    return out


def _first_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    return next((k for k in TRAINED if k != "seeds" and old.get(k) != new.get(k)), "definition")


def tree_baselines(study: Study) -> dict[str, Any]:
    """The trivial trees and the rule control on the study's dev and test sentences."""
    from treelm.study.score import part_name
    from treelm.syntax.baselines import DEFAULT_BASELINES, RULE_CONTROLS
    from treelm.syntax.report import parsing_report

    t = study.trees
    assert t is not None
    parts = [("dev", t.dev, None)]
    if t.test:
        parts += [(part_name(n), t.test, n) for n in t.test_max_len]
    out = {}
    for name, treebank, max_len in parts:
        # the trivial trees and the rule control (random levels through each tree rule)
        rep = parsing_report(treebank, max_len, baselines=(*DEFAULT_BASELINES, *RULE_CONTROLS))
        out[name] = {"n_sentences": rep["n_sentences"], "n_words": rep["n_words"],
                     "baselines": {k: {m: v[m] for m in ("sentence_f1", "corpus_f1")}
                                   for k, v in rep["baselines"].items()}}
    return out
