"""``treelm parse / eval-parse / plot / plot-tree`` on a tiny trained run and a small .mrg."""

import io
import json
import sys
import types
from pathlib import Path

import pytest

from treelm.cli import main
from treelm.data.treebank import load_treebank
from treelm.run import load_run
from treelm.syntax.baselines import DEFAULT_BASELINES, evaluate_baselines, left_branching
from treelm.syntax.levels import sentence_levels
from treelm.syntax.metrics import evaluate
from treelm.syntax.report import format_table, parsing_report
from treelm.syntax.trees import (
    ascii_tree,
    build_tree,
    read_bracket_tree,
    tree_leaves,
    tree_to_brackets,
)

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "data" / "tiny.txt"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

MRG = """\
( (S (NP-SBJ (DT The) (NN company) )
     (VP (VBD said)
         (SBAR (-NONE- 0)
           (S (NP-SBJ (PRP it) )
              (VP (MD would) (VP (VB sell) (NP (DT the) (NNS shares) ))))))
     (. .) ))
( (S (NP-SBJ (DT the) (NN market) ) (VP (VBD fell) (PP (IN in) (NP (JJ heavy) (NN trading) )))
     (. .) ))
( (S (NP-SBJ (NNS Shares) ) (VP (VBD rose) (NP (CD 3) (NN %) )) (. .) ))
( (NP (NN yesterday) (. .) ))
( (S (NP-SBJ (DT the) (JJ big) (NN company) ) (ADVP (RB also) )
     (VP (VBD said) (SBAR (IN that) (S (NP-SBJ (PRP it) ) (VP (MD would)
       (VP (VB buy) (NP (DT the) (JJ small) (NN bank) (NNS shares) )))))) (. .) ))
"""


def _train(run: Path, *overrides: str) -> None:
    assert main(["train", "--config", str(ROOT / "configs" / "tiny-lm.yaml"), "--out", str(run),
                 "--quiet", f"data.file={TINY}", "train.epochs=1", *overrides]) == 0


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("cli") / "onlstm"
    _train(run)
    return run


@pytest.fixture
def mrg(tmp_path) -> Path:
    path = tmp_path / "mini.mrg"
    path.write_text(MRG, encoding="utf-8")
    return path


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _error(capsys, *argv: str) -> str:
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("treelm: error: "), err
    return lines[0]


# ----------------------------------------------------------------------------- parse
def test_parse_formats(run_dir, capsys):
    r = load_run(run_dir)
    words = "the company said it would sell the shares".split()
    lv = sentence_levels(r.model, r.vocab, [words])[0]
    tree = build_tree(lv.df[0], words)          # 2 layers: the default is layer 1

    code, out, _ = _run(capsys, "parse", run_dir, " ".join(words))
    assert code == 0 and out == tree_to_brackets(tree) + "\n"

    code, out, _ = _run(capsys, "parse", run_dir, " ".join(words), "--format", "ascii")
    assert out == ascii_tree(tree) + "\n\n"

    code, out, _ = _run(capsys, "parse", run_dir, " ".join(words), "--format", "json",
                        "--layer", "all")
    obj = json.loads(out)
    assert obj["tokens"] == words and obj["unknown"] == []
    assert [p["layer"] for p in obj["parses"]] == [1, 2]
    for p in obj["parses"]:
        assert p["tree"] == json.loads(json.dumps(lv.tree(p["layer"])))
        assert len(p["df"]) == len(p["di"]) == len(words)
        assert p["df"] == pytest.approx(lv.df[p["layer"] - 1].tolist(), abs=1e-6)

    code, out, _ = _run(capsys, "parse", run_dir, " ".join(words), "--layer", "all",
                        "--style", "split")
    assert out.splitlines() == [f"layer {k}\t{tree_to_brackets(lv.tree(k, 'split'))}"
                                for k in (1, 2)]


def test_parse_file_and_stdin_keep_lines(run_dir, tmp_path, capsys, monkeypatch):
    lines = ["the company said", "", "it would sell the shares", "shares"]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, _ = _run(capsys, "parse", run_dir, "--input", src, "--batch-size", "2")
    got = out.splitlines()
    assert code == 0 and len(got) == 4 and got[1] == "" and got[3] == "shares"
    for text, line in zip(lines, got):
        if text:
            assert tree_leaves(read_bracket_tree(line)) == text.split()
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    code, out2, _ = _run(capsys, "parse", run_dir, "-")
    assert out2 == out
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    code, out3, _ = _run(capsys, "parse", run_dir, "--format", "json")
    objs = [json.loads(x) for x in out3.splitlines()]
    assert [o["tokens"] for o in objs] == [t.split() for t in lines]


