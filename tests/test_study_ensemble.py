"""A study's ensembles (issue 48): trees kept as bits in the record, and the tree averages of the
runs' readings computed from them, per group and reading set, chosen on dev.

The record here is made by hand: runs whose readings are random binary trees over a small
synthetic treebank, so that every figure can be recomputed independently from the trees."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from treelm.errors import TreelmError
from treelm.study.ensemble import reading_sets, status_lines, study_ensembles
from treelm.study.record import mean_std
from treelm.syntax.baselines import random_tree, right_branching
from treelm.syntax.metrics import corpus_f1, sentence_f1
from treelm.syntax.tree_codes import decode_trees, encode_trees, tree_bits


def _trees(lengths, seed):
    rng = np.random.default_rng(seed)
    return [random_tree(list(range(n)), rng) for n in lengths]


def _norm(t):
    return t if not isinstance(t, list | tuple) else [_norm(c) for c in t]


@pytest.mark.parametrize("seed", range(5))
def test_tree_codes_round_trip(seed):
    lengths = [1, 2, 3, 7, 12, 40, 5][seed:] + [9]
    trees = _trees(lengths, seed)
    code = encode_trees(trees)
    assert decode_trees(code, lengths) == [_norm(t) for t in trees]
    assert len(tree_bits(trees[-1])) == 2 * lengths[-1] - 1


def test_a_tree_code_of_other_lengths_is_one_error():
    code = encode_trees(_trees([5, 6, 7], 0))
    with pytest.raises(TreelmError, match="does not fit"):
        decode_trees(code, [5, 6, 7, 20])


def _run(variant, seed, golds, dev_scores):
    """A run entry: each (checkpoint, rule, layer) reading a random tree per sentence, its
    scores from those trees (dev_scores overrides the dev F1s, to set the run's own choice)."""
    readings, trees = {}, {}
    for i, c in enumerate(("best", "best-trees")):
        trees[c] = {}
        for j, rule in enumerate(("official", "split")):
            trees[c][rule] = {"dev": {}, "test": {}}
            for layer in ("1", "2", "3"):
                for part in ("dev", "test"):
                    pred = _trees([len(g.words) for g in golds[part]],
                                  1000 * seed + 100 * i + 10 * j + int(layer) + 7 * (part == "dev"))
                    readings.setdefault(c, {}).setdefault(rule, {}).setdefault(layer, {})[
                        part] = encode_trees(pred)
                    trees[c][rule][part][layer] = {
                        "sentence_f1": dev_scores.get((c, rule, layer), 0.1) if part == "dev"
                        else sentence_f1(pred, golds[part]).f1, "corpus_f1": 0.0}
    return {"variant": variant, "seed": seed, "trees": trees, "readings": readings}


@pytest.fixture
def golds():
    def gold(n, seed):
        return SimpleNamespace(words=[f"w{i}" for i in range(n)], labeled_spans=[],
                               tree=_trees([n], seed)[0] if seed % 3 else right_branching(
                                   list(range(n))))
    return {"dev": [gold(n, i) for i, n in enumerate([3, 5, 8, 11, 4, 9])],
            "test": [gold(n, 50 + i) for i, n in enumerate([6, 12, 3, 9, 14, 7, 5])]}


def _record(golds, runs, ensemble=("a", "all")):
    return {"study": {"variants": {"a": [], "b": []}, "score": {"trees": {
        "rules": ["official", "split"], "checkpoints": ["best", "best-trees"],
        "test_max_len": [None, 10], "ensemble": list(ensemble)}}},
        "runs": {f"{r['variant']}/{r['seed']}": r for r in runs}}


def _pick_first(sources):
    """A stand-in average: the first source's trees (what any average of one source gives)."""
    return sources[0]


def test_one_run_own_reading_averages_to_itself(golds):
    run = _run("a", 1, golds, {("best", "split", "2"): 0.9})
    rec = _record(golds, [run], ("a",))
    out = study_ensembles(rec, golds, ensemble=_pick_first)
    own = out["groups"]["a"]["own@best"]
    assert own["sources"] == 1
    tree = decode_trees(run["readings"]["best"]["split"]["2"]["test"],
                        [len(g.words) for g in golds["test"]])
    assert own["test"]["sentence_f1"] == pytest.approx(sentence_f1(tree, golds["test"]).f1)
    assert own["test"]["corpus_f1"] == pytest.approx(corpus_f1(tree, golds["test"]).f1)
    short = [i for i, g in enumerate(golds["test"]) if len(g.words) <= 10]
    assert own["test_10"]["sentence_f1"] == pytest.approx(
        sentence_f1([tree[i] for i in short], [golds["test"][i] for i in short]).f1)
    # beside it, the run read alone: the record's own figure at its own choice
    assert own["single"]["test"]["mean"] == pytest.approx(
        run["trees"]["best"]["split"]["test"]["2"]["sentence_f1"])


def test_reading_sets_follow_each_runs_own_choice(golds):
    run = _run("a", 1, golds, {("best", "split", "3"): 0.9, ("best", "official", "2"): 0.5,
                               ("best-trees", "official", "1"): 0.8})
    sets = reading_sets(run, ["official", "split"], ["best", "best-trees"])
    assert sets["own@best"] == [("best", "split", "3")]
    assert sets["layers@best"] == [("best", "split", "2"), ("best", "split", "3")]
    assert sets["rules@best"] == [("best", "official", "2"), ("best", "split", "3")]
    assert len(sets["layers+rules@best"]) == 4 and len(sets["all-layers@best"]) == 6
    assert sets["own@best-trees"] == [("best-trees", "official", "1")]
    assert "own@best-trees+best-trees-split" not in sets      # one tree checkpoint only


def test_groups_choice_on_dev_and_missing_runs(golds):
    runs = [_run("a", 1, golds, {}), _run("a", 2, golds, {}), _run("b", 1, golds, {})]
    old = dict(_run("b", 2, golds, {}))
    del old["readings"]                          # a run scored before readings were kept
    rec = _record(golds, [*runs, old], "all")
    rec["study"]["score"]["trees"]["ensemble"] = "all"
    seen = []

    def spy(sources):
        seen.append(len(sources))
        return sources[0]
    out = study_ensembles(rec, golds, ensemble=spy)
    assert set(out["groups"]) == {"a", "b", "all"}
    assert out["missing"] == ["b/2"]
    assert out["groups"]["all"]["own@best"]["runs"] == 3
    assert out["groups"]["all"]["all-layers@best"]["sources"] == 18
    best = max(((g, s) for g, e in out["groups"].items() for s in e),
               key=lambda c: out["groups"][c[0]][c[1]]["dev"]["sentence_f1"])
    assert (out["chosen"]["group"], out["chosen"]["readings"]) == best
    assert max(seen) == 18
    lines = status_lines({**rec, "ensembles": out})
    assert lines[0].startswith("tree averages") and lines[-1].startswith("runs without kept")
    assert any(line.startswith("ensemble chosen on dev: ") for line in lines)


def test_single_is_the_mean_of_the_runs_alone(golds):
    runs = [_run("a", s, golds, {("best", "official", "2"): 0.9}) for s in (1, 2, 3)]
    out = study_ensembles(_record(golds, runs, ("a",)), golds, ensemble=_pick_first)
    want = mean_std([r["trees"]["best"]["official"]["test"]["2"]["sentence_f1"] for r in runs])
    assert out["groups"]["a"]["own@best"]["single"]["test"] == want


def test_a_group_is_averaged_once_all_its_runs_are_in(golds):
    runs = [_run("a", 1, golds, {}), _run("a", 2, golds, {}), _run("b", 1, golds, {})]
    rec = _record(golds, runs, "all")
    rec["study"]["score"]["trees"]["ensemble"] = "all"
    rec["study"]["seeds"] = [1, 2]
    out = study_ensembles(rec, golds, ensemble=_pick_first)
    assert set(out["groups"]) == {"a"}              # b/2 is not in: neither b nor all yet
    rec["runs"]["b/2"] = _run("b", 2, golds, {})
    assert set(study_ensembles(rec, golds, ensemble=_pick_first)["groups"]) == {"a", "b", "all"}


# ----------------------------------------------------------------------------- the kept trees
RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"


def test_a_record_keeps_its_trees_beside_it_deterministically(tmp_path):
    """The record is a small readable file naming its kept trees' file; written again, both
    come out byte for byte (xz: no time stamp), and the runs read back have their
    readings for every checkpoint, rule and layer, on dev (and test where the study has one).
    Every record is compared before compression (what ``write_record`` would write), the
    smallest also written whole (xz at its extreme preset takes seconds a megabyte)."""
    import lzma

    from treelm.study.record import kept_trees_path, read_record, record_contents, write_record

    records = sorted(RESULTS.glob("*.json"))
    assert all(p.stat().st_size <= 1 << 20 for p in records), \
        [p.name for p in records if p.stat().st_size > 1 << 20]
    kept = [p for p in records if '"kept_trees"' in p.read_text(encoding="utf-8")]
    assert {p.name for p in kept} >= {"trees-seeds-20261128.json",
                                      "trees-seeds-softmax-20261128.json",
                                      "trees-output-20261128.json"}
    read = {}
    for path in kept:
        rec = read_record(path)
        trees = kept_trees_path(path)
        raw = json.loads(path.read_text(encoding="utf-8"))
        assert raw["kept_trees"] == trees.name and trees.read_bytes()[:6] == b"\xfd7zXZ\0"
        assert not any("readings" in r for r in raw["runs"].values())
        study = rec["study"]["score"]["trees"]
        for r in rec["runs"].values():
            for c in study["checkpoints"]:
                for rule in study["rules"]:
                    layers = r["readings"][c][rule]
                    assert sorted(layers) == sorted(r["trees"][c][rule]["dev"])
                    assert all(set(p) == {"dev", *(["test"] if study["test"] else [])}
                               for p in layers.values())
        text, payload = record_contents(copy.deepcopy(rec), path.name)
        assert text == path.read_text(encoding="utf-8")
        assert payload == lzma.decompress(trees.read_bytes())
        read[path] = rec
    smallest = min(kept, key=lambda p: kept_trees_path(p).stat().st_size)
    again = tmp_path / smallest.name
    write_record(again, read[smallest])
    assert again.read_bytes() == smallest.read_bytes()
    assert kept_trees_path(again).read_bytes() == kept_trees_path(smallest).read_bytes()
    assert read_record(again) == read[smallest]


@pytest.mark.skipif(not os.environ.get("NLTK_DATA"), reason="the studies' gold trees (NLTK_DATA)")
def test_ensembles_from_the_kept_trees_are_the_records():
    """The ensembles recomputed from a record's kept trees equal its own to 1e-12, every figure
    (tools/verify_ensembles.py on the seeds study's record: ~100 s on one core; it needs
    the gold trees of nltk-dev and nltk-test, so it runs only where NLTK_DATA is set)."""
    from treelm.study.record import read_record

    sys.path.insert(0, str(RESULTS.parents[1] / "tools"))
    from verify_ensembles import main as verify

    path = RESULTS / "trees-seeds-20261128.json"
    if not read_record(path).get("ensembles"):
        pytest.skip("no ensembles")
    assert verify([str(path)]) == 0
