"""``benchmarks/trees_zh.py`` (issue 39): the tree study of benchmarks/trees.py on the Sinica
treebanks with Su Jianlin's sentences parsed by each run, end to end on the synthetic sample of
tests/test_sinica.py and a tiny model; the page ``docs/syntax-zh.md`` from that record, from a
synthetic three-seed one (target met, not met), and without any record."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import ModuleType

import pytest
from test_sinica import write_sample
from test_trees_benchmark import _load

ROOT = Path(__file__).resolve().parents[1]
TINY = ["model.sizes=[16,16,16]", "model.cell_options.chunk_size=4",
        "model.cell_options.impl=cpu", "train.batch_size=4", "train.eval_batch_size=4",
        "train.bptt=12", "train.threads=1"]


@pytest.fixture(scope="module")
def zh() -> ModuleType:
    return _load("trees_zh")


@pytest.fixture(scope="module")
def study(tmp_path_factory, zh) -> tuple[Path, dict]:
    """A one-seed study of the symmetric gate on the synthetic sample; (record path, record)."""
    pytest.importorskip("jieba")
    pytest.importorskip("opencc")
    root = tmp_path_factory.mktemp("trees_zh")
    out = root / "results" / "trees-zh-20260101.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NLTK_DATA", str(write_sample(root / "nltk_data")))
        zh.run_study(["--minutes", "0.03", "--seeds", "1", "--gates", "symmetric",
                      "--runs", str(root / "runs"), "--out", str(out), "--baseline-seeds", "2",
                      *TINY])
    return out, json.loads(out.read_text(encoding="utf-8"))


def test_study_runs_on_the_sinica_treebanks_with_su_sentences(study, zh):
    _, rec = study
    assert rec["study"]["config"] == "configs/sinica-onlstm.yaml"
    assert (rec["study"]["dev"], rec["study"]["test"]) == ("sinica-dev", "sinica-test")
    assert rec["script"] == "benchmarks/trees_zh.py"
    assert rec["command"].startswith("python benchmarks/trees_zh.py --minutes 0.03")
    assert rec["baselines"]["test"]["n_sentences"] == 80 and list(rec["runs"]) == ["symmetric/1"]
    su = rec["su"]["runs"]["symmetric/1"]
    assert rec["su"]["sentences"] == ["苹果的颜色是什么", "爱真的需要勇气"]
    # jieba's words, converted to the treebank's characters, all in the tiny run's vocabulary
    assert su["tokens"] == [["蘋果", "的", "顏色", "是", "什麼"], ["愛", "真的", "需要", "勇氣"]]
    assert su["unknown"] == [[], []]
    assert set(su["trees"]) == {"official", "split"} and set(su["trees"]["official"]) == {"1", "2"}
    import treelm

    model = treelm.load(rec["runs"]["symmetric/1"]["run_dir"])
    assert su["trees"]["official"]["1"][0] == model.levels("苹果的颜色是什么").tree(1, "official")


def test_defaults_and_record_of_a_rerun(zh, tmp_path):
    argv, out = zh.study_argv(["--minutes", "5", "--runs", str(tmp_path / "r")])
    assert argv[argv.index("--config") + 1] == "configs/sinica-onlstm.yaml"
    assert argv[argv.index("--dev") + 1] == "sinica-dev"
    assert argv[argv.index("--test") + 1] == "sinica-test"
    assert out.name.startswith("trees-zh-") and argv[argv.index("--out") + 1] == str(out)
    argv, out = zh.study_argv(["--minutes", "5", "--dev=nltk-dev", "--out", "x.json"])
    assert "--dev" not in argv and out == Path("x.json") and argv.count("--out") == 1
    results = tmp_path / "results"
    results.mkdir()
    (results / "trees-zh-20260102.json").write_text(json.dumps({"runs_dir": str(
        (tmp_path / "r").resolve())}), encoding="utf-8")
    assert zh.find_record(tmp_path / "r", results) == results / "trees-zh-20260102.json"


def test_page_from_the_tiny_record(study, zh, tmp_path):
    path, rec = study
    text = zh.render(path, rec, tmp_path / "syntax-zh.md", results=tmp_path)
    assert "## Result" in text and "sinica-test" in text
    assert "Strongest trivial baseline on `sinica-test`:" in text
    assert "### 苹果的颜色是什么" in text and "蘋果 的 顏色 是 什麼" in text
    assert "No English record" in text              # no trees-<date>.json in tmp_path
    assert (tmp_path / "img" / "syntax-zh-f1.png").exists()


def _synthetic(rec: dict, trees: ModuleType, f1s: tuple[float, ...]) -> dict:
    """Three seeds of the tiny record's run with test F1s ``f1s`` at layer 2 (dev prefers it)."""
    rec = copy.deepcopy(rec)
    base = rec["runs"]["symmetric/1"]
    runs, su = {}, {}
    for seed, f1 in zip((1, 2, 3), f1s):
        r = copy.deepcopy(base)
        r["seed"] = seed
        for rule in ("official", "split"):
            for part in ("dev", "test", "test_10"):
                for k in r["scores"][rule][part]:
                    r["scores"][rule][part][k] = {"sentence_f1": f1 - 0.1 * (k != "2"),
                                                  "corpus_f1": f1 - 0.05}
        runs[f"symmetric/{seed}"] = r
        su[f"symmetric/{seed}"] = rec["su"]["runs"]["symmetric/1"]
    rec.update(runs=runs, seeds=[1, 2, 3], su={**rec["su"], "runs": su})
    test = rec["baselines"]["test"]["baselines"]
    for name, f1 in (("balanced", 0.30), ("right_branching", 0.25), ("left_branching", 0.2)):
        test[name]["sentence_f1"] = f1
    test["random"]["sentence_f1"]["mean"] = 0.22
    rec["summary"] = trees.summarize(rec["runs"], rec["baselines"])
    return rec


