"""A real one-node Slurm cluster for the tests, started by the ``slurm_cluster`` fixture.

``start_cluster()`` starts ``munged`` (its own key and socket in a temp dir), ``slurmctld -D`` and
``slurmd -D`` as subprocesses of the test process, with a ``slurm.conf`` written to the temp dir
and exported as ``SLURM_CONF`` (so ``sbatch``, ``squeue``, ``scontrol``, ``scancel`` and submitit
find it); it waits until the node is idle, and on exit cancels the jobs, stops the daemons and
kills whatever is left that carries this ``SLURM_CONF``. The fixture skips with one line
(``slurm: <reason>``) where Slurm is not installed (``apt-get install slurm-wlm munge``), the tests
do not run as root, or the daemons do not come up.

No accounting (no slurmdbd, which needs MySQL): the real ``sacct`` fails ("Slurm accounting
storage is disabled"), and submitit then reads every state as ``UNKNOWN``: ``job.result()`` still
works (it waits for the result pickle), but a job that dies without one (cancelled, killed) is
waited for forever. ``cluster.env``'s ``PATH`` starts with ``cluster.bin``, which holds an
``sacct`` answering submitit's query (``-o JobID,State,NodeList --parsable2 -j ID...``) from
``squeue -t all`` (jobs are listed until ``MinJobAge``, 300 s, after their end); in-process
submitit sees it after ``monkeypatch.setenv("PATH", slurm_cluster.env["PATH"])``.
No cgroups (a container has none to delegate): proctrack/linuxproc and task/none. A requeued job
waits ``cred_expire + 1`` = 11 s before it may start again (``release()`` lets it start 2 s after
it is pending; not sooner, see there), and time-limit signals (``--signal=USR2@90``) come from
slurmctld's 30-second check, so up to 30 s late: tests send them with ``scancel --signal=USR2
JOBID``, which reaches every process of the job's steps, their children included.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PARTITION = "debug"
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo", "srun")


class SlurmUnavailable(RuntimeError):
    """Slurm cannot run here; the message is the one-line reason."""


@dataclass
class SlurmCluster:
    root: Path  # the temp dir: slurm.conf, logs, state, spool, munge socket
    conf: Path
    partition: str
    node: str
    cpus: int
    bin: Path  # holds the ``sacct`` shim
    # os.environ, SLURM_CONF, PATH with ``bin`` first: pass it to children
    env: dict[str, str] = field(repr=False)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)
    started_s: float = 0.0  # how long the start took

    def log(self, name: str) -> Path:
        return self.root / f"{name}.log"

    def logs(self, lines: int = 20) -> str:
        """The last ``lines`` lines of each daemon's log, for failure messages."""
        parts = []
        for name in DAEMONS:
            path = self.log(name)
            text = path.read_text(errors="replace").splitlines() if path.exists() else []
            parts.append(f"--- {name} ({path}) ---\n" + "\n".join(text[-lines:]))
        return "\n".join(parts)

    def run(self, *args: str, check: bool = True, timeout: float = 30,
            ) -> subprocess.CompletedProcess:
        """A Slurm command (``"sbatch", "--wrap", ...``) run against this cluster."""
        return subprocess.run(args, env=self.env, capture_output=True, text=True, check=check,
                              timeout=timeout)

    def sbatch(self, *args: str) -> str:
        """Submits a job (``sbatch --parsable ARGS``) and returns its id."""
        out = self.run("sbatch", "--parsable", f"--partition={self.partition}", *args).stdout
        return out.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job`` as a dict (``JobState``, ``Restarts``, ...); {} once forgotten
        (``MinJobAge`` after the end)."""
        res = self.run("scontrol", "-o", "show", "job", job_id, check=False)
        if res.returncode:
            return {}
        return dict(kv.split("=", 1) for kv in res.stdout.split() if "=" in kv)

    def release(self, job_id: str, timeout: float = 30) -> None:
        """Lets a requeued job start about 2 s from now rather than after the requeue delay.

        Not at once: slurmd revokes the old launch credential at whole-second resolution and
        refuses any credential created in or before that second (``cred->ctime <= revoked``,
        "Job credential revoked", and the job FAILS); a start in the requeue's own second lost
        that race in CI. Two seconds after PENDING is past the revocation's second whatever the
        clocks' phase, and still far below the 11-second delay."""
        self.wait_state(job_id, ("PENDING",), timeout)
        time.sleep(2.0)
        self.run("scontrol", "update", f"JobId={job_id}", "StartTime=now")

    def wait_state(self, job_id: str, states: tuple[str, ...] = ("COMPLETED",),
                   timeout: float = 30) -> dict[str, str]:
        """Polls the job until its ``JobState`` is one of ``states``; fails with the logs."""
        deadline = time.monotonic() + timeout
        info: dict[str, str] = {}
        while time.monotonic() < deadline:
            info = self.job(job_id)
            if info.get("JobState") in states:
                return info
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} not in {states} after {timeout}s: {info}\n"
                             + self.logs())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _hardware() -> dict[str, str]:
    """``slurmd -C``'s first line as a dict (NodeName, CPUs, ..., RealMemory)."""
    slurmd = shutil.which("slurmd") or "/usr/sbin/slurmd"
    res = subprocess.run([slurmd, "-C"], capture_output=True, text=True, timeout=30)
    hw = dict(kv.split("=", 1) for kv in res.stdout.split("\n", 1)[0].split() if "=" in kv)
    if res.returncode or "CPUs" not in hw:
        raise SlurmUnavailable(f"slurmd -C failed: {(res.stderr or res.stdout).strip()[:200]}")
    return hw


