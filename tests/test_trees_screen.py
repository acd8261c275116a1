"""The tree screen (``benchmarks/trees.py --screen``) on the tiny config and a tiny treebank: the
runs it trains carry each recipe's keys, validations fall on token multiples, the record holds
each run's figures at its ``best`` checkpoint as the metrics log has them, the choice is made on
dev alone, a run another worker holds is skipped, a rerun trains nothing, and workers adding to
one record at once lose nothing. Also ``train.eval_every_units`` itself."""

from __future__ import annotations

import json
import multiprocessing
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from test_trees_benchmark import DEV, _load  # the study's tiny dev treebank and loader

from treelm.cli import main as treelm
from treelm.rundir.files import RunFiles, read_metrics
from treelm.rundir.lock import RunLock

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "data" / "tiny.txt"


@pytest.fixture(scope="module")
def trees() -> ModuleType:
    return _load("trees")


@pytest.fixture(scope="module")
def screen_mod(trees) -> ModuleType:
    return sys.modules["trees_screen"]


def _argv(root: Path, recipes: list[str]) -> list[str]:
    # the tiny corpus cannot hold the paper's batch 20 × BPTT 70: the shapes are overridden for
    # every recipe (the overrides come last), the recipes' other keys stay theirs
    return ["--screen", "--seeds", "1", "--recipes", *recipes, "--budget", "900",
            "--eval-every-tokens", "300", "--config", str(ROOT / "configs" / "tiny-lm.yaml"),
            "--dev", str(root / "dev.mrg"), "--runs", str(root / "runs"),
            "--out", str(root / "screen.json"), "--baseline-seeds", "2", "--threads", "1",
            f"data.file={TINY}", "train.batch_size=4", "train.bptt=12",
            "model.sizes=[16,20,16]"]


