"""Measuring one class of CPU on another: ``TREELM_CXX_ISA`` builds treelm's C++ loops for a lower
instruction set than the CPU's (:mod:`treelm.kernels.build`), and ``benchmarks/cells.py --isa
avx2`` runs with PyTorch, MKL, oneDNN and those loops limited to AVX2 (the AVX2 proxy of issue 49),
its record saying so. Nothing is compiled here: the flags and names are checked, and the
benchmark runs with the C++ loops switched off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
from benchmark_scripts import load_benchmark

from treelm.kernels import build

ROOT = Path(__file__).resolve().parents[1]
X86 = torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


@pytest.fixture
def avx512(monkeypatch: pytest.MonkeyPatch) -> None:
    """An AVX-512 CPU, whatever this one is, and no ISA asked for."""
    monkeypatch.setattr(build, "_cpu_isa", lambda: "AVX512")
    monkeypatch.delenv(build.ISA_ENV, raising=False)


def test_avx2_asked_on_avx512_builds_avx2(avx512: None, monkeypatch: pytest.MonkeyPatch) -> None:
    native_flags, native_name = build.flags(), build.name()
    assert "-mavx512f" in native_flags and native_name.startswith("treelm_loops_avx512_")
    monkeypatch.setenv(build.ISA_ENV, "avx2")
    flags = build.flags()
    assert not [f for f in flags if f.startswith("-mavx512")], flags
    assert "-mavx2" in flags and "-mfma" in flags
    assert build.name().startswith("treelm_loops_avx2_")
    assert build.build_dir().name == build.name() != native_name   # a folder of its own


@pytest.mark.parametrize("value", ["", "auto", "AUTO", " avx512 "])
def test_unset_or_auto_or_same_is_the_cpus(avx512: None, monkeypatch: pytest.MonkeyPatch,
                                           value: str) -> None:
    native = build.flags()
    monkeypatch.setenv(build.ISA_ENV, value)
    assert build.flags() == native


def test_default_asks_for_the_compilers_baseline(avx512: None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(build.ISA_ENV, "default")
    assert not [f for f in build.flags() if f.startswith("-mavx")]
    assert build.name().startswith("treelm_loops_default_")


@pytest.mark.parametrize("value, says", [("avx512", "runs avx2 at most"),
                                         ("sse9", "one of auto, default, avx2, avx512")])
def test_refused_isa_says_why_and_the_python_path_runs(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str,
        says: str) -> None:
    """Above the CPU's set (an AVX-512 binary on an AVX2 CPU would die of an illegal
    instruction) or unknown: refused in one line, before anything is built."""
    monkeypatch.setattr(build, "_cpu_isa", lambda: "AVX2")
    monkeypatch.setenv(build.ISA_ENV, value)
    with pytest.raises(ValueError, match=says):
        build.flags()
    monkeypatch.setattr(build, "_tried", False)
    monkeypatch.setattr(build, "_module", None)
    monkeypatch.setattr(build, "_reason", None)
    monkeypatch.setattr(build, "compile_extension", lambda verbose=False: pytest.fail("built"))
    capsys.readouterr()
    assert build.load() is None
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and build.ISA_ENV in lines[0] and says in lines[0], lines
    assert says in (build.unavailable_reason() or "")


@pytest.mark.skipif(not X86, reason="an x86 CPU with AVX2 (PyTorch's capability AVX2/AVX512)")
def test_aten_cpu_capability_alone_gives_the_avx2_loops() -> None:
    """PyTorch's own variable lowers the capability the build reads: the loops follow it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ATEN_CPU_CAPABILITY": "avx2"}
    env.pop(build.ISA_ENV, None)
    code = "from treelm.kernels import build; print(build.name()); print(*build.flags())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    name, flags = r.stdout.split("\n")[:2]
    assert name.startswith("treelm_loops_avx2_") and "-mavx512" not in flags


@pytest.fixture(scope="module")
def cells() -> ModuleType:
    return load_benchmark("cells")


def test_cells_isa_from_python_needs_the_environment_first(
        cells: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Called from Python, where torch is loaded already, ``--isa`` cannot restart anything: it
    refuses unless the variables were set beforehand."""
    for k in cells.ISA_PROXIES["avx2"]:
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(SystemExit):
        cells.main(["--isa", "avx2", "--sizes", "cpu", "--models", "nn.LSTM",
                    "--out", os.devnull])


@pytest.mark.skipif(not X86, reason="an x86 CPU with AVX2 (PyTorch's capability AVX2/AVX512)")
def test_cells_isa_avx2_restarts_limited_and_records_the_proxy(tmp_path: Path) -> None:
    """``cells.py --isa avx2`` as a script: it starts itself again with the four variables set,
    PyTorch runs AVX2, oneDNN says AVX2, and the record says proxy where the CPU has AVX-512."""
    out = tmp_path / "cells.json"
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA",
                        build.ISA_ENV)}
    env.update(PYTHONPATH=str(ROOT), TREELM_CXX="0", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks/cells.py"), "--isa", "avx2",
                        "--sizes", "cpu", "--models", "nn.LSTM", "--repeats", "1", "--warmup",
                        "0", "--threads", "1", "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    record = json.loads(out.read_text())
    assert record["machine"]["torch_cpu_capability"] == "AVX2"
    assert record["isa"] == "avx2"
    for k, v in record["isa_env"].items():
        assert record["env"][k] == v
    assert set(record["isa_env"]) == {"ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS",
                                      "ONEDNN_MAX_CPU_ISA", build.ISA_ENV}
    if record["onednn_isa"] is not None:            # where this PyTorch has oneDNN
        assert "AVX2" in record["onednn_isa"] and "512" not in record["onednn_isa"]
    has_avx512 = "avx512f" in record["machine"]["cpu_simd"]
    assert record.get("proxy") == ("avx2" if has_avx512 else None)
    assert [e["model"] for e in record["results"]] == ["nn.LSTM"]
