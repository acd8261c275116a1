"""One run of a study as a job: train it to its end, score it, write ``RUN/study.json``.

The same callable runs under every launcher (submitit pickles it into a local subprocess or a
Slurm job). It trains through a child ``treelm train`` (``--resume`` where the run has a
checkpoint), so a job that is stopped, killed or requeued loses nothing but the batch in progress:

- the child ignores SIGUSR2: submitit's signal before a time limit or a preemption is the job's
  business, not the trainer's (its default action would kill it unsaved);
- on that signal submitit calls :meth:`RunJob.checkpoint`, which sends the child SIGTERM (the
  trainer saves after its batch and stops), waits for it, and hands submitit this same job to
  requeue: the next start resumes from the saved checkpoint;
- the child gets SIGTERM too when the job's process dies however it dies (``PR_SET_PDEATHSIG``),
  so no orphan trainer holds the run's lock.

The child's stderr passes through the job into its log, line by line, and the job keeps its last
lines: a training that ends before the run is finished raises :class:`JobFailed` with the child's
exit status and its own error line (``treelm: error: ...``, exit 2, for a config it refuses), which
submitit keeps in the job's result and the driver reads back (:func:`read_failure`). The child
holds the pipe's reading end too, unread, so that a write after the job died (its save on
SIGTERM) never meets a broken pipe.

The run's thread count is pinned in its config (``train.threads``) and in ``OMP_NUM_THREADS``
when it starts; a resume keeps the run's own, so it rounds as the run started.
"""

from __future__ import annotations

import collections
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import submitit

from treelm.errors import TreelmError
from treelm.rundir.files import RunFiles, atomic_write_text

#: The record of a scored run in its run directory (the driver gathers these).
STUDY_FILE = "study.json"

try:     # looked up in the parent: between fork and exec the child only calls it
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _PRCTL = None


#: The prefix of the one-line error ``treelm`` prints before it exits with 2 (``treelm.cli``).
ERROR_PREFIX = "treelm: error: "
#: The exit status of a usage error: the config or a file it names is refused; run again as it
#: is, the run fails the same way.
USAGE = 2


class JobFailed(RuntimeError):
    """A run's job ended before its run was finished and scored: the training's exit status
    (``USAGE``; negative: killed by that signal; None: the job's own scoring) and why, in one line
    (the training's own error line where it printed one)."""

    def __init__(self, code: int | None, line: str) -> None:
        self.code, self.line = code, " ".join(line.split())
        super().__init__(f"exit {code}: {self.line}")


_FAILED = re.compile(rf"{re.escape(JobFailed.__module__)}\.JobFailed: exit (-?\d+|None): (.*)")


def read_failure(trace: str) -> tuple[int | None, str]:
    """The exit status and line of the :class:`JobFailed` that ended ``trace`` (a job's traceback,
    as submitit keeps it); of any other exception, None and its last line."""
    lines = [line for line in trace.strip().splitlines() if line.strip()]
    last = lines[-1].strip() if lines else "no error text"
    m = _FAILED.fullmatch(last)
    if m is None:
        return None, last
    return (None if m[1] == "None" else int(m[1])), m[2]


def why_ended(code: int, tail: list[str]) -> str:
    """One line for a training child that ended with ``code`` before its run was finished: its own
    ``treelm: error:`` line for a usage error, else the signal that killed it, else its last line
    (a traceback's exception), else the status."""
    for line in reversed(tail if code == USAGE else []):
        if line.startswith(ERROR_PREFIX):
            return line[len(ERROR_PREFIX):].strip()
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"treelm train was killed ({name}) before the run finished"
    last = next((line.strip() for line in reversed(tail) if line.strip()), "")
    return last or f"treelm train exited with {code} before the run finished"


def _child_setup() -> None:
    """In the training child, before exec: SIGTERM when the job dies; deaf to SIGUSR2."""
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)       # PR_SET_PDEATHSIG


def saved_threads(run: Path) -> int | None:
    """``train.threads`` of a run that has started (its saved config), else None."""
    import yaml

    files = RunFiles(run)
    if not files.config.exists():
        return None
    cfg = yaml.safe_load(files.config.read_text(encoding="utf-8")) or {}
    return (cfg.get("train") or {}).get("threads")