class Screen:
    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "dev.mrg").write_text(DEV, encoding="utf-8")
        self.out = root / "screen.json"
        self.commands: list[list[str]] = []

    def run(self, trees: ModuleType, screen_mod: ModuleType, recipes: list[str]) -> dict:
        real = screen_mod.run_command
        mp = pytest.MonkeyPatch()
        mp.setattr(screen_mod, "run_command",
                   lambda cmd: self.commands.append(cmd) or real(cmd))
        try:
            return trees.main(_argv(self.root, recipes))
        finally:
            mp.undo()

    def record(self) -> dict:
        return json.loads(self.out.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def screen(tmp_path_factory, trees, screen_mod) -> Screen:
    s = Screen(tmp_path_factory.mktemp("screen"))
    s.run(trees, screen_mod, ["paper", "adam", "control"])
    return s


def test_runs_carry_their_recipes_keys(screen):
    rec = screen.record()
    assert sorted(rec["runs"]) == ["adam-seed1", "control-seed1", "paper-seed1"]
    cfgs = {k: yaml.safe_load(RunFiles(Path(r["run_dir"])).config.read_text(encoding="utf-8"))
            for k, r in rec["runs"].items()}
    assert cfgs["paper-seed1"]["train"]["optimizer"] == "ntasgd"
    assert cfgs["paper-seed1"]["train"]["lr"] == 30
    assert cfgs["paper-seed1"]["model"]["wdrop"] == 0.45
    assert cfgs["adam-seed1"]["train"]["optimizer"] == "adam"
    assert cfgs["adam-seed1"]["model"]["wdrop"] == 0.45        # the paper's, but for Adam
    assert cfgs["control-seed1"]["model"]["wdrop"] == 0.2       # the tiny config's own
    for c in cfgs.values():
        assert c["train"]["max_units"] == 900 and c["train"]["eval_every_units"] == 300
        assert c["train"]["lr_schedule"] == "constant" and c["seed"] == 1


def test_validations_on_token_multiples_and_figures_of_the_best_checkpoint(screen):
    rec = screen.record()
    for r in rec["runs"].values():
        run = Path(r["run_dir"])
        valids = read_metrics(run, "valid")
        *periodic, final = valids
        assert final.get("budget_end") and final["tokens"] >= 900
        # one validation after each multiple of 300 is crossed, before the budget's end
        assert [v["tokens"] // 300 for v in periodic] == list(range(1, len(periodic) + 1))
        assert all(v["tokens"] < 900 for v in periodic)
        done = read_metrics(run, "done")[-1]
        best = [v for v in valids if v["ppl"] == done["best_valid_ppl"]]
        assert best and r["best_tokens"] == best[0]["tokens"]
        for rule in ("official", "split"):
            assert r["dev"][rule] == {k.split("/L")[1]: v for k, v in best[0].items()
                                      if k.startswith(f"parse_f1/{rule}/L")}


def test_summary_chooses_on_dev(screen):
    rec = screen.record()
    s = rec["summary"]
    assert s["right_branching_dev"] == rec["baselines"]["baselines"]["right_branching"]
    for name, entry in s["recipes"].items():
        r = rec["runs"][f"{name}-seed1"]
        for rule in ("official", "split"):
            dev = r["dev"][rule]
            layer = max(sorted(dev, key=int), key=lambda k: dev[k])
            assert entry[rule]["layer"] == int(layer)
            assert entry[rule]["dev"]["runs"] == [dev[layer]]
    means = {n: e["official"]["dev"]["mean"] for n, e in s["recipes"].items()}
    assert s["chosen"] == max(means, key=lambda n: (means[n], -list(means).index(n)))
    assert s["ranking_official"][0] == s["chosen"]
    assert "test" not in json.dumps(rec["baselines"])        # the test treebank is never read


def test_rerun_trains_nothing_and_held_runs_are_skipped(screen, trees, screen_mod):
    first = screen.record()
    screen.commands.clear()
    screen.run(trees, screen_mod, ["paper", "adam", "control"])
    assert screen.commands == [] and screen.record()["runs"] == first["runs"]
    # another worker holds bptt35's claim: this worker leaves it alone
    runs = screen.root / "runs"
    with RunLock(runs / "bptt35-seed1.claim"):
        screen.run(trees, screen_mod, ["paper", "adam", "control", "bptt35"])
    assert screen.commands == [] and "bptt35-seed1" not in screen.record()["runs"]
    argv = _argv(screen.root, ["paper"])
    argv[argv.index("--budget") + 1] = "600"
    with pytest.raises(screen_mod.ScreenError, match="budget"):   # another screen: refused
        trees.main(argv)


def _adder(out: str, key: str, n: int) -> None:
    mod = _load("trees_screen")
    import argparse
    args = argparse.Namespace(dev="x", baseline_seeds=1, command="test", runs=Path(out).parent,
                              seeds=1)
    screen = {"config": "c", "budget": 1, "eval_every": 1, "dev": "x", "precision": None,
              "overrides": [], "recipes": {"paper": []}}
    mod.dev_baselines = lambda dev, seeds: {"baselines": {"right_branching": 0.5}}
    for i in range(n):
        entry = {"recipe": "paper", "seed": 1, "best_valid_ppl": 1.0,
                 "dev": {"official": {"1": 0.1}, "split": {"1": 0.1}}}
        mod.add_to_record(Path(out), screen, f"{key}-{i}", entry, args)


def test_workers_adding_at_once_lose_nothing(tmp_path):
    out = tmp_path / "rec.json"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_adder, args=(str(out), k, 15)) for k in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    runs = json.loads(out.read_text(encoding="utf-8"))["runs"]
    assert sorted(runs) == sorted(f"{k}-{i}" for k in "ab" for i in range(15))


def test_eval_every_units_validates_on_multiples(tmp_path):
    run = tmp_path / "r"
    assert treelm(["train", "--config", str(ROOT / "configs" / "tiny-lm.yaml"), "--out",
                   str(run), f"data.file={TINY}", "train.max_units=1000",
                   "train.eval_every_units=250", "train.epochs=100", "--quiet"]) == 0
    valids = read_metrics(run, "valid")
    periodic = [v for v in valids if not v.get("epoch_end") and not v.get("budget_end")]
    assert [v["tokens"] // 250 for v in periodic] == [1, 2, 3]
    # the batch that crosses 1000 ends the budget: one final validation, not two
    assert valids[-1].get("budget_end") and sum(v["tokens"] >= 1000 for v in valids) == 1


def test_page_from_the_tiny_record(screen, tmp_path):
    page = _load("screen_results")
    rec = screen.record()
    doc = tmp_path / "docs" / "trees-screen.md"
    text = page.render(screen.out, rec, doc)
    assert doc.read_text(encoding="utf-8") == text
    assert (doc.parent / "img" / page.IMAGE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    s = rec["summary"]
    rows = [ln for ln in text.splitlines() if ln.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == s["ranking_official"]
    for row in rows:
        e = s["recipes"][row.split("`")[1]]
        assert f"L{e['official']['layer']}: {page.pm(e['official']['dev'])}" in row
    assert f"**Chosen: `{s['chosen']}`**" in text
    # a screen with no recipe complete chooses nothing, and says so
    rec["summary"]["chosen"] = None
    assert "No recipe chosen yet" in page.render(screen.out, rec, doc)


def test_a_run_another_process_trains_is_left_alone(screen, trees, screen_mod):
    """A run whose writer lock is held (a training started by hand, or by a worker on another
    machine) is neither retrained nor resumed."""
    runs = screen.root / "runs"
    run = runs / "bptt35-seed1"
    run.mkdir(parents=True, exist_ok=True)
    screen.commands.clear()
    with RunLock(RunFiles(run).lock):
        screen.run(trees, screen_mod, ["paper", "adam", "control", "bptt35"])
    assert screen.commands == [] and "bptt35-seed1" not in screen.record()["runs"]


def test_a_training_dies_with_the_worker_that_started_it(tmp_path):
    """SIGKILL the worker: its child training gets SIGTERM (and saves and stops), so no orphan
    keeps the run's lock."""
    import os
    import signal
    import subprocess
    import time

    pid_file = tmp_path / "child.pid"
    child = (f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
             f"time.sleep(120)")
    parent = (f"import sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); "
              f"import tree_runs; tree_runs.run_command([sys.executable, '-c', {child!r}])")
    worker = subprocess.Popen([sys.executable, "-c", parent])
    try:
        for _ in range(200):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            raise AssertionError("the child outlived its worker")
    finally:
        worker.kill()