def test_parse_unknown_words_and_normalize(run_dir, capsys):
    code, out, err = _run(capsys, "parse", run_dir, "the qqqzzz company", "--format", "json")
    assert json.loads(out)["unknown"] == [1] and "qqqzzz" in err and "<unk>" in err
    assert "qqqzzz" in _error(capsys, "parse", run_dir, "the qqqzzz company", "--unk", "error")
    code, out, _ = _run(capsys, "parse", run_dir, "The Company said 1990", "--normalize",
                        "--format", "json")
    assert json.loads(out)["tokens"] == ["the", "company", "said", "N"]


def test_parse_segment_jieba(run_dir, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "jieba", None)             # not installed
    msg = _error(capsys, "parse", run_dir, "thecompany", "--segment", "jieba")
    assert "jieba" in msg and "pip install" in msg
    fake = types.ModuleType("jieba")
    fake.lcut = lambda text: ["the", " ", "company", "said"]   # whitespace tokens are dropped
    fake.setLogLevel = lambda level: None
    monkeypatch.setitem(sys.modules, "jieba", fake)
    code, out, _ = _run(capsys, "parse", run_dir, "thecompanysaid", "--segment", "jieba",
                        "--format", "json")
    assert code == 0 and json.loads(out)["tokens"] == ["the", "company", "said"]


# ----------------------------------------------------------------------------- eval-parse
def test_eval_parse_json_matches_direct_metrics(run_dir, mrg, capsys):
    code, out, _ = _run(capsys, "eval-parse", run_dir, "--treebank", mrg, "--format", "json")
    assert code == 0
    rep = json.loads(out)
    golds = load_treebank(mrg)
    assert rep["n_sentences"] == len(golds) == 5
    direct = json.loads(json.dumps(evaluate_baselines(golds, seeds=range(5))))
    for name in ("left_branching", "right_branching", "balanced"):
        assert rep["baselines"][name] == direct[name]
    assert rep["baselines"]["left_branching"] == json.loads(json.dumps(
        evaluate([left_branching(g.words) for g in golds], golds)))
    for key in ("seeds", "sentence_f1", "corpus_f1"):
        assert rep["baselines"]["random"][key] == direct["random"][key]
    r = load_run(run_dir)
    levels = sentence_levels(r.model, r.vocab, [g.words for g in golds])
    for k in (1, 2):
        trees = [build_tree(lv.df[k - 1], g.words) for lv, g in zip(levels, golds)]
        assert rep["layers"][str(k)] == json.loads(json.dumps(evaluate(trees, golds)))
    best = max((1, 2), key=lambda k: rep["layers"][str(k)]["sentence_f1"])
    assert rep["best_layer"] == best
    assert rep["oov_words"] == sum(len(lv.unknown) for lv in levels)
    assert rep["gold"]["label_counts"]["NP"] == 7


def test_eval_parse_prints_the_library_report(run_dir, mrg, capsys):
    code, out, _ = _run(capsys, "eval-parse", run_dir, "--treebank", mrg, "--format", "json")
    assert code == 0
    report = parsing_report(str(mrg), run=load_run(run_dir), checkpoint="best",
                            baselines=[*DEFAULT_BASELINES, "random_levels_official"])
    assert json.loads(out) == json.loads(json.dumps(report))
    assert report["run"] == str(run_dir) and list(report["layers"]) == ["1", "2"]
    code, out, _ = _run(capsys, "eval-parse", run_dir, "--treebank", mrg)
    assert out == format_table(report) + "\n"


def test_eval_parse_table_max_len_and_layer(run_dir, mrg, capsys):
    code, out, _ = _run(capsys, "eval-parse", run_dir, "--treebank", mrg, "--max-len", "10",
                        "--layer", "2")
    assert code == 0
    assert "4 sentences of <= 10 words" in out
    for row in ("random trees (5 seeds)", "balanced trees", "left branching",
                "right branching", "ON-LSTM layer 2", "gold trees"):
        assert row in out
    assert "ON-LSTM layer 1" not in out
    header = next(line for line in out.splitlines() if "sent F1" in line)
    assert header.split()[:4] == ["sent", "F1", "corpus", "F1"] and "NP" in header