class RunJob(submitit.helpers.Checkpointable):
    """Train the run ``run_dir`` of a study (``config`` plus ``overrides``) and score it.

    Everything it reads is named absolute (the job may start in another directory, on another
    machine): the config, the run directory, the treebanks, ``NLTK_DATA`` in ``env``.
    """

    def __init__(self, key: str, run_dir: str, config: str, overrides: list[str],
                 threads: int, env: dict[str, str | None], trees: dict[str, Any] | None,
                 evals: list[dict[str, Any]], study: str) -> None:
        self.key, self.run_dir, self.config = key, run_dir, config
        self.overrides, self.threads, self.env = list(overrides), threads, dict(env)
        self.trees, self.evals, self.study = trees, list(evals), study
        self._child: subprocess.Popen[bytes] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_child"] = None          # a process does not travel with a requeued job
        return state

    # ------------------------------------------------------------------ the command
    def train_command(self) -> tuple[list[str], int]:
        """The child's command line and its thread count: a fresh start pins ``threads``; a
        run that has started resumes with its own."""
        run = Path(self.run_dir)
        cli = [sys.executable, "-m", "treelm.cli", "train", "--quiet"]
        if RunFiles(run).pointer.exists():
            return [*cli, "--resume", str(run)], saved_threads(run) or self.threads
        return ([*cli, "--config", self.config, "--out", str(run), "--force", *self.overrides,
                 f"train.threads={self.threads}"], self.threads)

    def train(self) -> tuple[int, list[str]]:
        """Run the training child to its end: its exit status and the last lines of its stderr
        (which passes through to the job's own stderr, the log)."""
        cmd, threads = self.train_command()
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        for k, v in self.env.items():   # None: unset (submitit's local jobs hide the GPUs)
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        read, write = os.pipe()
        try:
            self._child = subprocess.Popen(cmd, env=env, preexec_fn=_child_setup,
                                           stderr=write, pass_fds=(read,))
        finally:
            os.close(write)
        tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        copier = threading.Thread(target=_pass_through, args=(read, tail), daemon=True)
        copier.start()
        try:
            code = self._child.wait()
            copier.join(timeout=10)     # (a process the child left behind may hold its stderr)
            return code, list(tail)
        finally:
            self._child = None

    # ------------------------------------------------------------------ the job
    def __call__(self) -> dict[str, Any]:
        from treelm.study.score import last_done, machine, score_run

        run = Path(self.run_dir)
        for k, v in self.env.items():   # NLTK_DATA...; None: unset, as for the child (the
            if v is None:               # scoring below reads trees on the driver's GPUs, which
                os.environ.pop(k, None)  # submitit's CUDA_VISIBLE_DEVICES="" would hide)
            else:
                os.environ[k] = v
        started = time.time()
        if last_done(run) is None:
            code, tail = self.train()
            if last_done(run) is None:
                raise JobFailed(code, why_ended(code, tail))
        try:
            entry = score_run(run, self.trees, self.evals)
        except TreelmError as e:        # a treebank or eval file refused: a usage error too
            raise JobFailed(USAGE, str(e)) from None
        entry.update(key=self.key, study=self.study, overrides=self.overrides,
                     machine=machine(), job_seconds=round(time.time() - started, 1),
                     job_id=os.environ.get("SLURM_JOB_ID") or os.environ.get(
                         "SUBMITIT_LOCAL_JOB_ID"))
        atomic_write_text(run / STUDY_FILE, json.dumps(entry, indent=1) + "\n")
        return {"key": self.key, "tokens": entry["tokens"]}

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission:
        """Submitit's time limit or preemption: the trainer saves and stops, then this job is
        requeued as it is (its next start resumes the run)."""
        child = self._child
        if child is not None:
            os.kill(child.pid, signal.SIGTERM)
            if not _exited(child.pid, 120):
                os.kill(child.pid, signal.SIGTERM)  # a second one stops at once
                _exited(child.pid, 30)
        return super().checkpoint(*args, **kwargs)


#: The child's stderr lines a job keeps to say why it failed.
TAIL_LINES = 50


def _pass_through(fd: int, tail: collections.deque[str]) -> None:
    """Copy the child's stderr (pipe ``fd``) to this process's stderr line by line, keeping the
    last lines in ``tail``; until the child closes it (at its exit: it holds the reading end too,
    which no other process does)."""
    out = sys.stderr.buffer if hasattr(sys.stderr, "buffer") else None
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        for raw in iter(pipe.readline, b""):
            tail.append(raw.decode("utf-8", "replace").rstrip("\n"))
            if out is not None:
                try:
                    out.write(raw)
                    out.flush()
                except (OSError, ValueError):
                    out = None


def _exited(pid: int, timeout: float) -> bool:
    """Whether process ``pid`` ended (gone, or a zombie) within ``timeout`` seconds. Not
    ``Popen.wait``: this runs in a signal handler that interrupted ``Popen.wait`` on the same
    process, whose lock that wait still holds (a second wait would spin on it, then hang)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False