SACCT_SHIM = """#!{python}
# sacct for a cluster without accounting: submitit's query (-o JobID,State,NodeList --parsable2
# -j ID ...) answered by squeue, which lists jobs until MinJobAge after their end
import subprocess, sys

args, ids = sys.argv[1:], []
for i, a in enumerate(args):
    if a in ("-j", "--jobs") and i + 1 < len(args):
        ids += args[i + 1].split(",")
    elif a.startswith(("-j", "--jobs=")):
        ids += a.split("=", 1)[-1].removeprefix("-j").split(",")
print("JobID|State|NodeList")
for job in ids:  # one at a time: squeue fails on the whole list if one id is gone
    res = subprocess.run(["squeue", "-h", "-t", "all", "-j", job, "-o", "%i|%T|%N"],
                         capture_output=True, text=True)
    sys.stdout.write(res.stdout if res.returncode == 0 else "")
"""


def write_conf(root: Path, node: str, hw: dict[str, str]) -> Path:
    conf = root / "slurm.conf"
    mem = max(1, int(hw.get("RealMemory", "1024")) - 256)  # a little below what slurmd finds
    # FirstJobId: ids differ between clusters (submitit's watcher caches states by id, per
    # process); cred_expire=10: a requeued job may start again after 11 s (default 120)
    conf.write_text(f"""\
ClusterName=treelm
FirstJobId={random.randrange(1000, 1_000_000, 1000)}
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root / "munge.sock"},cred_expire=10
MailProg=/bin/true
StateSaveLocation={root / "state"}
SlurmdSpoolDir={root / "spool"}
SlurmctldPidFile={root / "slurmctld.pid"}
SlurmdPidFile={root / "slurmd.pid"}
SlurmctldLogFile={root / "slurmctld.log"}
SlurmdLogFile={root / "slurmd.log"}
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={root / "jobcomp.txt"}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_min_interval=0
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
JobRequeue=1
KillWait=2
MinJobAge=300
InactiveLimit=0
SlurmctldTimeout=10
SlurmdTimeout=10
MessageTimeout=5
Waittime=0
NodeName={node} NodeAddr=127.0.0.1 CPUs={hw.get("CPUs", "1")} \
Boards={hw.get("Boards", "1")} SocketsPerBoard={hw.get("SocketsPerBoard", "1")} \
CoresPerSocket={hw.get("CoresPerSocket", "1")} ThreadsPerCore={hw.get("ThreadsPerCore", "1")} \
RealMemory={mem} State=UNKNOWN
PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP
""")
    return conf


# errors every start logs (no PMIx library, no saved state yet)
_HARMLESS = re.compile(r"pmix|MPI|state file|Trying backup", re.I)


def _first_error(cluster: SlurmCluster, culprit: str | None) -> str:
    """The first fatal or error line of the daemon that failed (else of slurmd, slurmctld,
    munged), else the last line of any log."""
    last = ""
    for name in dict.fromkeys([culprit, "slurmd", "slurmctld", "munged"]):
        if name is None:
            continue
        for suffix in (".out", ".log"):  # .out: its stdout and stderr, from before the log opens
            path = cluster.root / f"{name}{suffix}"
            lines = path.read_text(errors="replace").splitlines() if path.exists() else []
            errors = [line.strip() for line in lines if re.search(
                r"fatal|error|cannot|failed|unable", line, re.I) and not _HARMLESS.search(line)]
            fatal = [line for line in errors if "fatal" in line.lower()]
            if errors:
                return f"{name}: {(fatal or errors)[0]}"
            last = f"{name}: {lines[-1].strip()}" if lines else last
    return last or "no log output"


