"""``train.eval_parse``: tree F1 logged at every validation of a tiny ON-LSTM run, equal to what
``treelm eval-parse`` gives on the checkpoint saved after it, read from the treebank once, without
touching the training itself; bad settings stop the run in one line before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import treelm.syntax.tracking as tracking
from treelm.cli import main
from treelm.rundir.files import read_metrics

ROOT = Path(__file__).resolve().parents[1]
CFG = str(ROOT / "configs" / "tiny-lm.yaml")
TINY = ROOT / "tests" / "data" / "tiny.txt"

# Five WSJ-style sentences, most of their words in tests/data/tiny.txt's vocabulary.
MRG = """\
( (S (NP-SBJ (DT The) (NN company) )
     (VP (VBD said) (SBAR (-NONE- 0) (S (NP-SBJ (PRP it) )
       (VP (MD would) (VP (VB sell) (NP (DT the) (NNS shares) )))))) (. .) ))
( (S (NP-SBJ (DT the) (NN market) ) (VP (VBD fell) (PP (IN in) (NP (JJ heavy) (NN trading) )))
     (. .) ))
( (S (NP-SBJ (NNS Shares) ) (VP (VBD rose) (NP (CD 3) (NN %) )) (. .) ))
( (NP (NN yesterday) (. .) ))
( (S (NP-SBJ (DT the) (JJ big) (NN company) ) (ADVP (RB also) )
     (VP (VBD said) (SBAR (IN that) (S (NP-SBJ (PRP it) ) (VP (MD would)
       (VP (VB buy) (NP (DT the) (JJ small) (NN bank) (NNS shares) )))))) (. .) ))
"""


@pytest.fixture(scope="module")
def mrg(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("treebank") / "mini.mrg"
    path.write_text(MRG, encoding="utf-8")
    return path


def _train(run: Path, *overrides: str) -> int:
    return main(["train", "--config", CFG, "--out", str(run), "--quiet", f"data.file={TINY}",
                 *overrides])


def _valid(run: Path) -> list[dict]:
    return read_metrics(run, "valid")


@pytest.fixture(scope="module")
def tracked(tmp_path_factory, mrg) -> tuple[Path, int]:
    """A 2-epoch run with tree F1 under both rules, and how often the treebank was read."""
    run = tmp_path_factory.mktemp("tracked") / "run"
    reads = []
    real = tracking.load_golds
    mp = pytest.MonkeyPatch()
    mp.setattr(tracking, "load_golds", lambda *a, **k: reads.append(a) or real(*a, **k))
    try:
        assert _train(run, "train.epochs=2", f"train.eval_parse={{treebank: {mrg}}}") == 0
    finally:
        mp.undo()
    return run, len(reads)


def test_every_validation_logs_f1_per_rule_and_layer(tracked):
    run, reads = tracked
    vals = _valid(run)
    assert len(vals) == 2 and reads == 1            # two evaluations, one reading
    keys = {k for k in vals[0] if k.startswith("parse_f1/")}
    assert keys == {f"parse_f1/{r}/L{k}" for r in ("official", "split") for k in (1, 2)}
    assert all(0.0 <= v[k] <= 1.0 for v in vals for k in keys)


def test_logged_f1_equals_eval_parse_on_the_same_checkpoint(tracked, mrg, capsys):
    run, _ = tracked
    last = _valid(run)[-1]      # the last validation; the checkpoint "last" is saved after it
    capsys.readouterr()
    for rule in ("official", "split"):
        assert main(["eval-parse", str(run), "--treebank", str(mrg), "--checkpoint", "last",
                     "--style", rule, "--no-baselines", "--format", "json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["n_sentences"] == 5
        for k, res in report["layers"].items():
            assert last[f"parse_f1/{rule}/L{k}"] == pytest.approx(res["sentence_f1"], abs=1e-12)


def test_tracking_changes_nothing_of_the_training(tracked, tmp_path):
    """Same losses with and without the trees: scoring them draws no random number and leaves
    the model as it was, so checkpoints are chosen on the same validation losses."""
    run, _ = tracked
    plain = tmp_path / "plain"
    assert _train(plain, "train.epochs=2") == 0
    assert [v["loss"] for v in _valid(plain)] == [v["loss"] for v in _valid(run)]
    assert not any(k.startswith("parse_f1/") for v in _valid(plain) for k in v)


def test_layers_rules_and_max_sentences(tmp_path, mrg):
    run = tmp_path / "r"
    assert _train(run, "train.epochs=1", f"train.eval_parse={{treebank: {mrg}, layers: [2], "
                  "rules: [split], max_sentences: 2}") == 0
    (val,) = _valid(run)
    assert [k for k in val if k.startswith("parse_f1/")] == ["parse_f1/split/L2"]


def _one_line_error(capsys, run: Path, *overrides: str) -> str:
    code = _train(run, "train.epochs=1", *overrides)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("treelm: error: "), err
    assert not run.exists()         # stopped before the run directory was made
    return err[0]


def test_bad_settings_stop_before_training(tmp_path, mrg, capsys, monkeypatch):
    run = tmp_path / "r"
    assert "unknown train.eval_parse options ['layer']" in _one_line_error(
        capsys, run, f"train.eval_parse={{treebank: {mrg}, layer: 2}}")
    assert "train.eval_parse.rules" in _one_line_error(
        capsys, run, f"train.eval_parse={{treebank: {mrg}, rules: [topdown]}}")
    assert "train.eval_parse.layers" in _one_line_error(
        capsys, run, f"train.eval_parse={{treebank: {mrg}, layers: two}}")
    assert "ON-LSTM layers are 1, 2" in _one_line_error(
        capsys, run, f"train.eval_parse={{treebank: {mrg}, layers: [3]}}")
    assert "no such file" in _one_line_error(
        capsys, run, f"train.eval_parse={{treebank: {tmp_path / 'missing.mrg'}}}")
    import nltk

    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    assert "NLTK_DATA" in _one_line_error(capsys, run, "train.eval_parse={treebank: nltk-dev}")


def test_a_relative_treebank_is_saved_absolute(tmp_path, mrg, monkeypatch):
    monkeypatch.chdir(mrg.parent)
    run = tmp_path / "r"
    assert _train(run, "train.epochs=1", "train.eval_parse={treebank: mini.mrg, rules: "
                  "[official]}") == 0
    saved = (run / "config.yaml").read_text(encoding="utf-8")
    assert f"treebank: {mrg}" in saved
    monkeypatch.chdir(tmp_path)        # a resume from elsewhere finds it
    assert main(["train", "--resume", str(run), "--quiet", "train.epochs=2"]) == 0
    assert len(_valid(run)) == 2 and "parse_f1/official/L1" in _valid(run)[-1]
