"""Chinese language models (issue 39): ``data.source: sinica`` and configs/sinica-onlstm.yaml, the
script a run's tokenizer saves, and Chinese input for a run trained on Traditional text (jieba's
segmentation, OpenCC's conversion: skipped where those packages are absent) through the verbs and
``treelm.load(...).parse`` alike, on a tiny run of the config over the synthetic sample of
tests/test_sinica.py."""

import json
import sys
from pathlib import Path

import pytest
from test_sinica import write_sample

from treelm.cli import main
from treelm.errors import ConfigError, TreelmError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def nltk_data(tmp_path_factory) -> Path:
    return write_sample(tmp_path_factory.mktemp("nltk_data"))


# ----------------------------------------------------------------------------- the LM source
def test_lm_source_and_config_checks():
    from treelm.config import load_config
    from treelm.data.corpus import LMData, text_script, tokenizer_kind

    spec = LMData.parse(load_config(ROOT / "configs" / "sinica-onlstm.yaml")["data"])
    assert spec.source == "sinica" and tokenizer_kind(spec) == "word"
    assert text_script(spec) == "taiwan" and text_script(LMData.parse({"source": "sinica"})) \
        == "taiwan"
    with pytest.raises(ConfigError, match="data.file"):
        LMData.parse({"source": "sinica", "file": "x.txt"})
    with pytest.raises(ConfigError, match="data.script"):
        LMData.parse({"source": "sinica", "script": "hanzi"})
    with pytest.raises(ConfigError, match="data.script"):
        LMData.parse({"source": "ptb", "script": "taiwan"})
    files = LMData.parse({"source": "files", "file": "zh.txt", "tokenizer": "jieba",
                          "script": "traditional"})
    assert text_script(files) == "traditional" and tokenizer_kind(files) == "jieba"


def test_tokenizer_saves_its_script():
    from treelm.text.tokenizers import make_tokenizer, tokenizer_from_spec

    tok = make_tokenizer("word", script="taiwan")
    assert tok.spec() == {"kind": "word", "script": "taiwan"}
    assert tokenizer_from_spec(tok.spec()).script == "taiwan"
    assert make_tokenizer("word").spec() == {"kind": "word"}       # other runs unchanged
    with pytest.raises(TreelmError, match="script"):
        make_tokenizer("word", script="hanzi")


# ----------------------------------------------------------------------------- Chinese input
def _reader(*known: str):
    from treelm.text.tokenizers import make_tokenizer

    tok = make_tokenizer("word", script="taiwan")
    tok.restrict(["<unk>", "<eos>", *known])
    return tok


VOCAB = ("蘋果", "的", "顏色", "是", "什麼", "愛", "真的", "需要", "勇氣", "台灣")


def test_known_words_are_never_converted_or_cut():
    tok = _reader(*VOCAB)
    # read as written, without opencc or jieba: every word is known, or not Chinese
    assert tok.read_line("蘋果 的 顏色 是 什麼") == ["蘋果", "的", "顏色", "是", "什麼"]
    assert tok.read_line("台灣 abc 12 １２") == ["台灣", "abc", "12", "１２"]
    with pytest.raises(TreelmError, match="segment must be"):
        tok.read_line("台灣", "maybe")


def test_conversion_to_the_runs_script():
    pytest.importorskip("opencc")
    tok = _reader(*VOCAB)
    # Simplified words it lacks are converted (OpenCC s2tw); 台灣 stays (s2tw alone makes 臺灣)
    assert tok.read_line("苹果 的 颜色 是 什么", "none") == ["蘋果", "的", "顏色", "是", "什麼"]
    assert tok.read_line("台灣 爱", "none") == ["台灣", "愛"]
    from treelm.text.chinese import converter

    assert converter("taiwan")("为了") == "為了" and converter("traditional")("为了") == "爲了"
    assert converter("simplified")("顏色") == "颜色"


def test_jieba_segmentation_then_conversion():
    pytest.importorskip("opencc")
    pytest.importorskip("jieba")
    tok = _reader(*VOCAB)
    assert tok.read_line("苹果的颜色是什么") == ["蘋果", "的", "顏色", "是", "什麼"]
    assert tok.read_line("爱真的需要勇气") == ["愛", "真的", "需要", "勇氣"]
    # Traditional input is cut through its Simplified form and keeps its characters
    assert tok.read_line("愛真的需要勇氣") == ["愛", "真的", "需要", "勇氣"]
    assert tok.read_line("苹果的颜色是什么", "none") == ["蘋果的顏色是什麼"]     # not cut
    assert tok.read_line("苹果的颜色是什么", "jieba") == ["蘋果", "的", "顏色", "是", "什麼"]


