"""The config is read once (``treelm.tasks.read_run_config``): every section is checked before any
data is read, and tasks receive the checked values, not the raw dict."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

import treelm.data.corpus
from treelm.cli import main
from treelm.config import apply_overrides, load_config
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


# ----------------------------------------------------------------------------- keys given twice
@pytest.mark.parametrize(("text", "said"), [
    ("seed: 1\nseed: 2\n", "key 'seed' given twice, at lines 1 and 2"),
    ("seed: 1\ntrain:\n  lr: 1\n  clip: 0.5\n  lr: 2\n",
     "key 'train.lr' given twice, at lines 3 and 5"),
    ("model:\n  cell_options: {chunk_size: 4, chunk_size: 2}\n",
     "key 'model.cell_options.chunk_size' given twice, at lines 2 and 2"),
    ("seed: 1\n'seed': 1\n", "key 'seed' given twice, at lines 1 and 2"),   # quoted or not
    # keys are compared as what they build, as the dict they go into compares them
    ("model:\n  cell_options: {yes: 1, true: 2}\n",
     "key 'model.cell_options.true' given twice (first as 'yes'), at lines 2 and 2"),
    ("data:\n  1: a\n  01: b\n", "key 'data.01' given twice (first as '1'), at lines 2 and 3"),
    ("data:\n  1: a\n  1.0: b\n", "key 'data.1.0' given twice (first as '1'), at lines 2 and 3"),
    ("data:\n  0x10: a\n  16: b\n",
     "key 'data.16' given twice (first as '0x10'), at lines 2 and 3"),
    ("data:\n  on: a\n  1: b\n", "key 'data.1' given twice (first as 'on'), at lines 2 and 3"),
])
def test_a_config_key_given_twice_is_refused_naming_it_and_both_lines(tmp_path, text, said):
    f = tmp_path / "twice.yaml"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert str(e.value) == f"{f}: {said}; keep one"


def test_keys_that_build_different_values_are_two_keys(tmp_path):
    f = tmp_path / "two.yaml"
    f.write_text("data:\n  1: a\n  '1': b\n  'true': c\n  false: d\n  'no': e\n",
                 encoding="utf-8")
    assert load_config(f)["data"] == {1: "a", "1": "b", "true": "c", False: "d", "no": "e"}


def test_merge_keys_still_override_and_equal_keys_at_two_levels_are_fine(tmp_path):
    f = tmp_path / "merge.yaml"
    f.write_text("model: {dropout: 0.1}\ntrain: {dropout: 0.2}\n", encoding="utf-8")
    assert load_config(f)["train"]["dropout"] == 0.2
    f.write_text("data:\n  base: &b {x: 1, y: 2}\n  own:\n    <<: *b\n    x: 3\n")
    assert load_config(f)["data"]["own"] == {"x": 3, "y": 2}


def test_an_override_given_twice_with_two_values_is_refused():
    with pytest.raises(ConfigError) as e:
        apply_overrides({}, ["seed=1", "train.lr=2", "seed=2"])
    assert str(e.value) == ("override seed given twice with different values: seed=1 and "
                            "seed=2; keep one")
    assert apply_overrides({}, ["seed=1", "seed=1"]) == {"seed": 1}       # the same: harmless
    assert apply_overrides({}, ["train.lr=0.5", "train.lr=.5"]) == {"train": {"lr": 0.5}}


@pytest.mark.parametrize(("overrides", "said"), [
    (["model.cell_options={impl: cpu}", "model.cell_options.impl=fused"], "'cpu' against 'fused'"),
    (["model.cell_options.impl=fused", "model.cell_options={impl: cpu}"], "'cpu' against 'fused'"),
    # the section last replaces a key set before it, which it does not name
    (["model.cell_options.impl=fused", "model.cell_options={chunk_size: 4}"],
     "absent against 'fused'"),
    (["model.cell_options.impl=fused", "model.cell_options=null"], "absent against 'fused'"),
    # key=null removes the key; the section that names it says otherwise
    (["model.cell_options={impl: cpu}", "model.cell_options.impl=null"], "'cpu' against absent"),
])
def test_overrides_of_a_section_and_a_key_under_it_that_disagree_are_refused(overrides, said):
    with pytest.raises(ConfigError) as e:
        apply_overrides({"model": {"cell": "onlstm"}}, overrides)
    section, key = sorted(overrides, key=lambda o: o.split("=")[0].count("."))
    assert str(e.value) == (f"overrides {section} and {key} disagree about "
                            f"model.cell_options.impl ({said}); keep one")


def test_overrides_of_a_section_and_a_key_under_it_that_agree_are_applied_in_order():
    base = {"model": {"cell": "onlstm", "cell_options": {"chunk_size": 8, "impl": "cpu"}}}
    for overrides, options in [
            (["model.cell_options={impl: fused}", "model.cell_options.impl=fused"],
             {"impl": "fused"}),
            (["model.cell_options.impl=fused", "model.cell_options={impl: fused}"],
             {"impl": "fused"}),
            # the section first, then a key it does not name: an edit of what it set
            (["model.cell_options={chunk_size: 4}", "model.cell_options.impl=fused"],
             {"chunk_size": 4, "impl": "fused"}),
            (["model.cell_options=null", "model.cell_options.impl=fused"], {"impl": "fused"}),
            (["model.cell_options={chunk_size: 4}", "model.cell_options.impl=null"],
             {"chunk_size": 4}),
            (["model.cell_options.impl=null", "model.cell_options={chunk_size: 4}"],
             {"chunk_size": 4}),
            (["model.cell_options.impl=fused", "model.cell=onlstm", "seed=3"],
             {"chunk_size": 8, "impl": "fused"})]:
        assert apply_overrides(base, overrides)["model"]["cell_options"] == options, overrides
    assert "cell_options" not in apply_overrides(base, ["model.cell_options=null"])["model"]


@pytest.mark.parametrize("case", ["file", "overrides"])
def test_keys_given_twice_stop_train_with_one_line(tmp_path, capsys, case):
    os.chdir(ROOT)
    config, overrides = "configs/tiny-lm.yaml", ["seed=1", "seed=2"]
    text = (ROOT / config).read_text(encoding="utf-8")
    if case == "file":        # tiny-lm.yaml has seed: 1 on its line 2; another at its end
        config, overrides = str(tmp_path / "twice.yaml"), []
        (tmp_path / "twice.yaml").write_text(text + "seed: 2\n", encoding="utf-8")
    assert main(["train", "--config", config, "--out", str(tmp_path / "r"), "--quiet",
                 *overrides]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("treelm: error: ") and "seed" in err[0], err
    said = f"at lines 2 and {text.count(chr(10)) + 1}" if case == "file" else "seed=1 and seed=2"
    assert said in err[0], err
    assert not (tmp_path / "r").exists()