def test_page_says_met_or_not_against_the_strongest_baseline(study, zh, tmp_path):
    trees = _load("trees")
    path, rec = study
    met = _synthetic(rec, trees, (0.33, 0.35, 0.37))
    text = zh.render(path, met, tmp_path / "syntax-zh.md", results=tmp_path)
    assert "gives **35.0 ± 2.0** sentence F1" in text
    assert "balanced trees 30.0 (+5.0 points)" in text and "is **met**" in text
    assert "| symmetric master input gate | official | 2 | 3 |" in text
    assert text.count("Seed ") >= 6                 # each seed's tree of each sentence
    below = _synthetic(rec, trees, (0.26, 0.28, 0.30))
    text = zh.render(path, below, tmp_path / "syntax-zh.md", results=tmp_path)
    assert "is **not met**" in text and "The mean stays below balanced trees" in text
    assert "(−2.0 points)" in text
    # English beside Chinese when an English record exists
    english = copy.deepcopy(met)
    english["study"].update(test="nltk-test", config="configs/ptb-onlstm-cpu.yaml")
    (tmp_path / "trees-20260101.json").write_text(json.dumps(english), encoding="utf-8")
    text = zh.render(path, met, tmp_path / "syntax-zh.md", results=tmp_path)
    assert "| English | `nltk-test` |" in text and "| Chinese | `sinica-test` |" in text
    assert ("English: `" in text and "no record of the tree config's study "
            "(`configs/ptb-onlstm-trees.yaml`) yet" in text)


def test_side_by_side_prefers_the_tree_configs_english_study(study, zh, tmp_path):
    """The English row reads the newest record of configs/ptb-onlstm-trees.yaml's study even
    when a record of another config is newer; without one, the newest English record."""
    path, rec = study
    cpu, tree = copy.deepcopy(rec), copy.deepcopy(rec)
    cpu["study"].update(test="nltk-test", config="configs/ptb-onlstm-cpu.yaml")
    tree["study"].update(test="nltk-test", config=zh.TREE_CONFIG)
    (tmp_path / "trees-20260105.json").write_text(json.dumps(cpu), encoding="utf-8")
    found = zh.english_record(tmp_path)
    assert found[0].name == "trees-20260105.json" and "no record of the tree config" in found[2]
    (tmp_path / "trees-20260103.json").write_text(json.dumps(tree), encoding="utf-8")
    (tmp_path / "trees-screen-20260106.json").write_text("{}", encoding="utf-8")
    found = zh.english_record(tmp_path)
    assert found[0].name == "trees-20260103.json"
    text = zh.render(path, rec, tmp_path / "syntax-zh.md", results=tmp_path)
    assert "| English | `nltk-test` | `configs/ptb-onlstm-trees.yaml` |" in text
    assert "the newest record of the tree config's study" in text
    assert zh.english_record(tmp_path / "none") is None


def test_su_pictures_linked_whatever_the_font(study, zh, tmp_path, monkeypatch, capsys):
    """The page's text does not depend on the machine's fonts: Su's pictures are linked and
    captioned with the gate, seed, layer and rule they show; drawn only where a CJK font is."""
    path, rec = study
    monkeypatch.setattr(zh, "cjk_font", lambda: None)
    text = zh.render(path, rec, tmp_path / "a" / "syntax-zh.md", results=tmp_path)
    assert "no CJK font" in capsys.readouterr().err
    assert not (tmp_path / "a" / "img" / "syntax-zh-su1.png").exists()
    layer = rec["summary"]["configs"]["symmetric"]["rules"]["official"]["layer"]
    shown = f"symmetric master input gate, seed 1, layer {layer} (chosen on dev), official rule"
    assert f"![苹果的颜色是什么: {shown}](img/syntax-zh-su1.png)" in text
    assert f"Drawn: the tree of the {shown}." in text
    monkeypatch.setattr(zh, "cjk_font", lambda: "DejaVu Sans")
    assert zh.render(path, rec, tmp_path / "b" / "syntax-zh.md", results=tmp_path) == text
    assert (tmp_path / "b" / "img" / "syntax-zh-su2.png").exists()


def test_page_without_a_record_says_so(zh, tmp_path):
    doc = tmp_path / "syntax-zh.md"
    zh.main(results=tmp_path, doc=doc)
    text = doc.read_text(encoding="utf-8")
    assert "**No record exists yet**" in text and "benchmarks/trees_zh.py --seeds 3" in text


def test_committed_page_is_what_the_newest_record_renders(zh, tmp_path):
    found = zh.newest()
    text = zh.render(*(found or (None, None)), tmp_path / "syntax-zh.md")
    assert text == (ROOT / "docs" / "syntax-zh.md").read_text(encoding="utf-8")


def test_a_token_budget_passes_through(zh):
    """``--tokens`` and ``--eval-every-tokens`` reach benchmarks/trees.py as given."""
    trees = _load("trees")
    argv, _ = zh.study_argv(["--tokens", "2000000", "--eval-every-tokens", "400000",
                             "--out", "x.json"])
    args = trees.parse_args(argv)
    assert (args.tokens, args.eval_every_tokens, args.minutes) == (2000000, 400000, None)
    cmd = trees.train_command(args, Path("runs/x/paper-seed1"), "paper", 1)
    assert "train.max_units=2000000" in cmd and "train.max_minutes=null" in cmd
