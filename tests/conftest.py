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
