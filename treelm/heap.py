"""Keep a training's freed memory in the process, so that its next step reuses it.

A training step allocates and frees the same tensors step after step: activations, saved
buffers, gradients. glibc's ``malloc`` gives a
large free block back to the kernel (``munmap`` above its mmap threshold, a trim of the heap's
top above its trim threshold), so the next step's allocation of it is new memory, which the
kernel hands over one zeroed 4 KiB page at a time, each on a page fault. On the Zen 5 VM the
processes of one code faulted 714 to 5,129 pages a step, from one process to the next (the
``page_faults_per_step`` of ``step_ab-zen5-bf16-rows-20261129.json``), and the rounds whose
process faulted more tended to run slower: a process's luck with its heap was part of what
looked like the machine's noise.

:func:`keep` sets glibc's mmap threshold to 1 GiB (32 MiB where a glibc allows no more) and its
trim threshold to 2 GiB (``mallopt``),
so that freed blocks stay in the heap and the steps after the first reuse them: the process's
resident memory stays at its peak, which a training reaches at every step anyway. It changes no
number a training computes. :class:`~treelm.train.trainer.Trainer` calls it; elsewhere (a C
library other than glibc), or where the user chose malloc's settings (``MALLOC_*`` or a
``glibc.malloc`` tunable in ``GLIBC_TUNABLES``), or with ``TREELM_HEAP=release``, it does
nothing.
"""

from __future__ import annotations

import ctypes
import os

#: Set to ``release`` to keep glibc's own thresholds.
ENV_VAR = "TREELM_HEAP"
MMAP_THRESHOLD = 1 << 30        # blocks below this come from the heap, not from mmap ...
MMAP_THRESHOLD_MAX = 32 << 20   # ... or below glibc's own ceiling, where a glibc refuses more
TRIM_THRESHOLD = (1 << 31) - 1  # free memory at the heap's top kept up to this (mallopt: int)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # glibc's <malloc.h>
_done: bool | None = None


def user_chose(environ: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """Whether the environment sets malloc's behaviour itself, or asks to leave it."""
    env = os.environ if environ is None else environ
    return (env.get(ENV_VAR, "").strip().lower() == "release"
            or any(k.startswith("MALLOC_") for k in env)
            or "glibc.malloc" in env.get("GLIBC_TUNABLES", ""))


def keep() -> bool:
    """Keep freed memory in this process (module docstring); whether the thresholds are set.
    Once per process: later calls return the first one's answer."""
    global _done
    if _done is None:
        _done = False if user_chose() else _set()
    return _done


def _set() -> bool:
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        if not hasattr(libc, "gnu_get_libc_version"):   # another C library's mallopt
            return False
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool((mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                 or mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX))
                and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
