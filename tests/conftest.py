import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
torch.set_num_threads(int(os.environ.get("TREELM_TEST_THREADS", "2")))


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def treelm_cmd() -> list[str]:
    return [sys.executable, "-m", "treelm.cli"]


def _train(out: Path, config: str, *overrides: str) -> Path:
    from treelm.cli import main

    here = os.getcwd()
    os.chdir(ROOT)              # the tiny configs name their data relative to the repository
    try:
        assert main(["train", "--config", config, "--out", str(out), "--quiet",
                     *overrides]) == 0
    finally:
        os.chdir(here)
    return out


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory) -> dict[str, Path]:
    """One tiny trained run of each inference task, made once per test session: a word-level
    ON-LSTM language model (``lm``), a translation model with an ON-LSTM encoder
    (``translation``: reverse letter sequences) and a slot-filling tagger (``tagging``)."""
    d = tmp_path_factory.mktemp("tiny-runs")
    return {
        "lm": _train(d / "tiny-lm", "configs/tiny-lm.yaml"),
        "translation": _train(d / "tiny-translation", "configs/tiny-translation.yaml",
                              "model.cell=onlstm", "model.cell_options={chunk_size: 4}",
                              "train.epochs=1"),
        "tagging": _train(d / "tiny-tagging", "configs/tiny-tagging.yaml", "train.epochs=1"),
    }
