"""``treelm.heap``: freed memory kept in the process (no fresh pages for the next step's
allocations), and left alone where the user chose malloc's settings."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from treelm import heap

# A step's pattern: allocate and free the same 64 MB twenty times; the minor page faults of the
# last ten, with or without treelm.heap.keep() first.
PROBE = textwrap.dedent("""
    import resource, sys, torch
    from treelm import heap
    kept = heap.keep() if sys.argv[1] == "keep" else False
    for i in range(20):
        if i == 10:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        x = torch.empty(16 << 20)
        x.fill_(1.0)
        del x
    print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def _faults(mode: str, **env: str) -> tuple[bool, int]:
    clean = {k: v for k, v in os.environ.items()
             if not (k.startswith("MALLOC_") or k in ("GLIBC_TUNABLES", heap.ENV_VAR))}
    out = subprocess.run([sys.executable, "-c", PROBE, mode], env={**clean, **env},
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0] == "True", int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_kept_memory_is_reused_without_page_faults() -> None:
    kept, faults = _faults("keep")
    assert kept
    _, released = _faults("release")
    # 64 MB is 16,384 pages: glibc gives each block back and the kernel faults it in again
    assert released > 10 * 16_000 * 0.9
    assert faults < 1_000


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_the_users_malloc_settings_are_left_alone() -> None:
    assert _faults("keep", TREELM_HEAP="release")[0] is False
    assert _faults("keep", MALLOC_ARENA_MAX="2")[0] is False
    assert _faults("keep", GLIBC_TUNABLES="glibc.malloc.trim_threshold=1")[0] is False


def test_user_chose() -> None:
    assert not heap.user_chose({})
    assert not heap.user_chose({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F"})
    assert heap.user_chose({"TREELM_HEAP": "Release"})
    assert heap.user_chose({"MALLOC_TRIM_THRESHOLD_": "0"})
