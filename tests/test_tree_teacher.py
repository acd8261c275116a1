"""Ensemble distillation (issue 55): the tree loss on the master gates, the teacher corpus, a tiny
student that learns fixed trees, an exact resume with the loss on, and its bad inputs."""

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from test_train import EXACT, _wait_for, _weights, restore_determinism  # noqa: F401

from treelm.cli import main
from treelm.rundir.files import read_metrics
from treelm.syntax.teacher import held_out, skeleton
from treelm.syntax.tree_loss import (
    batch_targets,
    kept_spans,
    reachable_tree,
    target_levels,
    tree_hinge,
    tree_targets,
)
from treelm.syntax.trees import build_tree, tree_to_brackets

CFG = "configs/tiny-lm.yaml"
RULES = ("official", "split")


def hinge(tree, levels, rule, margin=1e-3):
    t = tree_targets(tree, rule)
    cut, rival, node, nodes = batch_targets([t])
    d = torch.tensor(np.asarray(levels), dtype=torch.float64).reshape(-1, 1)
    return float(tree_hinge(d, cut, rival, node, nodes, margin))


@pytest.mark.parametrize("rule", RULES)
def test_hand_made_trees_zero_exactly_when_the_levels_read_as_the_tree(rule):
    tree = [["a", "b"], ["c", "d"]]
    words = ["a", "b", "c", "d"]
    good = [0.1, 0.2, 0.9, 0.3]          # the cut between b and c above the rest
    bad = [0.1, 0.9, 0.2, 0.3]           # the cut after a: another tree under both rules
    assert build_tree(good, words, rule) == tree and hinge(tree, good, rule) == 0.0
    assert build_tree(bad, words, rule) != tree and hinge(tree, bad, rule) > 0.0
    # a margin: the right cut by less than m is still taught
    close = [0.1, 0.2, 0.25, 0.21]
    assert build_tree(close, words, rule) == tree and hinge(tree, close, rule, 0.1) > 0.0


def test_the_official_rule_compares_the_cut_with_its_first_word_too():
    # ((a b) c): the official rule cuts [0, 3) at c (k = 2), so d_c must beat d_a and d_b
    tree = [["a", "b"], "c"]
    t = tree_targets(tree, "official")
    assert t.cuts.tolist() == [2] and sorted(t.rivals.tolist()) == [0, 1]
    s = tree_targets(tree, "split")
    assert s.cuts.tolist() == [2] and s.rivals.tolist() == [1]


@pytest.mark.parametrize("rule", RULES)
def test_random_trees_the_loss_is_zero_only_where_the_reading_is_the_tree(rule):
    rng = random.Random(5)
    for _ in range(300):
        n = rng.randint(2, 12)
        words = list(range(n))
        tree = build_tree([rng.random() for _ in words], words, rule)
        target = target_levels(tree_targets(tree, rule))
        assert build_tree(target, words, rule) == tree
        assert hinge(tree, target, rule, margin=1e-4) == 0.0
        for _ in range(5):
            other = [rng.random() for _ in words]
            loss = hinge(tree, other, rule)
            if loss == 0.0:
                assert build_tree(other, words, rule) == tree
            if build_tree(other, words, rule) != tree:
                assert loss > 0.0


def test_every_binary_tree_is_reachable_by_the_split_rule_and_official_projects():
    # ((a b) ((c d) e)): the official rule cuts at c and makes [c, (d e)]: it cannot keep (c d)
    tree = [["a", "b"], [["c", "d"], "e"]]
    words = list("abcde")
    assert reachable_tree(tree, words, "split") == tree
    assert reachable_tree(tree, words, "official") == [["a", "b"], ["c", ["d", "e"]]]
    # spans of 2..n-1 words: (a b), (c d), (c d e) -> the official rule keeps 2 of 3
    assert kept_spans([tree], "official") == pytest.approx(2 / 3)
    assert kept_spans([tree], "split") == 1.0


def test_the_loss_has_gradients_and_batches_equal_sentences_alone():
    rng = random.Random(1)
    trees = [build_tree([rng.random() for _ in range(6)], list(range(6)), "split")
             for _ in range(3)]
    levels = torch.rand(6, 3, dtype=torch.float64, requires_grad=True)
    targets = [tree_targets(t, "split") for t in trees]
    cut, rival, node, nodes = batch_targets(targets)
    together = tree_hinge(levels, cut, rival, node, nodes, 0.1)
    together.backward()
    assert levels.grad is not None and levels.grad.abs().sum() > 0
    # the batch's mean over nodes = the mean of each sentence's node sums over all nodes
    alone = []
    for b, t in enumerate(targets):
        c, r, nd, k = batch_targets([t])
        alone.append(tree_hinge(levels[:, b:b + 1].detach(), c, r, nd, k, 0.1) * k)
    assert together.item() == pytest.approx(float(sum(alone)) / nodes, abs=1e-12)


