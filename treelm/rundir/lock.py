"""One writer per run directory: an advisory ``flock`` on ``RUN/train.lock``.

``treelm train`` and ``treelm train --resume`` hold the lock while they write a run, so that a
second writer on the same directory stops at once with one line naming the holder (its pid, host
and start time, which the holder writes into the file) instead of both writing checkpoints into
one ``ckpt/`` (each save removes the checkpoint directories its own pointer does not name, which
includes the one the other process is writing: that was the "No such file or directory" a second
writer used to end with).

Why ``flock``: the kernel releases it when the holding process dies, however it dies (SIGKILL,
OOM, power cut of the process), so a lock never outlives its holder and needs no pid guessing to
break. A file left behind with a holder's details but no lock on it is therefore *stale*: its
holder died without releasing; the next writer takes it over and says whose it was.

Releasing unlinks the file *before* unlocking it, and a taker checks after locking that the path
still names the inode it locked (else it retries): without that check a writer that opened the
old file just before it was unlinked could lock the orphaned inode while a third locks the new
file, and both would hold "the" lock. ``flock`` is advisory and per open file: readers (``eval``,
``generate``, ...) ignore it, and a second lock in the same process conflicts like another
process's would.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import os
import socket
from pathlib import Path
from typing import Any

from treelm.errors import TreelmError


def is_held(path: str | os.PathLike[str]) -> bool:
    """Whether a live process holds the writer lock ``path``, found without writing anything: a
    shared ``flock`` taken read-only fails while a writer holds its exclusive one (and a writer
    keeps the file for as long as it holds the lock)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


class RunLockedError(TreelmError):
    """Another live process writes this run directory."""


def _details() -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"pid {os.getpid()} on {socket.gethostname()}, started {now}"


class RunLock:
    """The writer's lock of a run directory (``path``: the lock file, which
    :class:`treelm.rundir.files.RunFiles` names). ``acquire`` returns a note when it took over a
    stale lock, ``release`` is safe to call twice."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.fd: int | None = None

    def acquire(self) -> str | None:
        """Take the lock or raise :class:`RunLockedError` naming the holder; the run directory
        must exist. Returns a one-line note if a dead holder's lock was taken over."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                holder = _read(fd)
                os.close(fd)
                if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                raise RunLockedError(
                    f"{self.path.parent}: another treelm process is writing this run "
                    f"({holder or 'it has not written its details yet'}); wait for it to end, "
                    f"or stop it (its Ctrl-C saves a checkpoint) and resume") from None
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)          # locked a file its holder had just unlinked: take the new one
        previous = _read(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, (_details() + "\n").encode(), 0)
        os.fsync(fd)
        self.fd = fd
        if previous:
            return (f"treelm: note: took over a stale lock of {self.path.parent} ({previous}; "
                    f"that process is no longer running)")
        return None

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.unlink(self.path)      # before unlocking: see the module docstring
        except FileNotFoundError:     # e.g. a failed new run removed its directory
            pass
        os.close(self.fd)             # closing the last descriptor drops the flock
        self.fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""
