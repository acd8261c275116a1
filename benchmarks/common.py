"""What every benchmark records next to its figures: the machine, the command, the date; and where
it writes them (``benchmarks/results/<script>-<YYYYMMDD>.json``). Also what several of them time
alike: runs of a function (:func:`time_runs`) and a trainer's batches without end
(:func:`endless`)."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = RESULTS.parent.parent
#: environment variables every record keeps (``machine["env"]``): they change which kernels run
#: (the AVX2 proxy's ``ATEN_CPU_CAPABILITY``, ``MKL_ENABLE_INSTRUCTIONS``, ``ONEDNN_MAX_CPU_ISA``,
#: ``TREELM_CXX_ISA``), which GEMM treelm takes, or how threads wait
ENV_RECORDED = re.compile(r"(OMP_|GOMP_|KMP_|MKL_|ONEDNN_|DNNL_|TREELM_|ATEN_CPU_CAPABILITY$)")


def repo_path(path: Path) -> str:
    """``path`` as a record stores it: from the checkout's root when it lies there, so that a
    record (and the page rendered from it) reads the same in any clone; absolute otherwise."""
    full = path.resolve()
    try:
        return str(full.relative_to(ROOT))
    except ValueError:
        return str(full)


def _cpuinfo(field: str) -> str | None:
    """The first ``field`` line of /proc/cpuinfo (Linux), or ``None``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.split(":", 1)[0].strip() == field:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    return _cpuinfo("model name") or platform.processor() or "unknown"


def lscpu() -> dict[str, str]:
    """``lscpu``'s fields (name -> value), empty where it is missing."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10,
                              env={**os.environ, "LC_ALL": "C"}).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {k.strip(): v.strip() for k, _, v in
            (line.partition(":") for line in text.splitlines()) if v.strip()}


# The vector extensions that decide which GEMM kernels oneDNN and MKL can use (x86 flag names).
SIMD_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16",
              "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")


def cpu_info() -> dict[str, Any]:
    """Who made the CPU and which one it is: a hypervisor may show only "AMD EPYC" as its name,
    so the family/model/stepping numbers and the vector extensions are recorded too (the GEMM
    backends' speed depends on them)."""
    ls = lscpu()
    flags = set((ls.get("Flags") or _cpuinfo("flags") or "").split())
    info: dict[str, Any] = {
        "cpu_vendor": _cpuinfo("vendor_id") or ls.get("Vendor ID") or "unknown",
        "cpu_model": ls.get("Model name") or cpu_model(),
        "cpu_family_model_stepping": "/".join(
            ls.get(k, "?") for k in ("CPU family", "Model", "Stepping")),
        "cpu_simd": [f for f in SIMD_FLAGS if f in flags],
    }
    try:
        info["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):
        pass
    return info


#: ``--isa``: the environment that limits PyTorch, MKL, oneDNN and treelm's C++ loops to that
#: instruction set (read by each library when it loads: set before torch is imported)
ISA_PROXIES: dict[str, dict[str, str]] = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
             "ONEDNN_MAX_CPU_ISA": "AVX2", "TREELM_CXX_ISA": "avx2"},
}
#: instruction sets above each ``--isa`` choice: a CPU with one of them makes ``--isa`` a proxy
ISA_ABOVE = {"avx2": ("avx512f",)}


def machine_info() -> dict[str, Any]:
    info = {
        "platform": platform.platform(),
        "cpu": cpu_model(),
        **cpu_info(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }
    env = {k: v for k, v in sorted(os.environ.items()) if ENV_RECORDED.match(k)}
    if env:
        info["env"] = env
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def command_line() -> str:
    return " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv])


def today() -> str:
    return _dt.date.today().strftime("%Y%m%d")


def result_path(script: str) -> Path:
    return RESULTS / f"{script}-{today()}.json"


def write_result(script: str, data: dict[str, Any], merge_key: str | None = None,
                 path: Path | None = None, echo: bool = True,
                 folder: str = "benchmarks") -> dict[str, Any]:
    """Write ``data`` with machine and command to the dated results file (or ``path``), print it
    unless ``echo`` is false, and return the record written. ``folder``: where the script lives
    (``tools/``'s checks write their records here too).

    With ``merge_key``, entries of ``data[merge_key]`` (a dict) are merged into an existing file of
    the same day, so that configs measured by separate invocations end up in one record.
    """
    path = path or result_path(script)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"script": f"{folder}/{script}.py", "date": today(), "command": command_line(),
              "machine": machine_info(), **data}
    if merge_key and path.exists():
        old = json.loads(path.read_text())
        merged = dict(old.get(merge_key, {}))
        merged.update(record[merge_key])
        record[merge_key] = merged
        cmds = old.get("commands", [old.get("command")])
        record["commands"] = [c for c in cmds if c] + [record["command"]]
    text = json.dumps(record, indent=2, ensure_ascii=False)
    path.write_text(text + "\n", encoding="utf-8")
    if echo:
        print(text)
    return record


