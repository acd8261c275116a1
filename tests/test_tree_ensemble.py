"""Tree ensembles (``treelm.syntax.ensemble``, ``treelm ensemble``, ``treelm.ensemble_trees``) and
trees from files (``treelm.syntax.tree_files``, ``eval-parse --trees``).

The average is held to a brute-force search over every binary tree, with the documented tie
rule; a run's own ``parse --format brackets`` file is held to the run's ``eval-parse``."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from test_tree_choice import _run  # a verb's exit code, stdout and stderr

import treelm
from treelm.errors import TreelmError
from treelm.run import load_run
from treelm.syntax.baselines import balanced, left_branching, random_tree, right_branching
from treelm.syntax.ensemble import (
    best_binary_tree,
    ensemble_tree,
    ensemble_trees,
    leaves_and_brackets,
    span_votes,
    tree_votes,
)
from treelm.syntax.metrics import evaluate
from treelm.syntax.readings import read_parts
from treelm.syntax.report import load_golds
from treelm.syntax.tree_files import read_tree, read_tree_file, read_tree_lines
from treelm.syntax.trees import tree_to_brackets


# ----------------------------------------------------------------------------- helpers
def every_tree(lo: int, hi: int) -> Iterator[tuple[object, tuple[int, ...]]]:
    """Every binary tree over the words ``lo .. hi-1`` with its split points in pre-order."""
    if hi - lo == 1:
        yield lo, ()
        return
    for k in range(lo + 1, hi):
        for left, ls in every_tree(lo, k):
            for right, rs in every_tree(k, hi):
                yield [left, right], (k, *ls, *rs)


def brute_force(sources: list, weights: list | None, n: int) -> tuple[object, float]:
    """The tree of the highest summed votes over every binary tree, ties to the smallest split
    points in pre-order (the documented rule), with its objective computed span by span."""
    w = weights or [1] * len(sources)
    source_spans = [leaves_and_brackets(t)[1] for t in sources]

    def objective(tree: object) -> float:
        spans = leaves_and_brackets(tree)[1]
        return sum(wk * len(spans & sk) for wk, sk in zip(w, source_spans))

    scored = [(objective(t), splits, t) for t, splits in every_tree(0, n)]
    best = max(s for s, _, _ in scored)
    return min((splits, t) for s, splits, t in scored if s == best)[1], best


def random_source(words: list[int], rng: random.Random) -> object:
    """A random tree: binary, n-ary (a random span flattened), with a unary node, or one of
    the trivial trees (ties abound among those)."""
    kind = rng.randrange(5)
    if kind == 0:
        return right_branching(words)
    if kind == 1:
        return left_branching(words)
    tree = random_tree(words, rng.randrange(10**6))
    if kind == 3 and isinstance(tree, list):       # n-ary: splice a child's children in
        i = rng.randrange(len(tree))
        if isinstance(tree[i], list):
            tree = [*tree[:i], *tree[i], *tree[i + 1:]]
    if kind == 4:
        tree = [tree]                                   # a unary root
    return tree


# ----------------------------------------------------------------------------- the average
@pytest.mark.parametrize("seed", range(6))
def test_the_average_is_the_brute_force_best_with_its_ties(seed):
    rng = random.Random(seed)
    for _ in range(80):
        n = rng.randint(1, 8)
        words = list(range(n))
        sources = [random_source(words, rng) for _ in range(rng.randint(1, 6))]
        weights = None if rng.random() < 0.5 else [rng.randint(0, 3) for _ in sources]
        expected, best = brute_force(sources, weights, n)
        got = ensemble_tree(sources, weights)
        assert got == expected, (sources, weights)
        if n > 1:
            assert tree_votes(got, span_votes(sources, weights)) == best


@pytest.mark.parametrize("seed", range(3))
def test_fractional_weights_reach_the_best_objective_and_repeat(seed):
    rng = random.Random(100 + seed)
    for _ in range(60):
        n = rng.randint(2, 8)
        words = list(range(n))
        sources = [random_source(words, rng) for _ in range(rng.randint(2, 6))]
        weights = [rng.random() for _ in sources]
        _, best = brute_force(sources, weights, n)
        got = ensemble_tree(sources, weights)
        assert tree_votes(got, span_votes(sources, weights)) == pytest.approx(best, abs=1e-12)
        assert ensemble_tree(sources, weights) == got                    # deterministic


def test_ties_go_to_the_smallest_split_point():
    words = list("abcde")
    # no votes at all: the smallest split everywhere is the right-branching tree
    assert best_binary_tree(np.zeros((6, 6)), words) == right_branching(words)
    # two sources that disagree on every span tie everywhere too
    assert ensemble_tree([left_branching(words), right_branching(words)]) == right_branching(words)
    assert ensemble_tree([left_branching(words), right_branching(words)], [2, 1]) == \
        left_branching(words)


def test_one_source_gives_its_own_tree_back():
    rng = random.Random(7)
    for n in [*range(1, 12), 40, 120]:
        words = [f"w{i}" for i in range(n)]
        for tree in (random_tree(words, rng.randrange(10**6)), balanced(words),
                     left_branching(words), right_branching(words)):
            assert ensemble_tree([tree]) == tree
            assert ensemble_tree([tree, tree, tree], [1, 0, 2]) == tree


def test_an_nary_source_is_refined_to_a_binary_tree_holding_its_spans():
    tree = [["a", "b", "c"], "d", ["e", ["f", "g"], "h"]]
    got = ensemble_tree([tree])
    assert leaves_and_brackets(got)[0] == list("abcdefgh")
    assert leaves_and_brackets(tree)[1] <= leaves_and_brackets(got)[1]
    assert all(is_binary for is_binary in _binary(got))


def _binary(tree: object) -> Iterator[bool]:
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            yield len(node) == 2
            todo.extend(node)


def test_corpus_average_and_its_errors():
    a = [[["the", "cat"], "sat"], "yes", [["a", "b"], ["c", "d"]]]
    b = [["the", ["cat", "sat"]], "yes", ["a", ["b", ["c", "d"]]]]
    assert ensemble_trees([a, b, a]) == [[["the", "cat"], "sat"], "yes", [["a", "b"], ["c", "d"]]]
    assert ensemble_trees([a, b, a], [0, 1, 0]) == b
    with pytest.raises(TreelmError, match="source 2 has 2 trees, source 1 has 3"):
        ensemble_trees([a, b[:2]])
    with pytest.raises(TreelmError, match="sentence 1, source 2: word 2 is 'dog' where source "
                                          "1 has 'cat'"):
        ensemble_trees([a, [["the", ["dog", "sat"]], "yes", b[2]]])
    with pytest.raises(TreelmError, match="2 weights for 3 sources"):
        ensemble_trees([a, b, a], [1, 2])
    with pytest.raises(TreelmError, match="finite and >= 0"):
        ensemble_trees([a, b], [1, -1])
    with pytest.raises(TreelmError, match="no sources"):
        ensemble_trees([])


def test_long_sentences_need_no_recursion():
    words = list(range(400))
    assert ensemble_tree([left_branching(words)]) == left_branching(words)


# ----------------------------------------------------------------------------- tree files
WORDS = "the cat sat".split()


@pytest.mark.parametrize("line", [
    "((the cat) sat)", "(S (NP the cat) (VP sat))", "(S (NP (DT the) (NN cat)) (VP (VBD sat)))",
    "(. (. the cat) (. sat))", "(. (. (. the) (. cat)) (. sat))", "( (S (NP the cat) (VP sat)) )",
    "(((the) (cat)) sat)",
])
def test_a_tree_line_in_any_labels(line):
    assert read_tree(line, WORDS) == [["the", "cat"], "sat"]


def test_a_line_without_labels_whose_brackets_start_with_words():
    assert read_tree("(the (cat sat))", WORDS) == ["the", ["cat", "sat"]]   # no labels here
    assert read_tree("(the cat sat)", WORDS) == ["the", "cat", "sat"]
    for line in ("cat", "(cat)", "(NN cat)", "(S (NN cat))"):
        assert read_tree(line, ["cat"]) == "cat"


def test_a_file_of_trees_and_its_errors(tmp_path):
    sentences = [WORDS, [], ["yes"]]
    f = tmp_path / "trees.txt"
    f.write_text("(S (NP the cat) (VP sat))\n\nyes\n\n\n", encoding="utf-8")
    assert read_tree_file(f, sentences) == [[["the", "cat"], "sat"], None, "yes"]
    with pytest.raises(TreelmError) as e:
        read_tree_lines(["((the dog) sat)"], [WORDS], "t.txt")
    assert str(e.value) == "t.txt:1: word 2 is 'dog' where the sentence has 'cat'"
    with pytest.raises(TreelmError, match=r"^t.txt:2: the tree ends after word 2; the sentence "
                                          r"goes on with 'sat' \(word 3 of 3\)$"):
        read_tree_lines(["cat", "(S (NP the cat))"], [["cat"], WORDS], "t.txt")
    with pytest.raises(TreelmError, match=r"^t.txt: 1 lines \(one tree a line\) for the 2 "
                                          r"sentences$"):
        read_tree_lines(["cat"], [["cat"], WORDS], "t.txt")
    with pytest.raises(TreelmError, match=r"^t.txt:1: malformed tree: 1 unclosed '\('$"):
        read_tree_lines(["((the cat) sat"], [WORDS], "t.txt")
    with pytest.raises(TreelmError, match="a tree for an empty sentence"):
        read_tree_lines(["cat"], [[]], "t.txt")


# ----------------------------------------------------------------------------- the verbs
@pytest.fixture(scope="module")
def sentences(mrg) -> Path:
    """The treebank's sentences as the protocol reads them, one a line: ``parse``'s input."""
    path = mrg.parent / "sentences.txt"
    path.write_text("".join(" ".join(g.words) + "\n" for g in load_golds(mrg)), encoding="utf-8")
    return path


def _error(capsys, *argv: object) -> str:
    code, out, err = _run(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("treelm: error: "), err
    return lines[0].removeprefix("treelm: error: ")


def _report(capsys, *argv: object) -> dict:
    code, out, _ = _run(capsys, "eval-parse", *argv, "--format", "json")
    assert code == 0
    return json.loads(out)


@pytest.mark.parametrize("layer,style", [(None, None), ("2", "split"), ("1", "split")])
def test_a_runs_own_tree_file_scores_as_the_run(lm_run, mrg, sentences, tmp_path, capsys, layer,
                                                style):
    reading = [*(["--layer", layer] if layer else []), *(["--style", style] if style else [])]
    code, out, _ = _run(capsys, "parse", lm_run, "--input", sentences, "--format", "brackets",
                        *reading)
    assert code == 0
    trees = tmp_path / "own.txt"
    trees.write_text(out, encoding="utf-8")
    from_file = _report(capsys, "--trees", trees, "--treebank", mrg, "--style",
                        style or "official")     # (the rule control's rule: the same rows)
    of_run = _report(capsys, lm_run, "--treebank", mrg, "--layer", layer or "1",
                     "--style", style or "official")
    assert from_file["trees"][str(trees)] == of_run["layers"][layer or "1"]
    assert from_file["baselines"] == of_run["baselines"]
    for key in ("n_sentences", "n_words", "gold"):
        assert from_file[key] == of_run[key]
    # the table has the file's row beside the baselines, with the run's figures
    code, table, _ = _run(capsys, "eval-parse", "--trees", trees, "--treebank", mrg)
    row = next(ln for ln in table.splitlines() if ln.startswith(str(trees)))
    res = of_run["layers"][layer or "1"]
    assert row.split()[1:3] == [f"{100 * res['sentence_f1']:.1f}", f"{100 * res['corpus_f1']:.1f}"]
    assert "right branching" in table


def test_eval_parse_trees_with_max_len_takes_either_file(lm_run, mrg, sentences, tmp_path,
                                                         capsys):
    golds = load_golds(mrg)
    trees = [right_branching(g.words) for g in golds]
    full, short = tmp_path / "full.txt", tmp_path / "short.txt"
    full.write_text("".join(tree_to_brackets(t) + "\n" for t in trees), encoding="utf-8")
    kept = [(g, t) for g, t in zip(golds, trees) if len(g.words) <= 6]
    assert 0 < len(kept) < len(golds)
    short.write_text("".join(tree_to_brackets(t) + "\n" for _, t in kept), encoding="utf-8")
    expected = json.loads(json.dumps(evaluate([t for _, t in kept], [g for g, _ in kept])))
    for f in (full, short):
        rep = _report(capsys, "--trees", f, "--treebank", mrg, "--max-len", "6")
        assert rep["trees"][str(f)] == expected and rep["n_sentences"] == len(kept)
        assert rep["baselines"]["right_branching"]["sentence_f1"] == expected["sentence_f1"]


def _fell(mrg: Path, path: Path) -> tuple[list, list[str]]:
    """The gold trees and right-branching lines of ``mrg``, written to ``path`` with one word
    spelt otherwise: line 3's ``rose`` as ``fell``."""
    golds = load_golds(mrg)
    lines = [tree_to_brackets(right_branching(g.words)) for g in golds]
    path.write_text("\n".join([*lines[:2], lines[2].replace("rose", "fell"), *lines[3:]]) + "\n",
                    encoding="utf-8")
    return golds, lines


