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


def _train(tmp_path_factory, name: str, config: str, *overrides: str) -> Path:
    """A tiny run of ``config`` trained once per test session (the cwd is the repository root
    while it trains, as the configs name their data relative to it)."""
    from treelm.cli import main

    run = tmp_path_factory.mktemp(name) / "run"
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        assert main(["train", "--config", config, "--out", str(run), "--quiet",
                     *overrides]) == 0
    finally:
        os.chdir(here)
    return run


@pytest.fixture(scope="session")
def tagging_run(tmp_path_factory) -> Path:
    """configs/tiny-tagging.yaml trained (seconds)."""
    return _train(tmp_path_factory, "tagging", "configs/tiny-tagging.yaml")


@pytest.fixture(scope="session")
def logic_run(tmp_path_factory) -> Path:
    """configs/tiny-logic.yaml trained for 2 epochs."""
    return _train(tmp_path_factory, "logic", "configs/tiny-logic.yaml", "train.epochs=2")


@pytest.fixture(scope="session")
def bpe_translation_run(tmp_path_factory) -> Path:
    """configs/tiny-translation-bpe.yaml trained (German -> English, joint BPE)."""
    return _train(tmp_path_factory, "bpe", "configs/tiny-translation-bpe.yaml")


@pytest.fixture(scope="session")
def lm_run(tmp_path_factory) -> Path:
    """configs/tiny-lm.yaml trained for 1 epoch (a word-level ON-LSTM)."""
    return _train(tmp_path_factory, "lm", "configs/tiny-lm.yaml", "train.epochs=1")
