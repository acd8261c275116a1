"""The equal-size character-level configs: valid, about 1M or 5M parameters each, within ±5%."""


import pytest
import torch
from benchmark_scripts import load_benchmark

from treelm.cells.lstm import LSTM
from treelm.config import load_config
from treelm.models import build_model
from treelm.train.builders import read_config


@pytest.fixture(scope="module")
def counter():
    return load_benchmark("count_params")


CELLS = ["lstm", "gru", "elman", "onlstm", "mrnn", "tensor"]


SIZES = {"1m": 1e6, "5m": 5e6}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("vocab", [50, 51])
def test_char_configs_have_equal_parameter_counts(root, counter, vocab, size):
    paths = [root / f"configs/ptb-char-{c}-{size}.yaml" for c in CELLS]
    counts = [counter.count(p, vocab) for p in paths]
    mean = sum(counts) / len(counts)
    assert all(abs(n / mean - 1) <= 0.05 for n in counts), counts
    target = SIZES[size]
    assert all(0.95 * target <= n <= 1.05 * target for n in counts), counts
    assert counter.main(["--vocab", str(vocab), "--size", size]) == 0


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("cell", CELLS)
def test_char_config_is_valid(root, cell, size):
    cfg = load_config(root / f"configs/ptb-char-{cell}-{size}.yaml")
    assert cfg["data"]["source"] == "ptb-char" and cfg["model"]["cell"] == cell
    tc, _ = read_config(cfg)
    assert tc.optimizer == "adam" and tc.clip > 0
    model = build_model(cfg["model"], vocab_size=50)
    if cell in ("mrnn", "tensor"):
        assert model.onehot and model.layer_cells()[0].input_size == 50
    if cell == "mrnn":
        layer = model.layer_cells()[0]
        assert layer.factors == layer.hidden_size        # F = H


def test_general_char_lstm_config(root):
    """The AWD-LSTM character recipe its header quotes: three LSTM layers 1000-1000-200 on a
    200-dimensional tied embedding, Adam at 2e-3, clip 0.25, BPTT 150, batches of 128."""
    cfg = load_config(root / "configs/ptb-char-lstm.yaml")
    tc, config = read_config(cfg)
    assert config.data.source == "ptb-char" and config.task.name == "lm"
    assert (tc.optimizer, tc.lr, tc.clip) == ("adam", 2e-3, 0.25)
    assert (config.options.bptt, config.options.batch_size) == (150, 128)
    model = build_model(cfg["model"], vocab_size=51)
    cells = model.layer_cells()
    assert [c.hidden_size for c in cells] == [1000, 1000, 200]
    assert all(isinstance(c, LSTM) for c in cells), [type(c) for c in cells]
    assert model.head.weight is model.embedding.weight          # tie_weights
    h = model.eval().features(torch.randint(0, 51, (7, 2))).out
    assert h.shape == (7, 2, 200) and model.logits(h).shape == (7, 2, 51)


def test_text_char_config_trains_on_a_user_file(root, tmp_path, capsys):
    """configs/text-char-lstm.yaml on any text file: train, bits per char, generate."""
    import json

    from treelm.cli import main

    out = tmp_path / "run"
    rc = main(["train", "--config", str(root / "configs/text-char-lstm.yaml"), "--out", str(out),
               f"data.file={root / 'tests/data/tiny.txt'}", "model.sizes=[8,24]",
               "train.epochs=1", "train.bptt=30", "train.batch_size=8", "train.threads=1",
               "train.eval_batch_size=8", "train.test_batch_size=8"])
    assert rc == 0
    capsys.readouterr()
    assert main(["eval", str(out), "--split", "test"]) == 0
    ev = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0 < ev["bpc"] < 8                      # log2 of the alphabet bounds a trained model
    assert main(["generate", str(out), "--prompt", "the ", "--length", "40", "--seed", "1"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("the ") and len(text.replace("\n", "")) >= 40
    rc = main(["train", "--config", str(root / "configs/text-char-lstm.yaml"), "--out",
               str(tmp_path / "missing"), f"data.file={tmp_path / 'nope.txt'}"])
    assert rc == 2 and "nope.txt" in capsys.readouterr().err