def test_held_out_sentences_are_dropped_by_their_skeleton():
    ptb = [s.split() for s in (
        "the company said it earned $ N million",
        "profit rose N N in the quarter",
        "the company said it earned N million",            # the same skeleton: dropped too
        "analysts expected a loss",
        "mr. smith jones and brown of new york city were named directors",
        "shares fell")]
    dev = [["the", "company", "said", "it", "earned", "3.5", "million"]]
    test = [["mr.", "smith", "jones", "and", "brown", "of", "new", "york", "city", "were",
             "named", "directors", "and", "mr.", "green", "resigned"]]   # a longer sentence
    keep, counts = held_out(ptb, {"nltk-dev": dev, "nltk-test": test})
    assert keep == [1, 3, 5]
    assert counts == {"nltk-dev": {"sentences": 1, "matched": 1, "dropped": 2},
                      "nltk-test": {"sentences": 1, "matched": 1, "dropped": 1}}
    assert skeleton(["$", "N", "<unk>", "N,N", "rose"], {"$", "N", "<unk>", "N,N", "rose"}) == \
        ("rose",)


def _teacher_file(path: Path, root: Path, n: int = 12, rule: str = "split",
                  seed: int = 3) -> list:
    """Random trees over the first ``n`` lines of the tiny corpus (its training part) of 4 to
    9 words: trees the tiny student can be taught."""
    rng = random.Random(seed)
    lines = (root / "tests/data/tiny.txt").read_text(encoding="utf-8").splitlines()
    trees = []
    for line in lines:
        words = line.split()
        if 4 <= len(words) <= 9:
            trees.append(build_tree([rng.random() for _ in words], words, rule))
        if len(trees) == n:
            break
    path.write_text("".join(tree_to_brackets(t) + "\n" for t in trees), encoding="utf-8")
    return trees


def test_a_tiny_student_learns_fixed_trees(tmp_path, root):
    os.chdir(root)
    teacher = tmp_path / "teacher.txt"
    trees = _teacher_file(teacher, root)
    run = tmp_path / "student"
    assert main(["train", "--config", CFG, "--out", str(run), "--quiet", "train.epochs=8",
                 "train.precision=fp32",
                 f"train.tree_teacher={{trees: {teacher}, layer: 2, weight: 20, rule: split, "
                 "margin: 0.05, batch_size: 4}"]) == 0
    logged = [m["tree_loss"] for m in read_metrics(run) if "tree_loss" in m]
    assert logged and logged[-1] < logged[0]
    from treelm.study.score import curve  # a study's curve carries it to its page

    assert [p["tree_loss"] for p in curve(run)] and all("tree_loss" in p for p in curve(run))
    from treelm.api import load

    model = load(run)
    sentences = [" ".join(map(str, _leaves(t))) for t in trees]
    parsed = model.parse(sentences, layer=2, style="split")
    same = sum(_nested(p) == t for p, t in zip(parsed, trees))
    assert same == len(trees)


def _leaves(tree):
    return [tree] if not isinstance(tree, list) else [w for c in tree for w in _leaves(c)]


def _nested(t):
    """An nltk.Tree (as the API parses) as nested lists of words."""
    if isinstance(t, str):
        return t
    kids = [_nested(c) for c in t]
    return kids[0] if len(kids) == 1 else kids


