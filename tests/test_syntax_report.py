"""Tests for treelm.syntax.report: the eval-parse report as a library call, and its table."""

import json

import pytest

import treelm.syntax.baselines as baselines_module
from treelm.cli import main
from treelm.data.treebank import load_treebank
from treelm.errors import TreelmError
from treelm.syntax.baselines import DEFAULT_BASELINES, evaluate_baselines
from treelm.syntax.report import format_table, load_golds, parsing_report

MRG = """\
( (S (NP-SBJ (DT The) (NN company) ) (VP (VBD said) (SBAR (S (NP-SBJ (PRP it) )
     (VP (MD would) (VP (VB sell) (NP (DT the) (NNS shares) )))))) (. .) ))
( (S (NP-SBJ (DT the) (NN market) ) (VP (VBD fell) (PP (IN in) (NP (JJ heavy) (NN trading) )))
     (. .) ))
( (S (NP-SBJ (NNS Shares) ) (VP (VBD rose) (NP (CD 3) (NN %) )) (. .) ))
"""


@pytest.fixture
def mrg(tmp_path):
    path = tmp_path / "mini.mrg"
    path.write_text(MRG, encoding="utf-8")
    return path


def test_report_is_what_eval_parse_prints(mrg, capsys):
    names = [*DEFAULT_BASELINES, "random_levels_official"]   # all: with the rule control
    report = parsing_report(str(mrg), seeds=range(3), baselines=names)
    assert main(["eval-parse", "--baseline", "all", "--treebank", str(mrg), "--format", "json",
                 "--seeds", "3"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(report))
    assert main(["eval-parse", "--baseline", "all", "--treebank", str(mrg), "--seeds", "3"]) == 0
    assert capsys.readouterr().out == format_table(report) + "\n"
    golds = load_treebank(mrg)
    assert report["baselines"] == evaluate_baselines(golds, seeds=range(3), names=names)
    assert "random levels, official rule (3 seeds)" in format_table(report)
    assert report["run"] is None and report["layers"] == {} and report["best_layer"] is None
    assert report["n_sentences"] == 3 and report["n_words"] == sum(len(g.words) for g in golds)
    assert report["gold"]["label_counts"]["NP"] == 5   # one-word NPs do not count


def test_random_trees_are_drawn_once_per_seed_and_sentence(mrg, monkeypatch):
    calls = []
    real = baselines_module.random_tree

    def counting(words, rng):
        calls.append(len(words))
        return real(words, rng)

    monkeypatch.setattr(baselines_module, "random_tree", counting)
    report = parsing_report(str(mrg), baselines=["random"], seeds=range(4))
    assert len(calls) == 4 * report["n_sentences"]
    assert list(report["baselines"]) == ["random"]
    assert {"label_recall", "mean_depth_pred", "mean_leaf_depth_pred"} <= set(
        report["baselines"]["random"])


def test_format_table_rows_and_labels(mrg):
    report = parsing_report(str(mrg), max_len=7, baselines=["balanced", "right_branching"])
    table = format_table(report, ["NP", "QP"]).splitlines()
    assert table[0] == f"Unsupervised constituency parsing: {mrg}, 2 sentences of <= 7 words"
    header = table[2].split()
    assert header == ["sent", "F1", "corpus", "F1", "depth", "height", "NP"]  # no QP in gold
    assert [r.split("  ")[0] for r in table[4:7]] == ["balanced trees", "right branching",
                                                      "gold trees"]


def test_load_golds_errors(tmp_path):
    with pytest.raises(TreelmError, match="no such file"):
        load_golds(tmp_path / "missing.mrg")
    punct = tmp_path / "punct.mrg"
    punct.write_text("( (S (. .)) )\n")
    with pytest.raises(TreelmError, match="no sentences of <= 5 words to evaluate"):
        load_golds(punct, max_len=5)


def test_eval_parse_control_follows_the_style(mrg, capsys):
    for style in ("official", "split"):
        assert main(["eval-parse", "--baseline", "control", "--baseline", "right", "--style",
                     style, "--treebank", str(mrg), "--format", "json", "--seeds", "2"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert list(report["baselines"]) == [f"random_levels_{style}", "right_branching"]
