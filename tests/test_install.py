"""treelm installs beside the user's torch (issue 47): the package declares a range, not a pin.

The wheel is built from a copy of the package (setuptools, no build isolation: nothing is
downloaded) and its metadata read; then pip resolves that wheel, ``--dry-run --no-index``, into a
fresh environment whose only distributions are stand-ins (a ``*.dist-info`` folder each, no code)
for torch at another version than ``make setup``'s and for every other requirement. A range keeps
the user's torch; a torch below it is refused, which is what shows the check can fail.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """treelm's wheel, built from a copy of pyproject.toml, README.md and treelm/."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "treelm", src / "treelm",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    code = ("import sys, setuptools.build_meta as b; "
            "print(b.build_wheel(sys.argv[1]))")
    proc = subprocess.run([sys.executable, "-c", code, str(out)], cwd=src, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out / proc.stdout.strip().splitlines()[-1]


def requirements(wheel: Path) -> list[Requirement]:
    """The wheel's ``Requires-Dist`` lines."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    return [Requirement(line.split(":", 1)[1].strip()) for line in text.splitlines()
            if line.startswith("Requires-Dist:")]


def test_the_wheel_declares_a_torch_range_not_a_pin(wheel):
    torch = [r for r in requirements(wheel) if r.name == "torch"]
    assert len(torch) == 1, torch
    spec = torch[0].specifier
    assert not any(s.operator in ("==", "===") for s in spec), str(spec)
    for version in ("2.11.0", "2.11.0+cu130", "2.13.0", "2.14.1"):
        assert spec.contains(version, prereleases=False), (version, str(spec))
    assert not spec.contains("2.10.0"), str(spec)


def test_make_setup_still_installs_exactly_2_13_0():
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make on this machine")
    proc = subprocess.run([make, "-n", "setup", "PYTHON=python3"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"pip install torch==2\.13\.0$", proc.stdout, re.M), proc.stdout


def _lowest(req: Requirement) -> str:
    """A version that satisfies ``req``: its ``>=`` bound, else 1.0."""
    bounds = [s.version for s in req.specifier if s.operator in (">=", "==", "~=")]
    return bounds[0] if bounds else "1.0"


def stand_in_env(where: Path, wheel: Path, torch_version: str) -> Path:
    """A fresh venv (no pip, nothing installed) holding only stand-in distributions: torch at
    ``torch_version`` and every other requirement of the wheel at a version that satisfies it."""
    venv.EnvBuilder(with_pip=False).create(where)
    site = next(where.glob("lib/python*/site-packages"))
    dists = {"torch": torch_version}
    for req in requirements(wheel):
        if req.marker is None and req.name != "torch":   # the extras' are not resolved
            dists[req.name] = _lowest(req)
    for name, version in dists.items():
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "INSTALLER").write_text("stand-in\n")
        (info / "RECORD").write_text("")
    return where / "bin" / "python"


def dry_install(python: Path, wheel: Path, report: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run",
         "--no-index", "--disable-pip-version-check", "--report", str(report), str(wheel)],
        capture_output=True, text=True, timeout=300)


def test_pip_keeps_the_users_torch(wheel, tmp_path):
    python = stand_in_env(tmp_path / "env", wheel, "2.11.0+cu130")
    proc = dry_install(python, wheel, tmp_path / "report.json")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    installs = [i["metadata"]["name"] for i in report["install"]]
    assert installs == ["treelm"], installs          # torch (and the rest) left as they are


def test_a_torch_below_the_range_is_refused(wheel, tmp_path):
    python = stand_in_env(tmp_path / "env", wheel, "2.10.0")
    proc = dry_install(python, wheel, tmp_path / "report.json")
    assert proc.returncode != 0
    assert "torch" in proc.stdout + proc.stderr
