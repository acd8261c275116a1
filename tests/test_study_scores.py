"""What a study scores besides the task's ``treelm eval`` figures, and what dev chooses on.

- ``score.eval`` entries ``generate`` and ``probe``: a language model's sample and its likeliest
  next symbols, the text ``treelm generate`` / ``treelm probe`` print for ``best`` (through the
  Python API they call), kept in the record beside the scores (what ``benchmarks/charlm.py``
  recorded, now ``studies/charlm-1m.yaml``);
- each entry gives exactly one of split, data, generate and probe, checked with the file;
- ``score.choose_on``: the validation score ``choose: [variant]`` decides on (default loss), e.g.
  the slot-filling studies' F1, where higher is better;
- the committed studies under ``studies/`` load (configs, variants and overrides checked whole).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from treelm.config import ConfigError
from treelm.study.load import load_study
from treelm.study.record import summarize
from treelm.study.score import score_evals
from treelm.study.spec import describe

ROOT = Path(__file__).resolve().parent.parent


def write_study(where: Path, score: str) -> Path:
    """A study of the tiny LM config with the given ``score:`` section (nothing is trained)."""
    path = where / "s.yaml"
    path.write_text(f"""\
config: {ROOT / 'configs/tiny-lm.yaml'}
variants: {{a: {{}}, b: {{train.lr: 0.5}}}}
overrides: {{data.file: {ROOT / 'tests/data/tiny.txt'}}}
score:
{score}
runs: {where / 'runs'}
""", encoding="utf-8")
    return path


def test_sample_and_probe_are_the_apis(lm_run):
    """A sample and a probe of ``best``, as the API (and so the verbs) give them."""
    from treelm.api.model import load

    out = score_evals(lm_run, [
        {"generate": 12, "prompt": "the", "temperature": 1.0, "seed": 3, "name": "sample"},
        {"probe": ["the", "a"], "top_k": 3}])["eval"]
    m = load(lm_run, "best")
    assert out["sample"] == {"text": m.generate("the", 12, temperature=1.0, seed=3)}
    assert set(out["probe"]) == {"the", "a"}
    for prefix, rows in out["probe"].items():
        assert rows == [[s, p] for s, p in m.probe(prefix, 3)] and len(rows) == 3


@pytest.mark.parametrize("entry, says", [
    ("{split: test, generate: 10}", "give one of split, data, generate, probe"),
    ("{name: x}", "give one of split, data, generate, probe"),
    ("{generate: 0}", "generate"),
    ("{probe: [fixi], top_k: 0}", "top_k"),
])
def test_an_eval_entry_gives_one_kind(tmp_path, entry, says):
    with pytest.raises(ConfigError, match=says):
        load_study(write_study(tmp_path, f"  eval: [{entry}]"))


def test_choose_on_a_score_where_higher_is_better(tmp_path):
    """``choose_on: accuracy``: the variant of the highest mean; default: the lowest loss."""
    study = load_study(write_study(tmp_path, "  eval: [{split: test}]\n  choose_on: accuracy"))
    desc = describe(study)
    assert desc["score"]["choose_on"] == "accuracy"
    runs = {f"{v}/{s}": {"variant": v, "seed": s, "minutes": 1.0, "best_valid_loss": loss,
                         "best_valid_accuracy": acc}
            for v, s, loss, acc in [("a", 1, 1.0, 60.0), ("b", 1, 2.0, 70.0)]}
    desc["choose"] = ["variant"]
    chosen = summarize({"study": desc, "runs": runs})["scores"]["chosen"]
    assert chosen == {"variant": "b", "on": "valid accuracy"}
    del desc["score"]["choose_on"]
    chosen = summarize({"study": desc, "runs": runs})["scores"]["chosen"]
    assert chosen == {"variant": "a", "on": "valid loss"}
    with pytest.raises(ConfigError, match="score.choose_on"):
        load_study(write_study(tmp_path, "  choose_on: 3"))


CELLS = ("lstm", "gru", "elman", "onlstm", "mrnn", "tensor")


def _slot_variant(dataset: str, name: str) -> tuple[str, list[str]]:
    """``jordan-bi-w9-nointent`` -> configs/atis-jordan.yaml with window 9, bidirectional, no
    intent output (SNIPS variants name no window: 5)."""
    parts = name.split("-")
    window = next((p[1:] for p in parts if p[:1] == "w" and p[1:].isdigit()), "5")
    extra = [f"model.window={window}"]
    extra += ["model.bidirectional=true"] * ("bi" in parts)
    extra += ["model.intent=false"] * ("nointent" in parts)
    return f"{dataset}-{parts[0]}", extra


#: study -> variant -> (the config of configs/ it is, overrides on that config)
KEY_FOR_KEY = {
    "listops": {"onlstm": ("listops-onlstm", []), "lstm": ("listops-lstm", [])},
    "logic": {"onlstm": ("logic-onlstm", []), "lstm": ("logic-lstm", [])},
    "lm-budget": {"onlstm": ("ptb-onlstm-cpu", []), "lstm": ("ptb-lstm-cpu", [])},
    "multi30k": {"convs2s": ("multi30k-convs2s", []), "rnn-attn": ("multi30k-rnn-attn", [])},
    "charlm-1m": {**{c: (f"ptb-char-{c}-1m", []) for c in CELLS},
                  "elman-lr5e-4": ("ptb-char-elman-1m", ["train.lr=0.0005"])},
    "charlm-5m": {c: (f"ptb-char-{c}-5m", []) for c in CELLS},
    "slot-filling-atis": "atis",
    "slot-filling-snips": "snips",
}


@pytest.mark.parametrize("name", sorted(KEY_FOR_KEY))
def test_each_variant_is_its_config_key_for_key(name, monkeypatch):
    """The committed studies load (configs, variants and overrides checked whole; data by path is
    not read), and each variant, with the study's overrides, is the config of configs/ it
    replaces with the same overrides: key for key, comments aside."""
    from treelm.config import apply_overrides, load_config

    monkeypatch.chdir(ROOT)
    study = load_study(ROOT / "studies" / f"{name}.yaml")
    base = load_config(study.config)
    want = KEY_FOR_KEY[name]
    assert isinstance(want, str) or set(want) == set(study.variants)
    for variant, over in study.variants.items():
        config, extra = (_slot_variant(want, variant) if isinstance(want, str)
                         else want[variant])
        got = apply_overrides(base, [*study.overrides, *over])
        assert got == apply_overrides(load_config(ROOT / "configs" / f"{config}.yaml"),
                                      [*study.overrides, *extra]), (name, variant)


@pytest.mark.parametrize("ensemble, groups", [
    ("all", ["a", "b", "all"]), ("[b, all]", ["b", "all"]), ("[]", [])])
def test_the_ensemble_is_expanded_once_when_the_study_is_read(tmp_path, ensemble, groups):
    """``score.trees.ensemble`` as written stays the record's; its groups are expanded at
    parse time (``Trees.ensemble_groups``), as the record's ensembles expand it."""
    from treelm.study.ensemble import groups as record_groups

    study = load_study(write_study(tmp_path, f"  trees: {{test: null, ensemble: {ensemble}}}"))
    assert study.trees is not None and study.trees.ensemble_groups == groups
    desc = describe(study)
    assert "ensemble_groups" not in desc["score"]["trees"]
    assert "ensemble_groups" not in study.trees.for_jobs()
    runs = {f"{v}/1": {"variant": v, "seed": 1} for v in ("a", "b")}
    assert list(record_groups(desc, runs)) == groups
    with pytest.raises(ConfigError, match="unknown score.trees options"):
        load_study(write_study(tmp_path, "  trees: {ensemble_groups: [a]}"))
