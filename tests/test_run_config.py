"""The config is read once (``treelm.tasks.read_run_config``): every section is checked before any
data is read, and tasks receive the checked values, not the raw dict."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import treelm.data.corpus
from treelm.cli import main
from treelm.data.corpus import LMData
from treelm.errors import ConfigError
from treelm.tasks import TASKS, read_run_config
from treelm.train.builders import read_config

ROOT = Path(__file__).resolve().parents[1]
TINY = {"lm": "tiny-lm", "tagging": "tiny-tagging", "logic": "tiny-logic",
        "translation": "tiny-translation", "listops": "tiny-listops"}


def _cfg(name: str) -> dict:
    return yaml.safe_load((ROOT / "configs" / f"{name}.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("task", sorted(TINY))
def test_each_tiny_config_reads_into_checked_values(task):
    tc, config = read_config(_cfg(TINY[task]))
    assert config.task is TASKS[task]
    assert isinstance(config.data, TASKS[task].DATA)            # parsed, not a dict
    assert isinstance(config.options, TASKS[task].Options)
    assert isinstance(config.seed, int) and config.model["type"]
    for path in config.data_paths():                             # made absolute for the run
        assert Path(path).is_absolute(), path


def test_a_model_typo_stops_the_run_before_any_data_is_read(tmp_path, monkeypatch, capsys):
    """The data section names a file that does not exist: the model's typo is what the user
    hears about, since nothing was read yet (the corpus reader would fail on the file)."""
    def no_reading(*a, **k):
        raise AssertionError("a corpus was read before the config was checked")

    monkeypatch.setattr(treelm.data.corpus, "load_corpus", no_reading)
    monkeypatch.setattr("treelm.tasks.lm.load_corpus", no_reading)
    cfg = _cfg("tiny-lm")
    cfg["data"]["file"] = str(tmp_path / "missing.txt")
    cfg["model"]["hiden_dropout"] = 0.1
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    assert main(["train", "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "r"),
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "unknown model options ['hiden_dropout']" in err, err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("change", "message"), [
    ({"seed": "one"}, "seed must be an integer"),
    ({"seed": True}, "seed must be an integer"),
    ({"model": [1, 2]}, "model: must be a mapping"),
    ({"model": {"type": "lm", "cell": "onlstm", "sizes": "big"}}, "model.sizes"),
    ({"task": "parsing"}, "unknown task 'parsing'"),
])
def test_bad_sections_are_one_line_errors(change, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace(".", r"\.")):
        read_config({**_cfg("tiny-lm"), **change})


def test_a_saved_config_ignores_the_loops_keys_a_new_one_refuses():
    """A run's saved config opens with keys of a loop from another treelm version; a new
    config with an unknown train: key is refused."""
    cfg = _cfg("tiny-lm")
    cfg["train"]["some_old_loop_key"] = 1
    assert read_run_config(cfg).options.bptt == 12
    with pytest.raises(ConfigError, match="some_old_loop_key"):
        read_config(cfg)


def test_tasks_take_the_parsed_data_section():
    cfg = _cfg("tiny-lm")
    config = read_run_config(cfg)
    assert config.data == LMData.parse(cfg["data"]) and config.raw is cfg
    assert config.data_paths() == [cfg["data"]["file"]]
