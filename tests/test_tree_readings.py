"""The tree path reads each checkpoint once and each part's levels once (issue 54): scoring a
study's run loads every checkpoint once and reads dev and test (all its lengths) in one pass
each, and ``treelm ensemble`` over two runs with several readings each loads each run once and
reads its levels once; the trees are those of :func:`treelm.syntax.readings.read_parts`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_tree_choice import _run  # a verb's exit code, stdout and stderr

from treelm.run import load_run
from treelm.syntax.readings import read_parts
from treelm.syntax.report import load_golds, parsing_report


@pytest.fixture()
def counted(monkeypatch) -> dict[str, list]:
    """Every model load (``treelm.run.load_run``) and every pass over sentences for their levels
    (``treelm.syntax.levels.compute_levels``), counted as they happen."""
    import treelm.run as run_module
    import treelm.syntax.levels as levels

    counts: dict[str, list] = {"loads": [], "passes": []}
    real_load, real_levels = run_module.load_run, levels.compute_levels

    def load(path, which="best", *args, **kwargs):
        counts["loads"].append((Path(path).name, which))
        return real_load(path, which, *args, **kwargs)

    def passes(model, ids, *args, **kwargs):
        counts["passes"].append(len(ids))
        return real_levels(model, ids, *args, **kwargs)

    monkeypatch.setattr(run_module, "load_run", load)
    monkeypatch.setattr(levels, "compute_levels", passes)
    return counts


def test_a_study_run_is_scored_with_one_load_per_checkpoint_and_one_pass_per_part(
        lm_run, mrg, counted):
    from treelm.study.score import score_trees

    trees = {"dev": str(mrg), "test": str(mrg), "rules": ["official", "split"], "layers": "all",
             "test_max_len": [None, 10, 6], "sentences": ["the company said it"],
             "checkpoints": ["best", "last"], "ensemble": []}
    got = score_trees(lm_run, trees)
    # 2 checkpoints x (dev, test at every length) + the kept sentences once: 5 passes, not the
    # 2 x 2 rules x 4 parts + 2 x 2 + 1 = 21 of reading the levels per rule, part and purpose
    assert counted["loads"] == [("run", "best"), ("run", "last")]
    assert len(counted["passes"]) == 5
    # the figures are eval-parse's, part by part, rule by rule
    for c in trees["checkpoints"]:
        r = load_run(lm_run, c)
        for rule in trees["rules"]:
            for name, max_len in (("dev", None), ("test", None), ("test_10", 10),
                                  ("test_6", 6)):
                rep = parsing_report(mrg, max_len, run=r, style=rule, baselines=())
                assert got["trees"][c][rule][name] == {
                    k: {"sentence_f1": v["sentence_f1"], "corpus_f1": v["corpus_f1"]}
                    for k, v in rep["layers"].items()}
                assert got["trees"][c][rule]["oov_" + name] == \
                    rep["oov_words"] / rep["n_words"]
    assert set(got["readings"]) == {"best", "last"}
    assert list(got["sentences"]["the company said it"]) == ["official", "split"]


def test_ensemble_loads_each_run_once_and_reads_its_levels_once(lm_run, mrg, tmp_path,
                                                                  capsys, counted):
    other = tmp_path / "other"
    shutil.copytree(lm_run, other)
    sources = [f"{lm_run}:1:official", f"{other}:2:split", f"{lm_run}:2:split",
               f"{lm_run}:1:split", f"{other}:1:official", str(lm_run)]
    code, out, err = _run(capsys, "ensemble", *sources, "--treebank", mrg, "--format", "json",
                          "-o", tmp_path / "avg.txt")
    assert code == 0
    assert sorted(counted["loads"]) == [("other", "best"), ("run", "best")]
    assert len(counted["passes"]) == 2                      # one per run, six readings
    # each reading's row is the run's own trees at that layer and rule, as eval-parse scores
    report = json.loads(out)
    golds = load_golds(mrg)
    r = load_run(lm_run)
    read = read_parts(r.model, r.vocab, {"": [g.words for g in golds]})[""]
    rep = parsing_report(mrg, trees={"x": read.trees[2, "split"]}, golds=golds, baselines=())
    assert report["trees"][f"[3] {lm_run} (layer 2, split)"] == rep["trees"]["x"]
    assert err.count("treelm ensemble: ") == len(sources)