# ------------------------------------------------------------ the AVX2 proxy (``--isa``)

def isa_environment(ap: argparse.ArgumentParser, isa: str, from_python: bool) -> None:
    """Make sure this process runs with ``--isa``'s variables: start the script again with them
    set unless they already are (the libraries read them once, when torch loads them)."""
    wanted = ISA_PROXIES[isa]
    if all(os.environ.get(k) == v for k, v in wanted.items()):
        if torch.backends.cpu.get_cpu_capability().lower() != isa:
            ap.error(f"--isa {isa}: PyTorch runs {torch.backends.cpu.get_cpu_capability()} "
                     f"(a CPU without {isa}, or torch imported before the variables were set)")
        return
    if from_python:
        ap.error(f"--isa {isa}: set {' '.join(f'{k}={v}' for k, v in wanted.items())} before "
                 "Python imports torch, or run the script")
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **wanted})


def isa_record(isa: str | None) -> dict[str, Any]:
    """What the record says of ``--isa``: nothing without it; else the variables, the ISA
    oneDNN reports, and ``"proxy"`` where the CPU has an instruction set above it."""
    if isa is None:
        return {}
    has = set(cpu_info()["cpu_simd"])          # the CPU's flags, whatever is limited
    out: dict[str, Any] = {"isa": isa, "isa_env": dict(ISA_PROXIES[isa]),
                           "onednn_isa": onednn_isa()}
    if has & set(ISA_ABOVE[isa]):
        out["proxy"] = isa
    return out


def onednn_isa() -> str | None:
    """The instruction set oneDNN says it uses in a fresh process of this environment (its
    verbose header, ``isa:...``), or ``None`` where it says nothing."""
    code = ("import torch\n"
            "torch.ops.mkldnn._linear_pointwise(torch.ones(2, 8), torch.ones(4, 8), None, "
            "'none', [], '')\n")
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, env={**os.environ, "ONEDNN_VERBOSE": "1",
                                             "OMP_NUM_THREADS": "1"})
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"^onednn_verbose,.*,isa:(.*)$", r.stdout, re.M)
    return found.group(1).strip() if found else None


# ------------------------------------------------------------------------------ timing

def sync(device: torch.device | str) -> None:
    """Wait for the work queued on a GPU (the CPU runs it as it is called: nothing to wait for)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def time_runs(fn: Callable[[], object], warmup: int, repeats: int,
              device: torch.device | str = "cpu", events: bool = False) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn`` after ``warmup`` untimed ones: wall clock,
    a GPU synchronised before and after each call; with ``events`` on a GPU, each call between
    two CUDA events on the current stream (the device synchronised first, the warm-up's work
    done, and after each call, its end event reached)."""
    for _ in range(warmup):
        fn()
    on_events = events and torch.device(device).type == "cuda"
    if on_events:
        torch.cuda.synchronize(device)
    times = []
    for _ in range(repeats):
        if on_events:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            times.append(start.elapsed_time(end) / 1e3)     # ms -> s
            continue
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return times


def step_trainer(config: str, overrides: list[str], folder: str | Path) -> Any:
    """``config``'s ``Trainer`` (with ``overrides``) as the step benchmarks time it: quiet, its
    run directory in ``folder``, at a constant rate (a schedule changes the rate, not a step's
    cost). ``treelm`` is imported here, by whichever tree is first on the path."""
    from treelm.config import apply_overrides, load_config
    from treelm.rundir.files import RunFiles
    from treelm.train.trainer import Trainer

    cfg = apply_overrides(load_config(config), ["train.lr_schedule=constant", *overrides])
    return Trainer(cfg, RunFiles(Path(folder) / "run"), quiet=True)


def endless(tr: Any) -> Iterator[Any]:
    """A trainer's batches epoch after epoch (a GPU runs through a PTB epoch in seconds)."""
    while True:
        yield from tr.task.batches()
        tr.task.new_epoch()