def test_a_mismatched_line_or_a_short_file_is_one_error(mrg, tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    golds, lines = _fell(mrg, bad)
    assert _error(capsys, "eval-parse", "--trees", bad, "--treebank", mrg) == \
        f"{bad}:3: word 2 is 'fell' where the sentence has 'rose'"
    assert _error(capsys, "eval-parse", "--trees", bad, "--treebank", mrg, "--match",
                  "words") == f"{bad}:3: word 2 is 'fell' where the sentence has 'rose'"
    short = tmp_path / "short.txt"
    short.write_text("\n".join(lines[:4]) + "\n", encoding="utf-8")
    msg = _error(capsys, "eval-parse", "--trees", short, "--treebank", mrg)
    assert msg == f"{short}: 4 lines (one tree a line) for the 5 sentences of {mrg}"
    msg = _error(capsys, "eval-parse", "--trees", short, "--treebank", mrg, "--max-len", "6")
    assert msg.endswith(f"for the 5 sentences of {mrg} (3 of <= 6 words)")
    assert "no such file" in _error(capsys, "eval-parse", "--trees", tmp_path / "none.txt",
                                    "--treebank", mrg)


def test_raw_case_and_digits_score_as_their_normalised_copy(mrg, tmp_path, capsys):
    """A parser's released trees keep the words as written (``The``, ``Shares``, ``3``): their
    leaves are read as the protocol normalises the treebank's (lower case, digit runs -> N), so
    the file scores as its normalised copy, in eval-parse and in ensemble alike."""
    golds = load_golds(mrg)
    raw = {0: {0: "The"}, 2: {0: "Shares", 2: "3"}}       # as the treebank spells them
    plain, cased = tmp_path / "plain.txt", tmp_path / "cased.txt"
    plain.write_text("".join(tree_to_brackets(balanced(g.words)) + "\n" for g in golds),
                     encoding="utf-8")
    cased.write_text("".join(
        tree_to_brackets(balanced([raw.get(i, {}).get(j, w) for j, w in enumerate(g.words)]))
        + "\n" for i, g in enumerate(golds)), encoding="utf-8")
    assert "(The company)" in cased.read_text() and "(3 %)" in cased.read_text()
    assert golds[2].words[2] == "N"
    scored = [_report(capsys, "--trees", f, "--treebank", mrg)["trees"][str(f)]
              for f in (plain, cased)]
    assert scored[0] == scored[1] == json.loads(json.dumps(
        evaluate([balanced(g.words) for g in golds], golds)))
    # the ensemble writes the treebank's words, whatever the file's spelling
    assert _run(capsys, "ensemble", cased, "--treebank", mrg)[1] == \
        _run(capsys, "ensemble", plain, "--treebank", mrg)[1]


def test_match_position_scores_other_spellings_and_says_how_many(mrg, tmp_path, capsys):
    other = tmp_path / "other.txt"
    golds, lines = _fell(mrg, other)
    code, out, err = _run(capsys, "eval-parse", "--trees", other, "--treebank", mrg, "--match",
                          "position", "--format", "json")
    assert code == 0 and err.strip() == (
        f"treelm eval-parse: {other}: 1 of 5 lines spell words otherwise than the sentences; "
        "scored by position (--match position)")
    assert json.loads(out)["trees"][str(other)] == json.loads(json.dumps(
        evaluate([right_branching(g.words) for g in golds], golds)))
    code, trees, err = _run(capsys, "ensemble", other, "--treebank", mrg, "--match", "position",
                            "-o", tmp_path / "avg.txt")
    assert code == 0 and "1 of 5 lines spell words otherwise" in err
    assert (tmp_path / "avg.txt").read_text(encoding="utf-8").splitlines()[2] == \
        tree_to_brackets(right_branching(golds[2].words))
    # another number of words stays one error naming the line and the word
    short = tmp_path / "short.txt"
    short.write_text("\n".join([*lines[:2], "(shares (rose N))", *lines[3:]]) + "\n",
                     encoding="utf-8")
    assert _error(capsys, "eval-parse", "--trees", short, "--treebank", mrg, "--match",
                  "position") == (f"{short}:3: the tree ends after word 3; the sentence goes on "
                                  "with '%' (word 4 of 4)")


def _layer_trees(run: Path, words: list, layer: int, rule: str) -> list:
    r = load_run(run)
    return read_parts(r.model, r.vocab, {"": words}, [layer], [rule])[""].trees[layer, rule]


def _source_trees(run: Path, golds: list, layer: int, rule: str) -> list:
    return _layer_trees(run, [g.words for g in golds], layer, rule)


def test_ensemble_of_runs_and_files_on_a_treebank(lm_run, mrg, tmp_path, capsys, monkeypatch):
    golds = load_golds(mrg)
    other = tmp_path / "other.txt"          # another parser's trees, with labels
    labelled = [f"(S {' '.join(f'(X {w})' for w in g.words)})" for g in golds]
    other.write_text("\n".join(labelled) + "\n", encoding="utf-8")
    readings = [(1, "official"), (2, "split"), (2, "official")]
    sources = [_source_trees(lm_run, golds, k, r) for k, r in readings]
    flat = [g.words if len(g.words) > 1 else g.words[0] for g in golds]
    expected = ensemble_trees([*sources, flat], [1, 2, 0.5, 3])

    calls = []
    import treelm.api.ensemble as api_ensemble
    real = api_ensemble.ensemble_trees
    monkeypatch.setattr(api_ensemble, "ensemble_trees",
                        lambda *a, **k: calls.append(a) or real(*a, **k))
    out = tmp_path / "average.txt"
    code, table, err = _run(capsys, "ensemble", lm_run, f"{lm_run}:2:split",
                            f"{lm_run}:2:official", other, "--treebank", mrg, "-o", out,
                            "--source-weights", "1,2,0.5,3")
    assert code == 0 and len(calls) == 1                      # through the API's function
    assert out.read_text(encoding="utf-8") == "".join(tree_to_brackets(t) + "\n"
                                                      for t in expected)
    assert f"treelm ensemble: {lm_run}: layer 1, official rule (the last-but-one" in err
    assert f"treelm ensemble: {lm_run}:2:split: layer 2, split rule (given)" in err
    rows = {ln.split("  ")[0].strip(): ln for ln in table.splitlines()}
    assert {f"[1] {lm_run} (layer 1, official)", f"[2] {lm_run} (layer 2, split)",
            f"[4] {other}", "tree average of 4 sources, weighted", "right branching"} <= set(rows)
    # the scores are eval-parse's: the average's file, scored again, gives its row
    again = _report(capsys, "--trees", out, "--treebank", mrg)["trees"][str(out)]
    code, js, _ = _run(capsys, "ensemble", lm_run, f"{lm_run}:2:split", f"{lm_run}:2:official",
                       other, "--treebank", mrg, "-o", out, "--source-weights", "1,2,0.5,3",
                       "--format", "json")
    rep = json.loads(js)
    assert rep["trees"]["tree average of 4 sources, weighted"] == again
    assert rep["trees"][f"[2] {lm_run} (layer 2, split)"] == json.loads(json.dumps(
        evaluate(sources[1], golds)))
    assert rep["weights"] == [1, 2, 0.5, 3]
    # without -o: the trees on stdout, the table on stderr
    code, trees_out, err = _run(capsys, "ensemble", lm_run, other, "--treebank", mrg)
    assert trees_out == "".join(tree_to_brackets(t) + "\n"
                                for t in ensemble_trees([sources[0], flat]))
    assert "tree average of 2 sources" in err


def test_ensemble_reads_a_run_at_its_dev_choice(lm_run, mrg, tmp_path, capsys):
    from treelm.rundir.checkpoint import read_pointer
    from treelm.rundir.trees import HOW_EVAL_PARSE, TreeChoice, write_choices

    run = tmp_path / "chosen"
    shutil.copytree(lm_run, run)
    write_choices(run, {"best": TreeChoice(
        checkpoint="best", path=read_pointer(run)["best"], treebank="nltk-dev", layer=2,
        rule="split", sentence_f1=0.4, step=1, tokens=1, how=HOW_EVAL_PARSE)})
    code, chosen, err = _run(capsys, "ensemble", run, "--treebank", mrg)
    assert "layer 2, split rule (chosen on nltk-dev" in err
    assert chosen == _run(capsys, "ensemble", f"{run}:2:split", "--treebank", mrg)[1]
    assert chosen != _run(capsys, "ensemble", f"{run}:1:official", "--treebank", mrg)[1]


def test_ensemble_of_input_lines_keeps_blank_lines(lm_run, tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("the company said it would sell the shares\n\nprices rose\nyes\n",
                    encoding="utf-8")
    words = [["the", "company", "said", "it", "would", "sell", "the", "shares"],
             ["prices", "rose"], ["yes"]]
    left = tmp_path / "left.txt"
    left.write_text("\n".join([tree_to_brackets(left_branching(words[0])), "",
                               "(prices rose)", "yes"]) + "\n", encoding="utf-8")
    code, out, _ = _run(capsys, "ensemble", lm_run, left, "--input", text, "--source-weights",
                        "1,1")
    run_trees = _layer_trees(lm_run, words, 1, "official")
    expected = ensemble_trees([run_trees, [left_branching(words[0]), words[1], "yes"]])
    assert code == 0 and out.split("\n") == [tree_to_brackets(expected[0]), "",
                                             tree_to_brackets(expected[1]), "yes", ""]
    # the run reads the lines as parse does
    parsed = _run(capsys, "parse", lm_run, "--input", text)[1].split("\n")
    assert parsed[0] == tree_to_brackets(run_trees[0]) and parsed[2] == "(prices rose)"


def test_ensemble_errors_are_one_line(lm_run, mrg, tmp_path, capsys):
    golds = load_golds(mrg)
    short = tmp_path / "short.txt"
    short.write_text("\n".join(tree_to_brackets(right_branching(g.words)) for g in golds[:3]),
                     encoding="utf-8")
    assert _error(capsys, "ensemble", lm_run, short, "--treebank", mrg) == \
        f"{short}: 3 lines (one tree a line) for the 5 sentences of {mrg}"
    assert _error(capsys, "ensemble", lm_run, tmp_path / "nothing", "--treebank", mrg) == \
        f"{tmp_path / 'nothing'}: no such run directory, RUN:LAYER:RULE (rule official or " \
        f"split) or tree file"
    assert "2 weights for 1 sources" in _error(capsys, "ensemble", lm_run, "--treebank", mrg,
                                               "--source-weights", "1,2")
    assert _error(capsys, "ensemble", f"{lm_run}:5:official", "--treebank", mrg) == \
        f"{lm_run}:5:official: layer 5: this model's ON-LSTM layers are 1, 2"
    assert "--max-len needs --treebank" in _error(capsys, "ensemble", lm_run, "--input", short,
                                                  "--max-len", "3")


# ----------------------------------------------------------------------------- the API
def test_the_api_averages_the_trees_parse_gives(lm_run):
    lm = treelm.load(lm_run)
    sentences = ["the company said it would sell its stake", "prices rose sharply", "yes"]
    readings = [lm.parse(sentences, layer=k, style=r) for k in lm.layers
                for r in ("official", "split")]
    got = treelm.ensemble_trees(readings, weights=[2, 1, 1, 1])
    nested = [[_nested(t) for t in reading] for reading in readings]
    assert [_nested(t) for t in got] == ensemble_trees(nested, [2, 1, 1, 1])
    assert all(type(t).__name__ == "Tree" for t in got)
    assert treelm.ensemble_trees(nested) == ensemble_trees(nested)
    with pytest.raises(TreelmError, match="holds text"):
        treelm.ensemble_trees([["((the cat) sat)"]])
    with pytest.raises(AttributeError, match=r"^treelm.average_trees is now "
                       r"treelm.ensemble_trees$"):
        treelm.average_trees  # noqa: B018  (the old name, refused in one line)


def _nested(tree: object) -> object:
    """An nltk.Tree as a nested list (a one-word tree: the word)."""
    if isinstance(tree, str):
        return tree
    children = [_nested(c) for c in tree]
    return children[0] if len(children) == 1 else children
