"""``benchmarks/trees_long.py`` on a tiny finished run (the tiny config on a small corpus, NT-ASGD
switching to averaging, a tiny treebank): the run is copied once and continued with the larger
budget, the source only read; the record holds the curve, where averaging began, the baselines
and the finished run's checkpoints scored with the weights their validations scored; a rerun
trains nothing, a run stopped short continues to the same weights, a destination that is no
copy is refused; a fresh run from a config; the page from the tiny record, from synthetic ones
(levelled off, still rising, too short to tell) and without a record."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import ModuleType

import pytest
from test_train_extend import MRG  # the same three WSJ-style sentences
from test_trees_benchmark import TEST, _load  # the study's tiny test treebank and loader

from treelm.cli import main as treelm
from treelm.rundir.checkpoint import read_pointer
from treelm.rundir.files import AVERAGED, WEIGHTS, read_metrics

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "configs" / "tiny-lm.yaml"
PNG = b"\x89PNG\r\n\x1a\n"
SOURCE_TOKENS, TOKENS = 3000, 6000


@pytest.fixture(scope="module")
def long() -> ModuleType:
    return _load("trees_long")


class Tiny:
    """The paths of the tiny long run, its source and the commands it ran."""

    def __init__(self, root: Path) -> None:
        self.root = root
        lines = (ROOT / "tests" / "data" / "tiny.txt").read_text(encoding="utf-8").splitlines()
        self.data = root / "small.txt"      # epochs of ~1,500 tokens: NT-ASGD switches soon
        self.data.write_text("\n".join(lines[:80]) + "\n", encoding="utf-8")
        self.dev, self.test = root / "dev.mrg", root / "test.mrg"
        self.dev.write_text(MRG, encoding="utf-8")
        self.test.write_text(TEST, encoding="utf-8")
        self.source = root / "screen" / "paper-seed1"
        self.run_dir = root / "long" / "paper-seed1"
        self.out = root / "results" / "trees-long-tiny.json"
        self.commands: list[list[str]] = []

    def settings(self) -> list[str]:
        return [f"data.file={self.data}", "train.optimizer=ntasgd", "train.lr=60",
                "train.nonmono=1", "train.epochs=1000000", "train.lr_schedule=constant",
                "train.eval_every_units=500", "train.threads=1",
                f"train.eval_parse={{treebank: {self.dev}, layers: all, rules: [official, "
                f"split]}}"]

    def train_source(self) -> None:
        assert treelm(["train", "--config", str(CFG), "--out", str(self.source), "--quiet",
                       *self.settings(), f"train.max_units={SOURCE_TOKENS}"]) == 0

    def argv(self, *more: str) -> list[str]:
        return ["--from", str(self.source), "--tokens", str(TOKENS), "--runs",
                str(self.run_dir), "--out", str(self.out), "--test", str(self.test),
                "--baseline-seeds", "2", *more]

    def run(self, long: ModuleType, *more: str, runner=None) -> dict:
        real = runner or long.run_command
        mp = pytest.MonkeyPatch()
        mp.setattr(long, "run_command", lambda cmd: self.commands.append(cmd) or real(cmd))
        try:
            return long.main(self.argv(*more))
        finally:
            mp.undo()

    def record(self) -> dict:
        return json.loads(self.out.read_text(encoding="utf-8"))


def _snapshot(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, long) -> Tiny:
    t = Tiny(tmp_path_factory.mktemp("long"))
    t.train_source()
    t.before = _snapshot(t.source)          # type: ignore[attr-defined]
    t.run(long)
    return t


def test_the_source_is_copied_once_and_only_read(tiny):
    assert _snapshot(tiny.source) == tiny.before
    (cmd,) = tiny.commands
    assert cmd[3:] == ["train", "--resume", str(tiny.run_dir), f"train.max_units={TOKENS}",
                       "train.eval_every_units=500", "train.max_minutes=null"]
    # the copy's log begins with the source's (less its "done"), then goes on to the budget
    source = read_metrics(tiny.source)
    mine = read_metrics(tiny.run_dir)
    assert mine[:len(source) - 1] == source[:-1]
    assert len(read_metrics(tiny.run_dir, "done")) == 1
    assert read_metrics(tiny.run_dir, "done")[0]["tokens"] >= TOKENS


def test_record_holds_the_curve_averaging_and_baselines(tiny):
    rec = tiny.record()
    assert rec["status"] == "finished" and rec["tokens"] >= TOKENS
    assert rec["runs_dir"] == str(tiny.run_dir.resolve())
    assert rec["long"]["dev"] == str(tiny.dev) and rec["long"]["eval_every"] == 500
    valids = read_metrics(tiny.run_dir, "valid")
    assert [p["tokens"] for p in rec["curve"]] == [v["tokens"] for v in valids]
    assert all(p[f"{rule}/L{k}"] == v[f"parse_f1/{rule}/L{k}"] for p, v in zip(rec["curve"],
               valids) for rule in ("official", "split") for k in (1, 2))
    assert rec["source_tokens"] == read_metrics(tiny.source, "done")[0]["tokens"]
    (start,) = read_metrics(tiny.run_dir, "asgd_start")
    assert rec["asgd_start"]["tokens"] == start["tokens"]
    assert 0 < rec["baselines"]["dev"]["baselines"]["right_branching"] <= 1
    assert rec["summary"]["right_branching_dev"] == rec["baselines"]["dev"]["baselines"][
        "right_branching"]
    assert rec["command"].startswith("python benchmarks/trees_long.py --from ")


def test_final_checkpoints_are_scored_with_the_weights_validated(tiny):
    """``last``'s dev F1 is the final validation's, NT-ASGD's averaged weights; ``best`` is the
    lowest validation loss the loop weighed."""
    rec = tiny.record()
    final = rec["final"]
    last, best = final["checkpoints"]["last"], final["checkpoints"]["best"]
    end = rec["curve"][-1]
    assert last["averaged"] and last["tokens"] == end["tokens"]
    for rule in ("official", "split"):
        for k, f in last["scores"][rule]["dev"].items():
            assert f["sentence_f1"] == pytest.approx(end[f"{rule}/L{k}"], abs=1e-12)
        assert set(last["scores"][rule]) == {"dev", "test", "test_10"}
    done = read_metrics(tiny.run_dir, "done")[-1]
    assert best["valid_loss"] == done["best_valid_loss"]
    assert 0 < final["baselines"]["test"]["baselines"]["right_branching"] <= 1


def test_rerun_trains_nothing_and_another_destination_is_refused(tiny, long, tmp_path):
    first = tiny.record()
    tiny.commands.clear()
    tiny.run(long)
    assert tiny.commands == []
    assert tiny.record()["final"] == first["final"] and tiny.record()["curve"] == first["curve"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.yaml").write_text("seed: 2\n", encoding="utf-8")
    with pytest.raises(long.StudyError, match="is not a copy of"):
        long.main(["--from", str(tiny.source), "--tokens", str(TOKENS), "--runs", str(other),
                   "--out", str(tmp_path / "r.json")])
    with pytest.raises(long.StudyError, match="holds another long run"):
        long.main(tiny.argv("--eval-every-tokens", "300"))
    with pytest.raises(long.StudyError, match="--tokens must be more"):
        long.main(["--from", str(tiny.source), "--tokens", "1000", "--runs",
                   str(tmp_path / "new"), "--out", str(tmp_path / "r2.json")])
    with pytest.raises(long.StudyError, match="one of them"):
        long.main(["--tokens", "1000"])


def test_a_run_stopped_short_continues_to_the_same_weights(tiny, long, tmp_path):
    """A first training that stops short (as a killed one would) leaves a run that the same
    command continues; ``--no-train`` records it as it stands meanwhile."""
    t = Tiny(tmp_path)
    t.source, t.before = tiny.source, tiny.before       # type: ignore[attr-defined]

    real = long.run_command

    def short(cmd: list[str]) -> int:
        return real([c if not c.startswith("train.max_units=") else "train.max_units=4000"
                     for c in cmd])

    with pytest.raises(long.StudyError, match="short of 6,000"):
        t.run(long, runner=short)
    t.run(long, "--no-train")
    snap = t.record()
    assert snap["status"] == "stopped" and 4000 <= snap["tokens"] < TOKENS
    assert "final" not in snap and snap["summary"]["rules"]["official"]["layer"] in (1, 2)
    t.run(long)
    assert t.record()["status"] == "finished"
    for run in (t.run_dir, tiny.run_dir):
        assert (run / read_pointer(run)["last"] / AVERAGED).exists()
    last = {r: r / read_pointer(r)["last"] for r in (t.run_dir, tiny.run_dir)}
    for name in (WEIGHTS, AVERAGED):
        assert (last[t.run_dir] / name).read_bytes() == (last[tiny.run_dir] / name).read_bytes()


def test_a_fresh_run_from_a_config(tiny, long, tmp_path):
    commands: list[list[str]] = []
    real = long.run_command
    mp = pytest.MonkeyPatch()
    mp.setattr(long, "run_command", lambda cmd: commands.append(cmd) or real(cmd))
    run = tmp_path / "fresh"
    try:
        rec = long.main(["--config", str(CFG), "--seed", "2", "--tokens", "1500", "--runs",
                         str(run), "--dev", str(tiny.dev), "--test", str(tiny.test), "--out",
                         str(tmp_path / "fresh.json"), "--eval-every-tokens", "500",
                         "--baseline-seeds", "2", "--threads", "1", f"data.file={tiny.data}",
                         "train.batch_size=4", "train.bptt=12", "model.sizes=[16,20,16]"])
    finally:
        mp.undo()
    (cmd,) = commands
    assert "--config" in cmd and "seed=2" in cmd and "train.optimizer=ntasgd" in cmd
    assert "train.max_units=1500" in cmd and "train.batch_size=4" in cmd
    assert rec["status"] == "finished" and rec["source_tokens"] is None
    assert rec["config"]["train"]["lr"] == 30 and rec["final"]["checkpoints"]["best"]


def test_page_from_the_tiny_record(tiny, long, tmp_path):
    doc = tmp_path / "docs" / "trees-long.md"
    rec = tiny.record()
    text = long.render(tiny.out, rec, doc)
    assert doc.read_text(encoding="utf-8") == text
    assert (doc.parent / "img" / long.IMAGE).read_bytes()[:8] == PNG
    assert f"began averaging at {rec['asgd_start']['tokens']:,} tokens" in text
    assert "## The finished run's checkpoints on" in text
    assert f"copied to `{rec['run_dir']}`" in text


def _synthetic(rec: dict, rise: float, end: int = 20_000_000) -> dict:
    """A 20M-token curve: F1 rising to a plateau (``rise``: its slope per 1M tokens after
    12M), perplexity falling; averaging from 9M."""
    rec = copy.deepcopy(rec)
    points = []
    for i in range(1, end // 400_000 + 1):
        t = i * 400_000
        f1 = min(0.30 + 0.02 * t / 1e6, 0.54) + max(0.0, rise * (t - 12e6) / 1e6)
        points.append({"tokens": t, "minutes": t / 60_000, "ppl": 600 - 20 * t / 1e6,
                       **{f"{r}/L{k}": f1 - 0.05 * k for r in ("official", "split")
                          for k in (1, 2)}})
    rec["long"]["tokens"] = 20_000_000
    rec.update(curve=points, tokens=end, asgd_start={"tokens": 9_000_000, "epoch": 10,
                                                    "step": 1, "minutes": 150.0},
               summary=_load("trees_long").summarize(points, 0.4), status="training")
    rec.pop("final", None)
    return rec


def test_page_from_synthetic_records(tiny, long, tmp_path):
    rec = _synthetic(tiny.record(), 0.0)
    f = rec["summary"]["rules"]["official"]["layers"]["1"]
    assert rec["summary"]["rules"]["official"]["layer"] == 1
    assert f["at"] == {"tokens": 2_000_000, "value": pytest.approx(0.29)}
    assert f["best"] == {"tokens": 12_000_000, "value": pytest.approx(0.49)}
    # the last 5M at 49.0; the 5M before rise from 45.8 to 49.0 (12 validations): +0.7 points
    assert f["trend"] == "levelled off" and f["change"] == pytest.approx(0.49 - 5.8 / 12)
    assert f["within_tolerance_from"] == 14_800_000  # trailing 5M mean 48.1: within 1 point
    text = long.render(tiny.out, rec, tmp_path / "p.md")
    assert "29.0 at 2,000,000 tokens, peak 49.0 at 12,000,000 tokens" in text
    assert "**levelled off**" in text and "began averaging at 9,000,000 tokens" in text
    assert "snapshot of a run still training" in text
    rising = _synthetic(tiny.record(), 0.01)
    assert rising["summary"]["rules"]["official"]["layers"]["1"]["trend"] == "rising"
    assert "**rising**" in long.render(tiny.out, rising, tmp_path / "p.md")
    short = _synthetic(tiny.record(), 0.0, end=7_000_000)
    assert short["summary"]["rules"]["official"]["layers"]["1"]["trend"] is None
    assert "too early to say" in long.render(tiny.out, short, tmp_path / "p.md")


def test_page_without_a_record_says_how_to_make_one(long, tmp_path):
    text = long.render(None, None, tmp_path / "p.md")
    assert long.LAUNCH in text and "No `benchmarks/results/trees-long-*.json` record" in text


def test_committed_page_is_what_the_newest_record_renders(long, tmp_path):
    found = long.newest_record("trees-long-*.json")
    text = long.render(*(found or (None, None)), tmp_path / "trees-long.md", img=tmp_path)
    assert text == (ROOT / "docs" / "trees-long.md").read_text(encoding="utf-8")
