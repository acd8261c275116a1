"""How treelm's OpenMP threads wait, and how busy the machine is when a training starts.

**Waiting.** PyTorch's CPU kernels and treelm's C++ time loops run their parallel parts on GNU
OpenMP (libgomp). Between two parallel regions a worker thread first *spins*, polling for the
next region, then sleeps: with ``OMP_WAIT_POLICY`` unset it spins ``GOMP_SPINCOUNT`` = 300,000
rounds (a few hundred microseconds). A recurrent step opens regions every few hundred
microseconds, so alone the spin keeps threads hot and costs nothing. Beside another process on
the same cores it is what the issue measured: each spinning thread holds a core the other
process's thread is waiting for, both processes' joins wait for descheduled threads, and two
``ptb-onlstm-cpu`` trainings started together trained 35 times fewer tokens each than one alone
(issue 38; 100% system time: ``sched_yield`` and futexes). :data:`SPIN` rounds (tens of
microseconds) keep what the spin buys alone (``benchmarks/side_by_side.py``: the record gives
each setting alone and in pairs) and give a core back quickly when it is needed elsewhere.

:func:`configure` sets it before libgomp is loaded (libgomp reads its environment once, when
torch is imported), unless the user set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` themselves;
the command line calls it first thing. Python code that imports torch before treelm keeps
libgomp's default.

**Busy machine.** :func:`other_busy_cores` measures, over a fraction of a second, how many cores
other processes keep busy (``/proc/stat`` less this process's own time), so that a training can
say at its start that it will share the machine, and that one thread would serve it better there
(two ``ptb-onlstm-cpu`` trainings side by side on 2 cores: 2,599 and 2,500 tokens/s on one thread
each, 2,084 and 2,072 on two; ``side_by_side-20261126.json``). treelm does not lower the count
itself: the thread count a run starts with is what its resume must find to round alike. The
check costs 0.2 s of the run's budget, and only a training on several threads outside DDP asks.
"""

from __future__ import annotations

import os
import time

#: libgomp spin rounds before a waiting thread sleeps (libgomp's own default: 300,000).
SPIN = "10000"
#: Set to 0 to skip the busy-core check at a training's start.
BUSY_CHECK_ENV = "TREELM_BUSY_CHECK"


def configure(environ: dict[str, str] | None = None) -> None:
    """Choose OpenMP's wait before torch loads libgomp, unless the user chose it."""
    env = os.environ if environ is None else environ
    if "OMP_WAIT_POLICY" not in env and "GOMP_SPINCOUNT" not in env:
        env["GOMP_SPINCOUNT"] = SPIN


def _busy_ticks() -> tuple[int, int] | None:
    """(busy, total) clock ticks of all CPUs since boot, from ``/proc/stat``."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)     # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def _own_ticks() -> int:
    t = os.times()
    return round((t.user + t.system) * os.sysconf("SC_CLK_TCK"))


def other_busy_cores(window: float = 0.2) -> float | None:
    """Cores kept busy by other processes over the next ``window`` seconds (``None`` where
    ``/proc/stat`` cannot be read)."""
    a, own_a = _busy_ticks(), _own_ticks()
    time.sleep(window)
    b, own_b = _busy_ticks(), _own_ticks()
    if a is None or b is None or b[1] <= a[1]:
        return None
    cores = os.cpu_count() or 1
    busy = (b[0] - a[0]) - (own_b - own_a)
    return max(0.0, cores * busy / (b[1] - a[1]))


def busy_note(threads: int) -> str | None:
    """A one-line note when other processes keep enough cores busy that ``threads`` threads will
    share them; ``None`` otherwise or when the check is off."""
    if os.environ.get(BUSY_CHECK_ENV, "1") == "0":
        return None
    busy = other_busy_cores()
    cores = os.cpu_count() or 1
    if busy is None or cores - busy >= threads - 0.5:
        return None
    return (f"treelm: note: other processes keep about {busy:.1f} of this machine's {cores} "
            f"cores busy; training on {threads} threads shares them (beside another training, "
            f"train.threads=1 trains faster: benchmarks/side_by_side.py)")
