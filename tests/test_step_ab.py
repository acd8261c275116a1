"""benchmarks/step_ab.py: rounds alternate the trees' order, the verdict is the median of the
rounds' ratios, and a path that is not a checkout is refused (the runs themselves are timings,
never run here)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


def _module():
    return load_benchmark("step_ab")


def test_rounds_alternate_and_the_median_ratio_decides(tmp_path, monkeypatch) -> None:
    mod = _module()
    old, new = tmp_path / "old", tmp_path / "new"
    for tree in (old, new):
        (tree / "treelm").mkdir(parents=True)
        (tree / "treelm" / "__init__.py").write_text("")
    rates = {old: iter([100.0, 100.0, 100.0]), new: iter([110.0, 90.0, 120.0])}
    calls = []

    def fake(tree, args):
        calls.append(tree)
        return {"tokens_per_s": next(rates[tree]), "page_faults_per_step": 1}

    monkeypatch.setattr(mod, "run_tree", fake)
    out = tmp_path / "ab.json"
    monkeypatch.setattr(sys, "argv", ["step_ab.py", "--old", str(old), "--new", str(new),
                                      "--rounds", "3", "--out", str(out), "train.bptt=35"])
    mod.main()
    assert calls == [old, new, new, old, old, new]
    rec = json.loads(out.read_text())
    assert [r["new_over_old"] for r in rec["rounds"]] == [1.1, 0.9, 1.2]
    assert rec["median_new_over_old"] == 1.1 and rec["rounds_new_faster"] == 2
    assert rec["overrides"] == ["train.bptt=35"]


def test_a_path_that_is_not_a_checkout_is_refused(tmp_path, monkeypatch, capsys) -> None:
    mod = _module()
    monkeypatch.setattr(sys, "argv", ["step_ab.py", "--old", str(tmp_path)])
    with pytest.raises(SystemExit):
        mod.main()
    assert "not a treelm checkout" in capsys.readouterr().err


def test_each_run_names_its_gemm_choices(monkeypatch) -> None:
    """A run's record names the backend of each product it made (``gemm_chosen``): a time
    loop's marked, a transposed weight's marked, lengths that chose apart joined by ``/``."""
    from treelm.kernels import gemm

    rows = [{"product": "(20x400)·(400x1680)", "transpose": False, "steps": 70,
             "backend": "panel"},
            {"product": "(20x400)·(400x1680)", "transpose": False, "steps": 35,
             "backend": "onednn"},
            {"product": "(2048x512)·(512x400)", "transpose": True, "steps": 1, "backend": "mm"}]
    monkeypatch.setattr(gemm, "decisions", lambda: rows)
    assert _module().gemm_chosen() == {"(20x400)·(400x1680) loop": "onednn/panel",
                                       "(2048x512)·(512x400)ᵀ": "mm"}


def test_validation_mode_times_both_parts(tmp_path, monkeypatch) -> None:
    """``--validations``: the valid split's score and the dev trees' levels timed apart, the
    rate over the valid tokens and the trees' words."""
    monkeypatch.chdir(ROOT)
    (tmp_path / "dev.mrg").write_text("(S (NP (DT the) (NN cat)) (VP (VBD sat)))\n"
                                      "(S (NP (PRP it)) (VP (VBD ran)))\n")
    run = _module().validation_run(
        "configs/tiny-lm.yaml", [f"train.eval_parse.treebank={tmp_path / 'dev.mrg'}"], 1, 2)
    assert run["dev_tree_words"] == 5
    assert run["ppl_seconds"] > 0 and run["trees_seconds"] > 0 and run["tokens_per_s"] > 0
    assert run["precision"] in ("fp32", "bf16") and isinstance(run["gemm"], dict)