def test_resume_is_exact_with_the_tree_loss_on(tmp_path, root, restore_determinism):  # noqa: F811
    os.chdir(root)
    teacher = tmp_path / "teacher.txt"
    _teacher_file(teacher, root, n=20, rule="official")
    common = ["train.epochs=3", "train.save_every_batches=7", "train.log_interval=5", *EXACT,
              f"train.tree_teacher={{trees: {teacher}, layer: 1, weight: 2, batch_size: 3}}"]
    ref = tmp_path / "ref"
    assert main(["train", "--config", CFG, "--out", str(ref), "--quiet", *common]) == 0
    run = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "treelm.cli", "train", "--config", CFG,
                             "--out", str(run), "--quiet", *common], cwd=root)
    _wait_for(run, lambda ls: any('"epoch": 2' in l and '"train"' in l for l in ls), proc,
              what="a training line of epoch 2")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert main(["train", "--resume", str(run), "--quiet"]) == 0

    def curve(r):
        return [(m["event"], m["step"], m.get("loss"), m.get("tree_loss"))
                for m in read_metrics(r) if m["event"] in ("train", "valid")]

    assert curve(ref) == curve(run)
    assert any(m[3] is not None for m in curve(ref))
    wa, wb = _weights(ref, "last"), _weights(run, "last")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.parametrize("override,message", [
    ("{trees: TEACHER, weight: -1}", "train.tree_teacher.weight = -1"),
    ("{trees: TEACHER, layer: 5}", "train.tree_teacher.layer = 5: this model's ON-LSTM layers "
                                   "are 1, 2"),
    ("{trees: TEACHER, layer: 0}", "train.tree_teacher.layer = 0"),
    ("{trees: TEACHER, rule: left}", "train.tree_teacher.rule = 'left'"),
    ("{trees: MISMATCH}", "word 2 'zzzz' is not in this run's vocabulary"),
    ("{trees: NOWHERE}", "No such file"),
    ("{layer: 2}", "train.tree_teacher.trees: give the teacher's tree file"),
])
def test_bad_tree_teacher_inputs_are_one_line_and_leave_nothing(tmp_path, root, capsys,
                                                                override, message):
    os.chdir(root)
    teacher = tmp_path / "teacher.txt"
    _teacher_file(teacher, root, n=3)
    mismatch = tmp_path / "mismatch.txt"
    mismatch.write_text("((the zzzz) (market fell))\n", encoding="utf-8")
    override = override.replace("TEACHER", str(teacher)).replace("MISMATCH", str(mismatch)) \
        .replace("NOWHERE", str(tmp_path / "none.txt"))
    run = tmp_path / "r"
    code = main(["train", "--config", CFG, "--out", str(run), "--quiet",
                 f"train.tree_teacher={override}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and message in err[-1] and err[-1].startswith("treelm: error:")
    assert not run.exists()


def test_a_tree_loss_needs_on_lstm_layers(tmp_path, root, capsys):
    os.chdir(root)
    teacher = tmp_path / "teacher.txt"
    _teacher_file(teacher, root, n=3)
    run = tmp_path / "r"
    code = main(["train", "--config", CFG, "--out", str(run), "--quiet", "model.cell=lstm",
                 "model.cell_options={}", f"train.tree_teacher={{trees: {teacher}}}"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and "this model has no ON-LSTM layers" in err and not run.exists()


def test_init_from_starts_a_new_run_from_another_runs_weights(tmp_path, root, capsys):
    os.chdir(root)
    first = tmp_path / "first"
    assert main(["train", "--config", CFG, "--out", str(first), "--quiet",
                 "train.epochs=1"]) == 0
    second = tmp_path / "second"
    assert main(["train", "--config", CFG, "--out", str(second), "--quiet", "train.epochs=1",
                 "train.max_units=1", f"train.init_from={first}:last"]) == 0
    from treelm.rundir.checkpoint import read_pointer

    step0 = read_pointer(second)
    assert step0
    # a run of another model: one line
    bad = tmp_path / "bad"
    code = main(["train", "--config", CFG, "--out", str(bad), "--quiet", "model.sizes=[16,24,16]",
                 f"train.init_from={first}"])
    assert code == 2 and "weights do not fit" in capsys.readouterr().err
    assert not bad.exists()


def test_teacher_trees_verb_writes_trees_and_its_record(tmp_path, root, capsys):
    os.chdir(root)
    corpus = tmp_path / "corpus.txt"
    lines = (root / "tests/data/tiny.txt").read_text(encoding="utf-8").splitlines()[:30]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    rng = random.Random(2)
    for f in (a, b):
        f.write_text("".join(tree_to_brackets(build_tree([rng.random() for _ in l.split()],
                                                          l.split())) + "\n"
                             for l in lines if l.split()), encoding="utf-8")
    out = tmp_path / "teacher.txt"
    assert main(["teacher-trees", str(a), str(b), "--corpus", str(corpus), "--exclude", "none",
                 "-o", str(out)]) == 0
    trees = out.read_text(encoding="utf-8").splitlines()
    assert len(trees) == sum(1 for l in lines if l.split())
    record = json.loads(Path(str(out) + ".json").read_text(encoding="utf-8"))
    assert record["trees"] == len(trees) and record["dropped"] == 0
    assert record["sources"] == [str(a), str(b)]


def test_teacher_trees_baseline_control_and_its_errors(tmp_path, root, capsys):
    os.chdir(root)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat down\nshares fell\n", encoding="utf-8")
    out = tmp_path / "right.txt"
    assert main(["teacher-trees", "--baseline", "right_branching", "--corpus", str(corpus),
                 "--exclude", "none", "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == ["(the (cat (sat down)))",
                                                            "(shares fell)"]
    capsys.readouterr()
    assert main(["teacher-trees", "--corpus", str(corpus), "--exclude", "none", "-o",
                 str(out)]) == 2
    assert "needs SOURCEs or --baseline" in capsys.readouterr().err
