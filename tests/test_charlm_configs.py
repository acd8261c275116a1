"""The equal-size character-level configs: valid, about 1M parameters each, within ±5%."""

import importlib.util
from pathlib import Path

import pytest

from treelm.config import load_config
from treelm.models import build_model
from treelm.train.trainer import TrainConfig


@pytest.fixture(scope="module")
def counter():
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("count_params",
                                                  root / "benchmarks/count_params.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CELLS = ["lstm", "gru", "elman", "onlstm", "mrnn", "tensor"]


@pytest.mark.parametrize("vocab", [50, 51])
def test_char_configs_have_equal_parameter_counts(root, counter, vocab):
    paths = [root / f"configs/ptb-char-{c}-1m.yaml" for c in CELLS]
    counts = [counter.count(p, vocab) for p in paths]
    mean = sum(counts) / len(counts)
    assert all(abs(n / mean - 1) <= 0.05 for n in counts), counts
    assert all(0.95e6 <= n <= 1.05e6 for n in counts), counts
    assert counter.main(["--vocab", str(vocab)]) == 0


@pytest.mark.parametrize("cell", CELLS)
def test_char_config_is_valid(root, cell):
    cfg = load_config(root / f"configs/ptb-char-{cell}-1m.yaml")
    assert cfg["data"]["source"] == "ptb-char" and cfg["model"]["cell"] == cell
    tc = TrainConfig.from_dict(cfg["train"])
    assert tc.optimizer == "adam" and tc.clip > 0
    model = build_model(cfg["model"], 50)
    if cell in ("mrnn", "tensor"):
        assert model.onehot and model.rnn.layers[0].input_size == 50
    if cell == "mrnn":
        layer = model.rnn.layers[0]
        assert layer.factors == layer.hidden_size        # F = H


def test_general_char_lstm_config(root):
    cfg = load_config(root / "configs/ptb-char-lstm.yaml")
    TrainConfig.from_dict(cfg["train"])
    build_model(cfg["model"], 51)
