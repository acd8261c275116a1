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
run is checked as ``treelm train`` and the job would check it (:func:`check_runs`).
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
from treelm.study.job import STUDY_FILE, RunJob
from treelm.study.record import new_record, newest_record, read_record, write_record
from treelm.study.spec import Launcher, RunSpec, Study, describe, from_cwd

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


def check_runs(study: Study, specs: list[RunSpec] | None = None) -> None:
    """Each run of ``specs`` (those about to be submitted; default all) refused now, in one
    line, where ``treelm train`` or its job would refuse it after its submission: its config
    checked whole (``treelm train``'s ``read_config``), then what depends on the task
    (``train.eval_parse`` and ``score.trees`` score a language model's trees), the data files it
    names, and each treebank it would read (``train.eval_parse``'s at the start,
    ``score.trees.test`` at the end: missing or malformed)."""
    from treelm.config import apply_overrides, load_config
    from treelm.syntax.report import MissingTreebankError, load_golds
    from treelm.train.builders import read_config
    from treelm.train.trees import check_task

    cfg = load_config(study.config)
    read: set[tuple[str, int | None]] = set()
    for spec in study.run_specs() if specs is None else specs:
        where = f"{study.file.name}: run {spec.key}"
        try:
            tc, config = read_config(apply_overrides(cfg, [*spec.overrides, "train.threads=1"]))
            task = config.task.name
            if study.trees is not None and task != "lm":
                raise TreelmError(f"score.trees scores a language model's trees; "
                                  f"{study.raw['config']} is a {task!r} run (drop score.trees)")
            check_task(tc.eval_parse, task)
            for path in config.data_paths():
                if not Path(path).exists():
                    raise TreelmError(f"{path}: no such file or directory (the config's data)")
            banks: list[tuple[str, int | None, bool]] = []
            if tc.eval_parse is not None:
                ep = tc.eval_parse
                banks.append((str(ep.treebank), ep.max_len, ep.if_missing == "skip"))
            if study.trees is not None and study.trees.test:
                banks += [(study.trees.test, n, False) for n in study.trees.test_max_len]
            for bank, max_len, skip in banks:
                if (bank, max_len) not in read:
                    try:
                        load_golds(bank, max_len)
                    except MissingTreebankError:
                        if not skip:
                            raise
                    read.add((bank, max_len))
        except TreelmError as e:
            raise TreelmError(f"{where}: {e}") from None


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


#: The options of ``launcher:`` that the local launcher reads (Slurm reads all but ``jobs``).
LOCAL_OPTIONS = ("jobs", "threads", "time")


def launcher_text(la: Launcher) -> str:
    """``slurm (partition debug, time 10)``: a launcher and the options it was given that it
    reads."""
    default = Launcher()
    reads = LOCAL_OPTIONS if la.name == "local" else [
        f.name for f in dataclasses.fields(la) if f.name not in ("name", "jobs")]
    opts = [f"{k} {v:g}" if isinstance(v := getattr(la, k), float) else f"{k} {v}"
            for k in reads if getattr(la, k) != getattr(default, k)]
    return la.name + (f" ({', '.join(opts)})" if opts else "")


def _flat(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict) and k != "eval_parse" and v:
            out += _flat(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out


class Driver:
    """The study's driver; ``flags``: the launcher options of today's command line, which decide
    for new submissions only (:func:`choose_launcher`)."""

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
        live = self._launch._live if self._launch is not None else None
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
        if path.exists() and _trained(record["study"]) != _trained(describe(self.study)):
            # another study under this name: its figures are not this one's to extend
            dated = RESULTS / f"{self.study.name}-{time.strftime('%Y%m%d')}.json"
            # today's record is the one in the way: only a new name (or moving it) helps
            other = (f"a new record: (e.g. {dated}) or a new name:" if dated != path
                     else "a new name: (its record is then another file), or move this record")
            raise TreelmError(
                f"{path}: the record of another version of this study (its "
                f"{_first_change(record['study'], describe(self.study))} differs); give the "
                f"study {other}")
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
        if self.study.trees and self.study.trees.ensemble:
            from treelm.study.ensemble import refresh

            changed = refresh(record) or changed
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
    if score.get("trees"):              # ensembles are made of the runs' trees: no run changes
        score["trees"] = {k: v for k, v in score["trees"].items() if k != "ensemble"}
    score["eval"] = [{k: v for k, v in e.items() if defaults.get(k, object()) != v}
                     for e in score.get("eval") or []]
    out["score"] = score
    return out


def _first_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    return next((k for k in TRAINED if k != "seeds" and old.get(k) != new.get(k)), "definition")


def tree_baselines(study: Study) -> dict[str, Any]:
    """The trivial trees and the rule control on the study's dev and test sentences."""
    from treelm.study.score import tree_parts
    from treelm.syntax.baselines import DEFAULT_BASELINES, RULE_CONTROLS
    from treelm.syntax.report import parsing_report

    assert study.trees is not None
    out = {}
    for name, treebank, max_len in tree_parts(dataclasses.asdict(study.trees)):
        # the trivial trees and the rule control (random levels through each tree rule)
        rep = parsing_report(treebank, max_len, baselines=(*DEFAULT_BASELINES, *RULE_CONTROLS))
        out[name] = {"n_sentences": rep["n_sentences"], "n_words": rep["n_words"],
                     "baselines": {k: {m: v[m] for m in ("sentence_f1", "corpus_f1")}
                                   for k, v in rep["baselines"].items()}}
    return out
