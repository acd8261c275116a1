"""``benchmarks/trees.py`` end to end on the tiny config and a tiny treebank (both gates, one seed,
a few seconds each): its record holds what ``eval-parse`` gives on each run's best checkpoint and
the baselines; a rerun skips finished runs and resumes a killed one; another study is refused.
``benchmarks/syntax_results.py`` renders the page from that record and from a synthetic one, and
the committed page is what the newest committed record renders."""

from __future__ import annotations

import copy
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from treelm.cli import main as treelm
from treelm.data.treebank import load_treebank
from treelm.rundir.files import RunFiles
from treelm.syntax.baselines import evaluate_baselines

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "data" / "tiny.txt"
PNG = b"\x89PNG\r\n\x1a\n"

TEST = """\
( (S (NP-SBJ (DT The) (NN company) )
     (VP (VBD said) (SBAR (-NONE- 0) (S (NP-SBJ (PRP it) )
       (VP (MD would) (VP (VB sell) (NP (DT the) (NNS shares) )))))) (. .) ))
( (S (NP-SBJ (DT the) (NN market) ) (VP (VBD fell) (PP (IN in) (NP (JJ heavy) (NN trading) )))
     (. .) ))
( (S (NP-SBJ (DT the) (JJ big) (NN company) ) (ADVP (RB also) )
     (VP (VBD said) (SBAR (IN that) (S (NP-SBJ (PRP it) ) (VP (MD would)
       (VP (VB buy) (NP (DT the) (JJ small) (NN bank) (NNS shares) )))))) (. .) ))
"""
DEV = """\
( (S (NP-SBJ (NNS Shares) ) (VP (VBD rose) (NP (CD 3) (NN %) )) (. .) ))
( (S (NP-SBJ (DT the) (NN company) ) (VP (VBD sold) (NP (DT the) (NN unit) )) (. .) ))
"""


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def trees() -> ModuleType:
    return _load("trees")


@pytest.fixture(scope="module")
def page() -> ModuleType:
    return _load("syntax_results")


