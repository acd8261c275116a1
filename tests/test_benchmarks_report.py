"""``benchmarks/report.py``: the committed ``docs/benchmarks.md`` is what it renders from the
committed records, and a GPU record of ``benchmarks/cells.py --device cuda`` (a synthetic one,
made here, never committed) gets its own table after the CPU ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def report() -> ModuleType:
    return load_benchmark("report")


def _gpu_record() -> dict:
    def mode(tok_s: float) -> dict:
        return {"tokens_per_s": tok_s, "ms_median": 1400 / tok_s * 1e3, "ms_runs": []}

    return {
        "command": "python benchmarks/cells.py --device cuda --sizes paper",
        "date": "2099-01-02T03:04:05", "device": "cuda", "gpu": "Example GPU 80GB",
        "machine": {"cpu": "Example CPU", "torch": "2.99.0", "torch_threads": 2,
                    "gpu": "Example GPU 80GB"},
        "gemm": {"requested": "auto", "available": ["mm"], "used": {}},
        "threads": 2, "warmup": 2, "repeats": 5,
        "sizes": {"paper": {"batch": 20, "bptt": 70, "input": 400, "hidden": 1150,
                            "chunk": 10}},
        "results": [{"size": "paper", "model": "nn.LSTM", "train": mode(254545.0),
                     "inference": mode(700000.0)},
                    {"size": "paper", "model": "onlstm.fused", "train": mode(34739.0),
                     "inference": mode(90000.0)}],
        "ratios": {"paper.train": {"fused_over_nn_lstm": 0.1365}},
    }


def test_committed_page_is_what_the_records_render(report: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.md"
    report.main(doc=out)
    assert out.read_text(encoding="utf-8") == (ROOT / "docs/benchmarks.md").read_text(
        encoding="utf-8")


def test_gpu_record_gets_a_table_after_the_cpu_ones(report: ModuleType, tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(ROOT / "benchmarks/results", results)
    for gpu_record in results.glob("cells-gpu-*.json"):     # the committed ones: CPU only here
        gpu_record.unlink()
    cpu_only = tmp_path / "cpu.md"
    report.main(results=results, doc=cpu_only)
    (results / "cells-gpu-20990102.json").write_text(json.dumps(_gpu_record()))
    both = tmp_path / "both.md"
    report.main(results=results, doc=both)
    text = both.read_text(encoding="utf-8")
    heads = [ln for ln in text.splitlines() if ln.startswith("## ")]
    gpu = [i for i, h in enumerate(heads) if "on the GPU" in h]
    cpu = [i for i, h in enumerate(heads) if h.startswith("## Cell throughput (")]
    assert len(gpu) == 1 and cpu and max(cpu) < gpu[0]
    assert "Example GPU 80GB, 2099-01-02" in heads[gpu[0]]
    assert "| onlstm.fused | 34,739 | 90,000 |" in text
    assert "fused over nn lstm **0.14×**" in text
    # the page up to the GPU table is the page without it up to what follows the cell tables
    before_gpu = text.split(heads[gpu[0]])[0]
    assert before_gpu == cpu_only.read_text(encoding="utf-8").split("## Language models")[0]
