import os
import sys
from pathlib import Path

import pytest
import torch
from slurm_cluster import slurm_cluster  # noqa: F401  (a one-node Slurm: slurm_cluster.py)

ROOT = Path(__file__).resolve().parents[1]
torch.set_num_threads(int(os.environ.get("TREELM_TEST_THREADS", "2")))
# `train.precision: auto` is fp32 in the suite (and its subprocesses) on every machine: on one
# with native bfloat16 it would be bf16, and comparisons of two code paths would differ in rounding
os.environ.setdefault("TREELM_AUTO_PRECISION", "fp32")


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


@pytest.fixture(scope="module")
def mrg(tmp_path_factory) -> Path:
    """The five-sentence treebank of the tracking tests (``test_train_eval_parse.MRG``) as a
    ``.mrg`` file."""
    from test_train_eval_parse import MRG

    path = tmp_path_factory.mktemp("treebank") / "mini.mrg"
    path.write_text(MRG, encoding="utf-8")
    return path


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


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory, lm_run, tagging_run) -> dict[str, Path]:
    """One tiny trained run of each inference task, under the names docs/api.md trains them as
    (``tiny-lm``, ``tiny-translation``, ``tiny-tagging``: links in one directory): the word-level
    ON-LSTM language model of ``lm_run``, a translation model with an ON-LSTM encoder
    (reverse letter sequences) and the slot-filling tagger of ``tagging_run``."""
    translation = _train(tmp_path_factory, "onlstm-translation", "configs/tiny-translation.yaml",
                         "model.cell=onlstm", "model.cell_options={chunk_size: 4}",
                         "train.epochs=1")
    d = tmp_path_factory.mktemp("tiny-runs")
    runs = {"lm": d / "tiny-lm", "translation": d / "tiny-translation",
            "tagging": d / "tiny-tagging"}
    for link, target in zip(runs.values(), (lm_run, translation, tagging_run)):
        link.symlink_to(target, target_is_directory=True)
    return runs


@pytest.fixture(scope="session")
def tiny_study(tmp_path_factory) -> Path:
    """``tests/test_study.py``'s tiny study (2 variants × 2 seeds, ``WHOLE`` tokens a run) run
    whole through the local launcher, and its seed 1 as a study of its own (``seeds: 1``, record
    ``seed1.json``) gathered from copies of those two runs, trained once: the folder of both."""
    import shutil

    from test_study import WHOLE, finish, write_study

    where = tmp_path_factory.mktemp("whole")
    finish(write_study(where, units=WHOLE))
    for run in ("paper-seed1", "symmetric-seed1"):          # done runs: gathered, not trained
        shutil.copytree(where / "runs" / run, where / "seed1-runs" / run)
    out, err = finish(write_study(where, name="seed1", units=WHOLE, seeds=1, runs="seed1-runs",
                                  record="seed1.json"))
    assert "submitted" not in err, err
    return where


@pytest.fixture(scope="session")
def tiny_study_seed1(tiny_study) -> Path:
    """The record of ``tiny_study``'s seed 1, a study of its own."""
    return tiny_study / "seed1.json"