def test_eval_parse_baseline_without_model(mrg, capsys):
    code, out, _ = _run(capsys, "eval-parse", "--baseline", "left", "--baseline", "random",
                        "--treebank", mrg, "--format", "json", "--seeds", "3")
    rep = json.loads(out)
    assert code == 0 and rep["run"] is None and rep["layers"] == {}
    assert list(rep["baselines"]) == ["random", "left_branching"]
    golds = load_treebank(mrg)
    direct = evaluate_baselines(golds, seeds=range(3))
    assert rep["baselines"]["random"]["sentence_f1"] == direct["random"]["sentence_f1"]
    assert rep["baselines"]["left_branching"]["corpus_f1"] == direct["left_branching"]["corpus_f1"]
    code, out, _ = _run(capsys, "eval-parse", "--baseline", "right", "--treebank", mrg)
    assert "right branching" in out and "left branching" not in out


# ----------------------------------------------------------------------------- plots
def test_plot_and_plot_tree_write_png(run_dir, tmp_path, capsys, monkeypatch):
    png = tmp_path / "levels.png"
    assert _run(capsys, "plot", run_dir, "the company said it would sell", "-o", png)[0] == 0
    assert png.read_bytes()[:8] == PNG_MAGIC
    cases = {
        "a.png": ["((the cat) (sat (on (the mat))))"],
        "b.png": ["--format", "json", '[["the","cat"],["sat","down"]]'],
        "c.png": ["--run", run_dir, "the company said it", "--layer", "2"],
    }
    for name, argv in cases.items():
        assert _run(capsys, "plot-tree", *argv, "-o", tmp_path / name)[0] == 0
        assert (tmp_path / name).read_bytes()[:8] == PNG_MAGIC
    for i, options in enumerate([["--scale", "shared", "--gate", "input", "--no-tree"],
                                 ["--title", "", "--style", "split", "--layer", "1"]]):
        png = tmp_path / f"levels{i}.png"
        assert _run(capsys, "plot", run_dir, "the company said", "-o", png, *options)[0] == 0
        assert png.read_bytes()[:8] == PNG_MAGIC
    monkeypatch.setattr(sys, "stdin", io.StringIO("((a b) c)\n"))
    assert _run(capsys, "plot-tree", "-o", tmp_path / "d.png")[0] == 0
    assert (tmp_path / "d.png").read_bytes()[:8] == PNG_MAGIC


# ----------------------------------------------------------------------------- errors
def test_errors_are_one_line(run_dir, mrg, tmp_path, capsys):
    assert "no such run directory" in _error(capsys, "parse", tmp_path / "nope", "a b")
    bad = tmp_path / "bad.mrg"
    bad.write_text("( (S (NP (DT the) (NN cat))) )\n\n( (S (NP (DT a) (NN dog))) ) )\n")
    msg = _error(capsys, "eval-parse", run_dir, "--treebank", bad)
    assert f"{bad}:3:" in msg and "malformed tree" in msg
    assert "no such file" in _error(capsys, "eval-parse", "--baseline", "left", "--treebank",
                                    tmp_path / "missing.mrg")
    assert "needs RUN_DIR" in _error(capsys, "eval-parse", "--treebank", mrg)
    punct = tmp_path / "punct.mrg"
    punct.write_text("( (S (. .)) )\n")
    assert "no sentences" in _error(capsys, "eval-parse", run_dir, "--treebank", punct)
    assert "layers are 1, 2" in _error(capsys, "parse", run_dir, "a b", "--layer", "3")
    assert "empty" in _error(capsys, "parse", run_dir, "   ")
    assert "malformed tree" in _error(capsys, "plot-tree", "((a b)", "-o", tmp_path / "x.png")
    assert "malformed JSON" in _error(capsys, "plot-tree", "--format", "json", "[[]]", "-o",
                                      tmp_path / "x.png")
    # the form of --layer (a number from 1, or all where it can be) is the parser's to check:
    # a usage error naming the flag, before the run is opened
    for argv, says in [(("parse", run_dir, "a b", "--layer", "two"),
                        "argument --layer: must be a layer number or 'all', got two"),
                       (("parse", run_dir, "a b", "--layer", "0"),
                        "argument --layer: layers are numbered from 1, got 0"),
                       (("plot", run_dir, "a b", "--layer", "all", "-o", tmp_path / "x.png"),
                        "argument --layer: 'all' is not possible here")]:
        with pytest.raises(SystemExit) as e:
            main([str(a) for a in argv])
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and says in err[0], err


def test_run_without_onlstm_layers(tmp_path, capsys):
    run = tmp_path / "lstm"
    _train(run, "model.cell=lstm", "model.cell_options={}")
    capsys.readouterr()                 # train's result JSON (printed under --quiet too)
    msg = _error(capsys, "parse", run, "the company")
    assert msg == ("treelm: error: this run's model has no ON-LSTM layers; tree induction "
                   "needs master gates")
    assert "no ON-LSTM layers" in _error(capsys, "plot", run, "a b", "-o", tmp_path / "x.png")
