"""``treelm.omp``: OpenMP's wait chosen before torch loads, never over the user's own choice; the
busy-core measure sees another process's work and leaves its own out."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from treelm import omp

KEYS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in KEYS}


def test_configure_sets_a_short_spin_unless_the_user_chose():
    env: dict[str, str] = {}
    omp.configure(env)
    assert env == {"GOMP_SPINCOUNT": omp.SPIN}
    for key, value in (("OMP_WAIT_POLICY", "ACTIVE"), ("GOMP_SPINCOUNT", "300000")):
        env = {key: value}
        omp.configure(env)
        assert env == {key: value}


def test_the_command_line_sets_it_before_torch_loads():
    code = ("import sys, os, treelm.cli; "
            "print(os.environ.get('GOMP_SPINCOUNT'), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env=_clean_env(), capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == [omp.SPIN, "False"]


def test_other_busy_cores_sees_another_process_not_this_one():
    spin = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\n"
                             "while time.time() - t < 3: pass"])
    try:
        time.sleep(0.3)
        seen = omp.other_busy_cores(0.5)
    finally:
        spin.kill()
        spin.wait()
    assert seen is not None and seen >= 0.5
    # this process busy itself (a thread spinning through the window): not another's work
    import threading

    quiet = omp.other_busy_cores(0.5)
    stop = threading.Event()

    def burn() -> None:
        while not stop.is_set():
            pass

    burner = threading.Thread(target=burn)
    burner.start()
    try:
        busy_self = omp.other_busy_cores(0.5)
    finally:
        stop.set()
        burner.join()
    assert quiet is not None and busy_self is not None
    assert busy_self < quiet + 0.5


def test_busy_note_is_off_with_the_switch(monkeypatch):
    monkeypatch.setenv(omp.BUSY_CHECK_ENV, "0")
    assert omp.busy_note(64) is None
    monkeypatch.delenv(omp.BUSY_CHECK_ENV)
    monkeypatch.setattr(omp, "other_busy_cores", lambda window=0.2: float(os.cpu_count() or 1))
    note = omp.busy_note(2)
    assert note is not None and "cores busy" in note and "\n" not in note
    monkeypatch.setattr(omp, "other_busy_cores", lambda window=0.2: 0.0)
    assert omp.busy_note(1) is None