def test_missing_packages_are_one_line_errors(monkeypatch):
    tok = _reader(*VOCAB)
    monkeypatch.setitem(sys.modules, "opencc", None)
    with pytest.raises(TreelmError, match=r"opencc-py.*pip install 'treelm\[zh\]'"):
        tok.read_line("苹果", "none")
    monkeypatch.setitem(sys.modules, "jieba", None)
    with pytest.raises(TreelmError, match=r"jieba.*pip install"):
        tok.read_line("苹果的", "jieba")


# ----------------------------------------------------------------------------- a tiny run
TINY = ["model.sizes=[16,16,16]", "model.cell_options.chunk_size=4", "model.cell_options.impl=cpu",
        "train.epochs=1", "train.max_minutes=null", "train.lr_schedule=constant",
        "train.batch_size=4", "train.eval_batch_size=4", "train.bptt=12", "train.threads=1"]


@pytest.fixture(scope="module")
def sinica_run(tmp_path_factory, nltk_data) -> Path:
    """configs/sinica-onlstm.yaml at a tiny size on the synthetic sample (one epoch), with its
    train.eval_parse on sinica-dev."""
    run = tmp_path_factory.mktemp("sinica") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NLTK_DATA", str(nltk_data))
        assert main(["train", "--config", str(ROOT / "configs" / "sinica-onlstm.yaml"),
                     "--out", str(run), "--quiet", *TINY]) == 0
    return run


def test_tiny_run_trains_on_the_lm_parts_and_tracks_dev_trees(sinica_run):
    from treelm.rundir.files import read_metrics

    spec = json.loads((sinica_run / "tokenizer.json").read_text(encoding="utf-8"))
    assert spec == {"kind": "word", "script": "taiwan"}
    valid = read_metrics(sinica_run, "valid")
    assert valid and any(k.startswith("parse_f1/official/L") for k in valid[-1])


def test_su_sentences_parse_through_verbs_and_api_alike(sinica_run, nltk_data, monkeypatch,
                                                        capsys):
    pytest.importorskip("opencc")
    pytest.importorskip("jieba")
    import treelm

    monkeypatch.setenv("NLTK_DATA", str(nltk_data))
    sentences = ["苹果的颜色是什么", "爱真的需要勇气"]
    outs = []
    for s in sentences:
        assert main(["parse", str(sinica_run), s, "--format", "json"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert [o["tokens"] for o in outs] == [["蘋果", "的", "顏色", "是", "什麼"],
                                          ["愛", "真的", "需要", "勇氣"]]
    assert all(o["unknown"] == [] for o in outs)
    model = treelm.load(sinica_run)
    trees = model.parse(sentences)
    assert [t.leaves() for t in trees] == [o["tokens"] for o in outs]
    assert main(["parse", str(sinica_run), sentences[0], "--format", "brackets"]) == 0
    from treelm.syntax.trees import tree_to_brackets

    brackets = capsys.readouterr().out.strip()
    nested = model.levels(sentences[0]).tree(model.default_layer, "official")
    assert brackets == tree_to_brackets(nested)


def test_unknown_word_report_says_the_input_was_converted(sinica_run, capsys):
    pytest.importorskip("opencc")
    pytest.importorskip("jieba")
    import treelm

    assert main(["parse", str(sinica_run), "苹果 的 鐽", "--segment", "none"]) == 0
    err = capsys.readouterr().err
    assert "'鐽'" in err and "OpenCC s2tw" in err
    assert main(["parse", str(sinica_run), "苹果 的 鐽", "--unk", "error"]) == 2
    assert "OpenCC s2tw" in capsys.readouterr().err
    with pytest.raises(TreelmError, match=r"'鐽' .*OpenCC s2tw.*unk='map'"):
        treelm.load(sinica_run).parse(["苹果 的 鐽"], unk="error")


def test_eval_parse_of_the_tiny_run_on_sinica_test(sinica_run, nltk_data, monkeypatch, capsys):
    monkeypatch.setenv("NLTK_DATA", str(nltk_data))
    assert main(["eval-parse", str(sinica_run), "--treebank", "sinica-test", "--format",
                 "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["n_sentences"] == 80 and set(rep["layers"]) == {"1", "2"}
    assert rep["oov_words"] == 0          # the dev/test words all occur in the LM's text here