def _stop(cluster: SlurmCluster) -> None:
    """Cancels the jobs, stops the daemons (slurmd first; SIGKILL after 10 s), then kills what
    still carries this SLURM_CONF (slurmstepd and job processes outlive slurmd by design)."""
    procs = cluster.procs
    if procs.get("slurmctld") and procs["slurmctld"].poll() is None:
        with contextlib.suppress(Exception):
            cluster.run("scancel", f"--partition={cluster.partition}", check=False, timeout=10)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and cluster.run(
                    "squeue", "-h", "-o", "%i", check=False, timeout=10).stdout.strip():
                time.sleep(0.2)
    for name in reversed(list(procs)):
        p = procs[name]
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
    _kill_leftovers(f"SLURM_CONF={cluster.conf}".encode())


def _kill_leftovers(marker: bytes) -> None:
    """SIGKILLs the processes whose environment holds ``marker``, other than this one."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):
            pass


@contextlib.contextmanager
def start_cluster(timeout: float = 30) -> Iterator[SlurmCluster]:
    """Starts the cluster (raises ``SlurmUnavailable``), yields it, stops it. ``SLURM_CONF`` is
    set in ``os.environ`` while it runs."""
    missing = [b for b in DAEMONS + CLIENTS if shutil.which(b) is None
               and not os.path.exists(f"/usr/sbin/{b}")]
    if missing:
        raise SlurmUnavailable(f"not installed ({', '.join(missing)}): "
                               "apt-get install slurm-wlm munge")
    if os.geteuid() != 0:
        raise SlurmUnavailable("the daemons need root (SlurmUser=root)")
    sbin = {b: shutil.which(b) or f"/usr/sbin/{b}" for b in DAEMONS}
    hw = _hardware()
    node = socket.gethostname().split(".")[0]
    # short: the munge socket and slurmd's step sockets are AF_UNIX paths (108 bytes at most)
    root = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp" if os.path.isdir("/tmp") else None))
    root.chmod(0o755)
    for sub in ("state", "spool", "bin"):
        (root / sub).mkdir()
    shim = root / "bin" / "sacct"
    shim.write_text(SACCT_SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    conf = write_conf(root, node, hw)
    env = {**os.environ, "SLURM_CONF": str(conf),
           "PATH": os.pathsep.join([str(root / "bin"), os.environ.get("PATH", os.defpath)])}
    cluster = SlurmCluster(root=root, conf=conf, partition=PARTITION, node=node,
                           cpus=int(hw.get("CPUs", "1")), bin=root / "bin", env=env)
    commands = {
        "munged": [sbin["munged"], "-F", "--force", f"--socket={root / 'munge.sock'}",
                   f"--key-file={key}", f"--pid-file={root / 'munged.pid'}",
                   f"--seed-file={root / 'munged.seed'}", f"--log-file={root / 'munged.log'}"],
        "slurmctld": [sbin["slurmctld"], "-D", "-c", "-i", "-f", str(conf)],
        "slurmd": [sbin["slurmd"], "-D", "-N", node, "-f", str(conf)],
    }
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    t0 = time.monotonic()
    try:
        try:
            for name, cmd in commands.items():
                with open(root / f"{name}.out", "wb") as out:
                    cluster.procs[name] = subprocess.Popen(
                        cmd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                        stderr=subprocess.STDOUT, start_new_session=True,
                        preexec_fn=_die_with_parent)
                if name == "munged":
                    _wait(lambda: (root / "munge.sock").exists(), cluster, name, 10)
            _wait(lambda: _node_idle(cluster), cluster, "node", timeout)
        except SlurmUnavailable as e:
            culprit = str(e).split()[0]
            raise SlurmUnavailable(f"{e} after {time.monotonic() - t0:.0f}s: "
                                   f"{_first_error(cluster, culprit)}") from None
        cluster.started_s = time.monotonic() - t0
        yield cluster
    finally:
        _stop(cluster)
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        shutil.rmtree(root, ignore_errors=True)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies without a teardown."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _node_idle(cluster: SlurmCluster) -> bool:
    res = cluster.run("sinfo", "-h", "-N", "-o", "%T", check=False, timeout=10)
    return res.returncode == 0 and res.stdout.strip() == "idle"


def _wait(ready, cluster: SlurmCluster, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        dead = [n for n, p in cluster.procs.items() if p.poll() is not None]
        if dead:
            raise SlurmUnavailable(f"{dead[0]} exited ({cluster.procs[dead[0]].returncode})")
        if time.monotonic() > deadline:
            raise SlurmUnavailable(f"{what} not ready")  # "node": not idle in sinfo
        time.sleep(0.2)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A running one-node cluster (see the module's docstring); skips where there is none."""
    with contextlib.ExitStack() as stack:
        try:
            cluster = stack.enter_context(start_cluster())
        except SlurmUnavailable as e:
            pytest.skip(f"slurm: {e}")
        yield cluster
