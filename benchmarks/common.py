"""What every benchmark records next to its figures: the machine, the command, the date; and where
it writes them (``benchmarks/results/<script>-<YYYYMMDD>.json``)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> dict[str, Any]:
    info = {
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }
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
                 path: Path | None = None, echo: bool = True) -> dict[str, Any]:
    """Write ``data`` with machine and command to the dated results file (or ``path``), print it
    unless ``echo`` is false, and return the record written.

    With ``merge_key``, entries of ``data[merge_key]`` (a dict) are merged into an existing file of
    the same day, so that configs measured by separate invocations end up in one record.
    """
    path = path or result_path(script)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"script": f"benchmarks/{script}.py", "date": today(), "command": command_line(),
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
