"""The Makefile's choice of Python for ``make setup`` (issue 43): ``python3.11`` where it runs,
else ``python3`` where it is 3.11 or newer, else one line naming what was found; ``PYTHON=...``
wins. Checked with ``make -n setup`` (nothing is run) on a PATH holding only fake interpreters,
each a shell script answering ``--version`` as Python does.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="no make on this machine")


def dry_setup(tmp_path: Path, pythons: dict[str, str], *args: str) -> tuple[int, str]:
    """``make -n setup`` with PATH = a folder of fake interpreters {name: version}; returns the
    exit status and the first line make printed (the venv command, or the refusal)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, version in pythons.items():
        fake = bin_dir / name
        fake.write_text(f'#!/bin/sh\necho "Python {version}"\n')
        fake.chmod(0o755)
    # a bare environment: the caller's PYTHON or MAKEFLAGS (under `make test`) must not leak in
    proc = subprocess.run([str(MAKE), "-n", "setup", *args], cwd=ROOT, capture_output=True,
                          text=True, env={"PATH": str(bin_dir)}, timeout=60)
    return proc.returncode, (proc.stdout + proc.stderr).splitlines()[0]


@pytest.mark.parametrize(("pythons", "chosen"), [
    ({"python3.11": "3.11.9", "python3": "3.10.12"}, "python3.11"),   # by name, as before
    ({"python3": "3.12.3"}, "python3"),                               # Ubuntu 24.04
    ({"python3": "3.13.0rc1"}, "python3"),
])
def test_setup_takes_python311_else_a_recent_python3(tmp_path, pythons, chosen):
    rc, line = dry_setup(tmp_path, pythons)
    assert rc == 0 and line == f"{chosen} -m venv .venv", line


@pytest.mark.parametrize(("pythons", "found"), [
    ({"python3": "3.10.12"}, "python3 3.10.12"),
    ({"python3": "3.9.18"}, "python3 3.9.18"),
    ({}, "no python3"),
])
def test_setup_refuses_an_old_python_in_one_line_naming_it(tmp_path, pythons, found):
    rc, line = dry_setup(tmp_path, pythons)
    assert rc == 2
    assert f"make setup: needs Python >= 3.11; found {found} (no python3.11)" in line, line


def test_python_on_the_command_line_wins(tmp_path):
    rc, line = dry_setup(tmp_path, {"python3": "3.10.12"}, "PYTHON=/opt/py/bin/python3.14")
    assert rc == 0 and line == "/opt/py/bin/python3.14 -m venv .venv", line


def test_other_targets_probe_nothing(tmp_path):
    """``make test`` on a machine without a usable Python still gets as far as its command."""
    rc, line = dry_setup(tmp_path, {})
    assert rc == 2
    proc = subprocess.run([str(MAKE), "-n", "test"], cwd=ROOT, capture_output=True, text=True,
                          env={"PATH": str(tmp_path / "bin")}, timeout=60)
    assert proc.returncode == 0 and "pytest tests" in proc.stdout, proc.stderr