class Study:
    """The tiny study's paths, its arguments and the training commands it ran."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dev, self.test = root / "dev.mrg", root / "test.mrg"
        self.dev.write_text(DEV, encoding="utf-8")
        self.test.write_text(TEST, encoding="utf-8")
        self.runs, self.out = root / "runs", root / "results" / "trees-tiny.json"
        self.commands: list[list[str]] = []

    def argv(self, minutes: float = 0.03) -> list[str]:
        return ["--minutes", str(minutes), "--seeds", "1", "--config",
                str(ROOT / "configs" / "tiny-lm.yaml"), "--dev", str(self.dev), "--test",
                str(self.test), "--runs", str(self.runs), "--out", str(self.out),
                "--baseline-seeds", "2", f"data.file={TINY}", "train.threads=1"]

    def run(self, trees: ModuleType, minutes: float = 0.03) -> dict:
        real = trees.run_command
        mp = pytest.MonkeyPatch()
        mp.setattr(trees, "run_command", lambda cmd: self.commands.append(cmd) or real(cmd))
        try:
            return trees.main(self.argv(minutes))
        finally:
            mp.undo()


@pytest.fixture(scope="module")
def study(tmp_path_factory, trees) -> Study:
    s = Study(tmp_path_factory.mktemp("trees"))
    s.run(trees)
    return s


def _record(study: Study) -> dict:
    return json.loads(study.out.read_text(encoding="utf-8"))


def test_record_holds_each_run_as_eval_parse_scores_it(study, capsys):
    rec = _record(study)
    assert sorted(rec["runs"]) == ["paper/1", "symmetric/1"]
    assert [c[c.index("--out") + 1] for c in study.commands] == [
        str(study.runs / "paper-seed1"), str(study.runs / "symmetric-seed1")]
    for key, r in rec["runs"].items():
        run = Path(r["run_dir"])
        gate = key.split("/")[0]
        assert f"master_input: {gate}" in RunFiles(run).config.read_text(encoding="utf-8")
        assert r["curve"] and all("official/L2" in p and "split/L1" in p for p in r["curve"])
        capsys.readouterr()
        for rule in ("official", "split"):
            for part, treebank, max_len in (("dev", study.dev, None), ("test", study.test, None),
                                            ("test_10", study.test, 10)):
                argv = ["eval-parse", str(run), "--treebank", str(treebank), "--style", rule,
                        "--no-baselines", "--format", "json",
                        *(["--max-len", "10"] if max_len else [])]
                assert treelm(argv) == 0
                report = json.loads(capsys.readouterr().out)
                assert {k: v["sentence_f1"] for k, v in report["layers"].items()} == {
                    k: v["sentence_f1"] for k, v in r["scores"][rule][part].items()}
    golds = load_treebank(study.test)
    direct = evaluate_baselines(golds, seeds=range(2), names=list(
        rec["baselines"]["test"]["baselines"]))
    for name, res in direct.items():
        assert rec["baselines"]["test"]["baselines"][name]["sentence_f1"] == res["sentence_f1"]
    assert rec["example"]["words"] == golds[2].words        # 13 words: nearest to 12


def test_summary_chooses_on_dev_and_reports_test(study, trees):
    rec = _record(study)
    s = rec["summary"]
    for gate, cfg in s["configs"].items():
        r = rec["runs"][f"{gate}/1"]
        for rule in ("official", "split"):
            dev = r["scores"][rule]["dev"]
            layer = max(sorted(dev, key=int), key=lambda k: dev[k]["sentence_f1"])
            entry = cfg["rules"][rule]
            assert entry["layer"] == int(layer)
            assert entry["test"]["runs"] == [r["scores"][rule]["test"][layer]["sentence_f1"]]
        assert cfg["valid_ppl"]["runs"] == [r["best_valid_ppl"]]
    best = s["best"]
    rb = rec["baselines"]["test"]["baselines"]["right_branching"]["sentence_f1"]
    assert best["right_branching_test"] == rb
    assert best["beats_right_branching"] == (best["test"]["mean"] > rb)
    rb_dev = rec["baselines"]["dev"]["baselines"]["right_branching"]["sentence_f1"]
    for key, crossings in s["crossings"].items():
        for curve_key, tokens in crossings.items():
            above = [p["tokens"] for p in rec["runs"][key]["curve"] if p[curve_key] > rb_dev]
            assert tokens == (above[0] if above else None)


def test_rerun_skips_finished_runs_and_resumes_a_killed_one(study, trees):
    """(Continues the module's study: the tests after this one see it resumed.)"""
    first = _record(study)
    study.commands.clear()
    study.run(trees)
    assert study.commands == [] and _record(study)["runs"] == first["runs"]
    # a kill before the end: the run's "done" line and its entry in the record are gone
    files = RunFiles(study.runs / "symmetric-seed1")
    lines = files.metrics.read_text(encoding="utf-8").splitlines(keepends=True)
    files.metrics.write_text("".join(ln for ln in lines if '"done"' not in ln), encoding="utf-8")
    rec = _record(study)
    del rec["runs"]["symmetric/1"]
    study.out.write_text(json.dumps(rec), encoding="utf-8")
    study.run(trees)
    assert len(study.commands) == 1 and study.commands[0][-2:] == [
        "--resume", str(study.runs / "symmetric-seed1")]
    again = _record(study)
    assert sorted(again["runs"]) == ["paper/1", "symmetric/1"]
    assert again["runs"]["paper/1"] == first["runs"]["paper/1"]
    assert len(again["commands"]) == 1                      # the same command, once
    with pytest.raises(trees.StudyError, match="minutes=0.03"):
        study.run(trees, minutes=0.5)                       # another budget: another study


def test_train_command_options(trees, tmp_path):
    args = trees.parse_args(["--minutes", "5", "--runs", str(tmp_path), "--eval-every", "2"])
    cmd = trees.train_command(args, tmp_path / "paper-seed2", "paper", 2)
    assert "seed=2" in cmd and "model.cell_options.master_input=paper" in cmd
    assert "train.max_minutes=5.0" in cmd and "train.eval_every_minutes=2.0" in cmd
    assert not any(c.startswith("train.precision") for c in cmd)
    assert any(c.startswith("train.eval_parse={treebank: nltk-dev") for c in cmd)
    args = trees.parse_args(["--minutes", "5", "--precision", "bf16"])
    assert "train.precision=bf16" in trees.train_command(args, tmp_path / "x", "symmetric", 1)


# ----------------------------------------------------------------------------- the page
def test_page_from_the_tiny_record(study, page, tmp_path):
    rec = _record(study)
    doc = tmp_path / "docs" / "syntax-results.md"
    text = page.render(study.out, rec, doc)
    assert doc.read_text(encoding="utf-8") == text
    images = [ln.split("](")[1].rstrip(")") for ln in text.splitlines() if ln.startswith("![")]
    assert images == ["img/syntax-results-f1.png", "img/syntax-results-tree-gold.png",
                      "img/syntax-results-tree-paper.png", "img/syntax-results-tree-symmetric.png"]
    for image in images:
        assert (doc.parent / image).read_bytes()[:8] == PNG
    best = rec["summary"]["best"]
    decided = best["test"]["n"] >= len(rec["seeds"])
    assert ("**not met**" if not best["beats_right_branching"] else
            "**met**" if decided else "**not decided yet**") in text
    for name, res in rec["baselines"]["test"]["baselines"].items():
        f1 = res["sentence_f1"]
        shown = (f"{100 * f1['mean']:.1f} ± {100 * f1['std']:.1f}" if isinstance(f1, dict)
                 else f"{100 * f1:.1f}")
        assert f"| {page.BASELINE_TITLES[name]} | | | | | {shown} |" in text
    paper = rec["summary"]["configs"]["paper"]["rules"]["official"]
    assert (f"| paper's master input gate | official | {paper['layer']} | 1 | "
            f"{paper_ppl(rec):.1f} | {100 * paper['test']['mean']:.1f} |") in text


def paper_ppl(rec: dict) -> float:
    return rec["runs"]["paper/1"]["best_valid_ppl"]


def _synthetic(study_record: dict) -> dict:
    """Three seeds per gate made from the tiny record's shape, with chosen figures."""
    rec = copy.deepcopy(study_record)
    runs = {}
    for gate, f1s in (("paper", (0.45, 0.47, 0.49)), ("symmetric", (0.40, 0.42, 0.44))):
        for seed, f1 in zip((1, 2, 3), f1s):
            r = copy.deepcopy(rec["runs"][f"{gate}/1"])
            r["seed"] = seed
            for rule in ("official", "split"):
                for part in ("dev", "test", "test_10"):
                    for k in r["scores"][rule][part]:
                        r["scores"][rule][part][k] = {"sentence_f1": f1 - 0.1 * (k != "2"),
                                                      "corpus_f1": f1 - 0.05}
            rise = 1.0 if seed > 1 else 0.8      # seed 1 stays below right-branching
            r["curve"] = [{"tokens": t, "minutes": t / 1e6, "ppl": 100.0,
                           **{k: rise * f1 * t / 3e6 for k in ("official/L1", "official/L2",
                                                               "split/L1", "split/L2")}}
                          for t in (1e6, 2e6, 3e6)]
            runs[f"{gate}/{seed}"] = r
    rec["runs"] = runs
    for part in ("dev", "test"):
        rec["baselines"][part]["baselines"]["right_branching"]["sentence_f1"] = 0.398
    return rec


def test_page_from_a_synthetic_record(study, trees, page, tmp_path):
    rec = _synthetic(_record(study))
    rec["summary"] = trees.summarize(rec["runs"], rec["baselines"])
    best = rec["summary"]["best"]
    assert best["gate"] == "paper" and best["layer"] == 2 and best["beats_right_branching"]
    text = page.render(tmp_path / "trees-synthetic.json", rec, tmp_path / "page.md")
    assert "gives **47.0 ± 2.0** sentence F1" in text and "is **met**" in text
    assert "| paper's master input gate | official | 2 | 3 |" in text
    assert "The target is met" in text
    # the crossings: F1 = f1 × tokens / 3M passes 0.398 at 3M tokens (seed 1: 0.8 × that, never)
    row = next(ln for ln in text.splitlines() if ln.startswith("| paper gate, seed 2 |"))
    assert row.endswith("| 3.00M | 3.00M | 3.00M | 3.00M |")
    row = next(ln for ln in text.splitlines() if ln.startswith("| paper gate, seed 1 |")
               and "dev" not in ln and "test" not in ln)
    assert row.endswith("| – | – | – | – |")
    # below right-branching: the page says so plainly
    for r in rec["runs"].values():
        for rule in ("official", "split"):
            for part in ("test",):
                for k in r["scores"][rule][part]:
                    r["scores"][rule][part][k]["sentence_f1"] -= 0.2
    rec["summary"] = trees.summarize(rec["runs"], rec["baselines"])
    text = page.render(tmp_path / "trees-synthetic.json", rec, tmp_path / "page.md")
    assert "is **not met**" in text and "The target is not met" in text


def test_committed_page_is_what_the_newest_record_renders(page, tmp_path):
    found = page.newest()
    if found is None:
        pytest.skip("no trees record committed yet (benchmarks/trees.py has not been run)")
    path, rec = found
    text = page.render(path, rec, tmp_path / "syntax-results.md")
    assert text == (ROOT / "docs" / "syntax-results.md").read_text(encoding="utf-8")


def test_no_train_snapshot_holds_the_unfinished_runs_curves(study, trees, tmp_path):
    """``--no-train`` trains nothing; a run without its "done" line is written as in progress,
    with the curve its metrics hold, and leaves the finished runs as they were."""
    first = _record(study)
    files = RunFiles(study.runs / "symmetric-seed1")
    saved = files.metrics.read_text(encoding="utf-8")
    try:
        files.metrics.write_text("".join(ln for ln in saved.splitlines(keepends=True)
                                         if '"done"' not in ln), encoding="utf-8")
        rec = copy.deepcopy(first)
        del rec["runs"]["symmetric/1"]
        study.out.write_text(json.dumps(rec), encoding="utf-8")
        study.commands.clear()
        mp = pytest.MonkeyPatch()
        mp.setattr(trees, "run_command", lambda cmd: study.commands.append(cmd) or 1)
        try:
            snap = trees.main([*study.argv(), "--no-train"])
        finally:
            mp.undo()
        assert study.commands == []
        assert sorted(snap["runs"]) == ["paper/1"] and sorted(snap["in_progress"]) == [
            "symmetric/1"]
        live = snap["in_progress"]["symmetric/1"]
        assert live["curve"] == first["runs"]["symmetric/1"]["curve"]
        assert live["tokens"] == live["curve"][-1]["tokens"]
        assert snap["summary"]["configs"].keys() == {"paper"}
    finally:
        files.metrics.write_text(saved, encoding="utf-8")
        study.out.write_text(json.dumps(first), encoding="utf-8")


def test_page_of_a_study_with_no_finished_run(study, page, tmp_path):
    rec = copy.deepcopy(_record(study))
    rec["in_progress"] = {k: {key: r[key] for key in ("gate", "seed", "run_dir", "curve")}
                          | {"tokens": r["curve"][-1]["tokens"],
                             "minutes": r["curve"][-1]["minutes"]}
                          for k, r in rec["runs"].items()}
    rec["runs"], rec["summary"] = {}, {**rec["summary"], "configs": {}, "crossings": {}}
    rec["summary"].pop("best", None)
    doc = tmp_path / "docs" / "page.md"
    text = page.render(tmp_path / "trees-live.json", rec, doc)
    assert "No run has finished yet: there is no test figure." in text
    assert "## Runs still training" in text and "The target is" not in text
    assert (doc.parent / "img" / "syntax-results-f1.png").read_bytes()[:8] == PNG
    last = rec["in_progress"]["paper/1"]["curve"][-1]
    row = next(ln for ln in text.splitlines() if ln.startswith("| paper gate, seed 1 |"))
    assert f"| {100 * last['official/L1']:.1f}" in row


def test_a_mean_over_fewer_seeds_than_the_study_does_not_meet_the_target():
    """A configuration above right-branching on 1 of its 3 seeds is undecided, not met."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from syntax_results import _met

    best = {"beats_right_branching": True, "test": {"n": 1}}
    assert _met({"seeds": [1, 2, 3]}, best).startswith("**not decided yet**")
    assert _met({"seeds": [1, 2, 3]}, {**best, "test": {"n": 3}}) == "**met**"
    assert _met({"seeds": [1, 2, 3]}, {**best, "beats_right_branching": False}) == "**not met**"


# ----------------------------------------------------------------------------- token budgets
OLD_STUDY = {"config": "configs/ptb-onlstm-cpu.yaml", "minutes": 600.0, "dev": "nltk-dev",
             "test": "nltk-test", "precision": None, "eval_every": 5.0,
             "overrides": ["train.max_units=8000000", "train.lr_schedule=linear_units"]}


def test_token_budget_flags(trees, tmp_path):
    """``--tokens`` and ``--eval-every-tokens`` set the unit keys and drop the minute ones (and
    ``--minutes``/``--eval-every`` the other way round); one kind of each at most."""
    args = trees.parse_args(["--tokens", "2000000", "--eval-every-tokens", "400000"])
    cmd = trees.train_command(args, tmp_path / "paper-seed1", "paper", 1)
    assert {"train.max_units=2000000", "train.max_minutes=null", "train.eval_every_units=400000",
            "train.eval_every_minutes=null"} <= set(cmd)
    assert not any(c.startswith("train.max_minutes=") and c != "train.max_minutes=null"
                   for c in cmd)
    args = trees.parse_args(["--minutes", "5", "--eval-every", "2"])
    cmd = trees.train_command(args, tmp_path / "paper-seed1", "paper", 1)
    assert {"train.max_minutes=5.0", "train.max_units=null", "train.eval_every_minutes=2.0",
            "train.eval_every_units=null"} <= set(cmd)
    # a user's override of a key the study sets replaces the study's (once on the command line)
    args = trees.parse_args(["--minutes", "600", "train.max_units=8000000"])
    cmd = trees.train_command(args, tmp_path / "x", "paper", 1)
    assert "train.max_units=8000000" in cmd and "train.max_units=null" not in cmd
    for argv, what in ((["--minutes", "5", "--tokens", "9"], "not both"),
                       (["--eval-every", "5", "--eval-every-tokens", "9"], "not both"),
                       (["--tokens", "0"], "--tokens must be > 0"),
                       (["--eval-every-tokens", "-1"], "--eval-every-tokens must be > 0"),
                       (["--screen", "--tokens", "9"], "--budget")):
        with pytest.raises(trees.StudyError, match=what):
            trees.parse_args(argv)


def test_without_a_flag_the_configs_budget_is_used(trees, tmp_path):
    cfg = (ROOT / "configs" / "tiny-lm.yaml").read_text(encoding="utf-8")
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(cfg.replace("train:\n", "train:\n  max_units: 700\n"
                                  "  eval_every_units: 300\n", 1), encoding="utf-8")
    args = trees.parse_args(["--config", str(tokens), f"data.file={TINY}"])
    cmd = trees.train_command(args, tmp_path / "paper-seed1", "paper", 1)
    assert not any(c.startswith(("train.max_", "train.eval_every_")) for c in cmd)
    assert trees.budget_of(args) == {"max_units": 700, "max_minutes": None,
                                     "eval_every_units": 300, "eval_every_minutes": None}
    args = trees.parse_args(["--config", str(tokens), "--minutes", "3", f"data.file={TINY}"])
    assert trees.budget_of(args)["max_units"] is None          # --minutes replaces it
    args = trees.parse_args(["--config", str(ROOT / "configs" / "tiny-lm.yaml"),
                             f"data.file={TINY}"])
    with pytest.raises(trees.StudyError, match="sets no budget.*give --tokens or --minutes"):
        trees.budget_of(args)
    assert trees.budget_of(trees.parse_args(["--config", str(ROOT / "configs" / "tiny-lm.yaml"),
                                             "--tokens", "50", f"data.file={TINY}"])) == {
        "max_units": 50, "max_minutes": None, "eval_every_units": None,
        "eval_every_minutes": None}


def test_a_record_from_before_token_budgets_still_loads(trees, tmp_path):
    """The Adam study's record has no ``tokens`` keys: its own command reruns into it."""
    path = tmp_path / "trees-old.json"
    path.write_text(json.dumps({"study": OLD_STUDY, "runs": {}}), encoding="utf-8")
    args = trees.parse_args(["--minutes", "600", "--eval-every", "5", "train.max_units=8000000",
                             "train.lr_schedule=linear_units"])
    assert trees.load_record(path, trees.study_settings(args))["study"] == OLD_STUDY
    args = trees.parse_args(["--tokens", "8000000", "train.lr_schedule=linear_units"])
    with pytest.raises(trees.StudyError, match="minutes=600.0"):
        trees.load_record(path, trees.study_settings(args))


def test_budget_line_of_old_and_new_records(page):
    assert page.budget(OLD_STUDY) == "8,000,000 training tokens per run, at most 600 min"
    new = {**OLD_STUDY, "minutes": None, "tokens": None, "overrides": [],
           "budget": {"max_units": 2000000, "max_minutes": None}}
    assert page.budget(new) == "2,000,000 training tokens per run"
    new["budget"] = {"max_units": None, "max_minutes": 60}
    assert page.budget(new) == "60 min per run"


def test_a_study_at_a_token_budget(trees, tmp_path):
    """End to end at ``--tokens``: the runs stop at the budget, validate on its multiples, and
    the record keeps the flags and the budget resolved."""
    s = Study(tmp_path)
    argv = s.argv()
    argv[argv.index("--minutes"):argv.index("--minutes") + 2] = [
        "--tokens", "600", "--eval-every-tokens", "200", "--gates", "paper"]
    rec = trees.main(argv)
    assert list(rec["runs"]) == ["paper/1"]
    study = rec["study"]
    assert (study["tokens"], study["eval_every_tokens"], study["minutes"]) == (600, 200, None)
    assert study["budget"] == {"max_units": 600, "max_minutes": None, "eval_every_units": 200,
                               "eval_every_minutes": None}
    import yaml
    cfg = yaml.safe_load(RunFiles(s.runs / "paper-seed1").config.read_text(encoding="utf-8"))
    assert cfg["train"]["max_units"] == 600 and "max_minutes" not in cfg["train"]
    assert rec["runs"]["paper/1"]["tokens"] >= 600
    assert [p["tokens"] // 200 for p in rec["runs"]["paper/1"]["curve"][:2]] == [1, 2]


# ----------------------------------------------------------------------------- adoption
PAPER_TINY = ["train.batch_size=4", "train.bptt=12", "model.sizes=[16,20,16]"]


def test_the_study_adopts_a_screen_run_with_its_config(trees, tmp_path, capsys):
    """A screen run of the paper's recipe is the study's paper gate, seed 1, when the study's
    config is the recipe's at the screen's budget: scored where it lies, not trained again;
    another budget, or a run not finished, is not adopted and is named with the reason."""
    s = Study(tmp_path)
    screen = tmp_path / "screen"
    shape = [f"data.file={TINY}", *PAPER_TINY]
    trees.main(["--screen", "--seeds", "1", "--recipes", "paper", "--budget", "600",
                "--eval-every-tokens", "200", "--config", str(ROOT / "configs" / "tiny-lm.yaml"),
                "--dev", str(s.dev), "--runs", str(screen), "--out", str(tmp_path / "sc.json"),
                "--baseline-seeds", "2", "--threads", "1", *shape])
    screen_mod = sys.modules["trees_screen"]
    # the tree config: the tiny config with the recipe's keys and the screen's budget; the
    # study's own threads (2) and checkpoint period differ, which adoption ignores
    recipe = [*screen_mod.RECIPES["paper"][1], "train.lr_schedule=constant", *shape,
              "train.threads=2", "train.save_every_minutes=1"]

    def study(runs: str, tokens: str = "600", adopt: Path = screen) -> dict:
        argv = ["--tokens", tokens, "--eval-every-tokens", "200", "--gates", "paper",
                "--seeds", "1", "--config", str(ROOT / "configs" / "tiny-lm.yaml"), "--dev",
                str(s.dev), "--test", str(s.test), "--runs", str(tmp_path / runs), "--out",
                str(tmp_path / f"{runs}.json"), "--baseline-seeds", "2", "--adopt", str(adopt),
                "--no-train", *recipe]
        return trees.main(argv)

    capsys.readouterr()
    rec = study("runs")
    entry = rec["runs"]["paper/1"]
    assert entry["adopted_from"] == entry["run_dir"] == str(screen / "paper-seed1")
    assert entry["adopted_threads"] == 1
    assert not (tmp_path / "runs" / "paper-seed1").exists()       # nothing copied or trained
    screened = json.loads((tmp_path / "sc.json").read_text(encoding="utf-8"))["runs"]
    assert entry["best_valid_ppl"] == screened["paper-seed1"]["best_valid_ppl"]
    assert entry["tokens"] == screened["paper-seed1"]["tokens"]
    assert "paper/1: adopted from" in capsys.readouterr().err

    # the look again before each training (a screen run finished meanwhile) says nothing
    args = trees.parse_args(["--tokens", "600", "--eval-every-tokens", "200", "--gates", "paper",
                             "--seeds", "1", "--dev", str(s.dev), "--adopt", str(screen),
                             "--config", str(ROOT / "configs" / "tiny-lm.yaml"), *recipe])
    assert trees.adoptable(args, [("paper", 1)], range(1, 2), quiet=True) == {
        "paper/1": screen / "paper-seed1"}
    args.overrides.append("model.dropout=0.1")
    assert trees.adoptable(args, [("paper", 1)], range(1, 2), quiet=True) == {}
    assert capsys.readouterr().err == ""

    rec = study("other", tokens="900")                        # another budget: not adopted
    assert rec["runs"] == {}
    err = capsys.readouterr().err.strip().splitlines()
    assert [ln for ln in err if ln.startswith("--adopt")] == [
        f"--adopt: {screen / 'paper-seed1'}: not adopted: train.max_units is 600 there, 900 "
        f"for the paper gate, seed 1"]

    unfinished = tmp_path / "unfinished"
    shutil.copytree(screen / "paper-seed1", unfinished / "paper-seed1")
    files = RunFiles(unfinished / "paper-seed1")
    lines = files.metrics.read_text(encoding="utf-8").splitlines(keepends=True)
    files.metrics.write_text("".join(ln for ln in lines if '"done"' not in ln), encoding="utf-8")
    rec = study("third", adopt=unfinished)
    assert rec["runs"] == {}
    assert "paper-seed1: not adopted: it has the config of the paper gate, seed 1, but has " \
           "not finished" in capsys.readouterr().err


def test_resolved_configs_fill_defaults_and_ignore_threads(trees):
    base = {"seed": 1, "data": {"source": "files", "file": str(TINY)},
            "model": {"type": "lm", "cell": "onlstm", "sizes": [16, 20, 16]},
            "train": {"optimizer": "adam", "lr": 0.002, "threads": 1}}
    same = {**base, "train": {"lr": 2e-3, "max_minutes": None, "threads": 4,
                              "save_every_minutes": 1}}
    assert trees.first_difference(trees.resolved(base), trees.resolved(same)) is None
    other = {**base, "model": {**base["model"], "dropout": 0.3}}
    assert trees.first_difference(trees.resolved(base), trees.resolved(other)) == "model.dropout"


def test_adopt_is_the_studys_option(trees):
    with pytest.raises(trees.StudyError, match="--adopt is an option of the study"):
        trees.parse_args(["--screen", "--adopt", "runs/trees-screen"])


# ----------------------------------------------------------------------------- control study
def _screen_record(runs_dir: Path, control: tuple[float, float, float],
                   paper: tuple[float, float, float]) -> dict:
    """A screen record's summary with the two recipes' (ppl, dev F1 mean, its std)."""
    def entry(ppl: float, f1: float, std: float, what: str) -> dict:
        return {"what": what, "seeds": [1, 2], "complete": True,
                "valid_ppl": {"mean": ppl, "std": 1.0, "n": 2, "runs": [ppl - 1, ppl + 1]},
                "official": {"layer": 2, "dev": {"mean": f1, "std": std, "n": 2,
                                                 "runs": [f1 - std, f1 + std]}}}
    return {"screen": {"budget": 2000000, "dev": "nltk-dev"}, "runs_dir": str(runs_dir),
            "summary": {"choice_rule": "the best dev F1", "chosen": "paper", "recipes": {
                "control": entry(*control, "the CPU config unchanged"),
                "paper": entry(*paper, "the paper's recipe")}}}


def test_page_keeps_the_perplexity_study_as_a_control(study, trees, page, tmp_path):
    """A newer study of another config: the perplexity config's study as a control row per gate,
    a paragraph whose figures are the records', and adopted runs marked with their note."""
    adam = _synthetic(_record(study))
    adam["study"] = {**adam["study"], "config": page.PERPLEXITY_CONFIG}
    for r in adam["runs"].values():
        r["best_valid_ppl"], r["minutes"], r["tokens"] = 96.0 + r["seed"], 100.0, 8e6
    adam["summary"] = trees.summarize(adam["runs"], adam["baselines"])
    tree = copy.deepcopy(adam)
    tree["study"] = {**tree["study"], "config": "configs/ptb-onlstm-trees.yaml",
                     "budget": {"max_units": 2000000, "max_minutes": None}}
    for r in tree["runs"].values():        # the same F1s, a higher perplexity
        r["best_valid_ppl"], r["minutes"], r["tokens"] = 230.0 + r["seed"], 30.0, 2e6
    for key in ("paper/1", "paper/2"):
        tree["runs"][key].update(adopted_from=str(tmp_path / "screen" / key.replace(
            "/", "-seed")), adopted_threads=1)
    tree["summary"] = trees.summarize(tree["runs"], tree["baselines"])
    results = tmp_path / "results"
    results.mkdir()
    (results / "trees-20261123.json").write_text(json.dumps(adam), encoding="utf-8")
    (results / "trees-screen-20261126.json").write_text(json.dumps(_screen_record(
        tmp_path / "screen", (153.0, 0.357, 0.154), (232.0, 0.459, 0.046))), encoding="utf-8")
    path = results / "trees-20261201.json"
    text = page.render(path, tree, tmp_path / "page.md", results=results)
    assert "## The perplexity config as a control" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| `configs/")]
    assert rows == [
        "| `configs/ptb-onlstm-trees.yaml` (this study) | paper's master input gate† | 3 | 2 | "
        "47.0 ± 2.0 | 2 | 47.0 ± 2.0 | 232.0 ± 1.0 | 2.00M | 30.0 ± 0.0 |",
        "| `configs/ptb-onlstm-trees.yaml` (this study) | symmetric master input gate | 3 | 2 | "
        "42.0 ± 2.0 | 2 | 42.0 ± 2.0 | 232.0 ± 1.0 | 2.00M | 30.0 ± 0.0 |",
        "| `configs/ptb-onlstm-cpu.yaml` (control) | paper's master input gate | 3 | 2 | "
        "47.0 ± 2.0 | 2 | 47.0 ± 2.0 | 98.0 ± 1.0 | 8.00M | 100.0 ± 0.0 |",
        "| `configs/ptb-onlstm-cpu.yaml` (control) | symmetric master input gate | 3 | 2 | "
        "42.0 ± 2.0 | 2 | 42.0 ± 2.0 | 98.0 ± 1.0 | 8.00M | 100.0 ± 0.0 |"]
    why = text.split("## Why the perplexity config and the tree config differ\n\n")[1]
    why = why.split("\n")[0]
    assert "validation perplexity 98.0 ± 1.0 after 8.00M training tokens, sentence F1 47.0 ± 2.0" \
        in why and "validation perplexity 232.0 ± 1.0 after 2.00M" in why
    assert "In test F1 the tree config does not differ from the perplexity config: +0.0 " \
           "points" in why
    assert "Its validation perplexity is higher (232.0 ± 1.0 against 98.0 ± 1.0)" in why
    assert ("(`control`: the CPU config unchanged) reaches validation perplexity 153.0 ± 1.0 "
            "and dev F1 35.7 ± 15.4 (layer 2, 2 seeds)") in why
    assert "reaches validation perplexity 232.0 ± 1.0 and dev F1 45.9 ± 4.6" in why
    assert ("the paper's recipe has the higher validation perplexity; its dev F1 does not "
            "differ beyond the spread of the seeds") in why
    assert "2,000,000 training tokens per run" in why and "`paper`." in why
    note = next(ln for ln in text.splitlines() if ln.startswith("† Adopted runs"))
    assert "(2 of 6: paper gate, seed 1; paper gate, seed 2)" in note
    assert "the tree screen's runs, `" in note and "measured with 1 thread each" in note
    assert any(ln.startswith("| paper gate, seed 1† |") for ln in text.splitlines())
    assert not any(ln.startswith("| symmetric gate, seed 1† |") for ln in text.splitlines())

    # F1 apart beyond the seeds' spread: the paragraph says which is higher
    for r in tree["runs"].values():
        for rule in ("official", "split"):
            for k in r["scores"][rule]["test"]:
                r["scores"][rule]["test"][k]["sentence_f1"] += 0.1
    tree["summary"] = trees.summarize(tree["runs"], tree["baselines"])
    text = page.render(path, tree, tmp_path / "page.md", results=results)
    assert "In test F1 the tree config is higher by 10.0 points, beyond the spread" in text

    # the perplexity study itself as the newest: no control of itself
    text = page.render(results / "trees-20261123.json", adam, tmp_path / "page.md",
                       results=results)
    assert "as a control" not in text and "## Why" not in text and "†" not in text


def test_committed_tree_records_name_their_runs_from_the_checkout_root():
    """A record naming ``/work/main/runs/...`` renders another page in a clone elsewhere (CI's
    checkout): a path inside the checkout is stored from its root (runs elsewhere keep
    their absolute path)."""
    for path in sorted((ROOT / "benchmarks" / "results").glob("trees*.json")):
        rec = json.loads(path.read_text(encoding="utf-8"))
        named = [rec.get("runs_dir"), (rec.get("long") or {}).get("source"),
                 *(r.get("adopted_from") for r in (rec.get("runs") or {}).values()
                   if isinstance(r, dict))]
        for p in filter(None, named):
            assert not Path(p).is_relative_to(ROOT), f"{path.name} names {p}"


def test_seeds_line_names_each_seed_below_right_branching(page: ModuleType) -> None:
    """Hand-made record: seed 2 is below right-branching at the chosen layer 2; its own dev
    scores prefer layer 3, whose test figure the line gives; minutes only of trained runs."""
    def run(seed: int, dev: list[float], test: list[float], **extra: object) -> dict:
        f1 = lambda xs: {str(i + 1): {"sentence_f1": x} for i, x in enumerate(xs)}  # noqa: E731
        return {"gate": "paper", "seed": seed, "minutes": 9.0 + seed,
                "scores": {"official": {"dev": f1(dev), "test": f1(test)}}, **extra}
    rec = {"runs": {"paper/1": run(1, [.2, .5, .3], [.2, .49, .3], adopted_from="runs/x"),
                    "paper/2": run(2, [.2, .35, .45], [.2, .38, .44])}}
    (text, blank) = page.seeds_line(rec, "paper", 2, 0.399)
    assert blank == ""
    assert "Seed by seed at layer 2 (official rule): 49.0, 38.0; 1 of 2 above" in text
    assert "Below it: seed 2 (38.0); that run's own dev scores choose layer 3 (45.0 on dev), " \
           "44.0 on test." in text
    assert text.endswith("(not adopted): 11.0–11.0.")
