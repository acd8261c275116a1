"""Each run's own layer and rule, chosen on dev trees (issue 44): what ``train.eval_parse`` and
``eval-parse`` on a dev treebank record in ``trees.json`` (never from a test treebank), the
defaults ``parse``, ``plot``, ``plot-tree --run``, the API and ``serve`` take from it and the one
line they say, the ``best-trees`` checkpoint (present, absent, NT-ASGD's averaged weights),
``train.eval_parse.if_missing: skip``, and ``trees.json`` mended by a resume. The treebanks are
the tests' own: a .mrg file, and a fake NLTK sample whose dev and test parts hold it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_train_eval_parse import MRG

import treelm
from treelm.cli import main
from treelm.errors import TreelmError
from treelm.run import CHECKPOINTS, load_run
from treelm.rundir.checkpoint import load_trainer_state, read_pointer, weights_bytes
from treelm.rundir.files import read_metrics
from treelm.rundir.trees import (
    HOW_BEST,
    HOW_BEST_RULE,
    HOW_BEST_TREES,
    HOW_EVAL_PARSE,
    read_choices,
    rule_checkpoint,
)
from treelm.serve.endpoints import tree_view
from treelm.serve.server import App
from treelm.syntax.tracking import choose, chooses
from treelm.syntax.trees import TREE_STYLES

ROOT = Path(__file__).resolve().parents[1]
CFG = str(ROOT / "configs" / "tiny-lm.yaml")
TINY = ROOT / "tests" / "data" / "tiny.txt"
SENTENCE = "the company said it would sell the shares"


def _train(run: Path, *overrides: str) -> int:
    return main(["train", "--config", CFG, "--out", str(run), "--quiet", f"data.file={TINY}",
                 *overrides])


def _run(capsys, *argv: object) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _error(capsys, *argv: object) -> str:
    code, out, err = _run(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def mrg(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("treebank") / "mini.mrg"
    path.write_text(MRG, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def chosen(tmp_path_factory, mrg) -> Path:
    """Two epochs with tree F1 at every validation (epoch ends and every 1,500 tokens) on the
    .mrg file, which the config names as its dev trees."""
    run = tmp_path_factory.mktemp("chosen") / "run"
    assert _train(run, "train.epochs=2", "train.eval_every_units=1500",
                  f"train.eval_parse={{treebank: {mrg}}}") == 0
    return run


@pytest.fixture
def nltk_sample(tmp_path, monkeypatch) -> None:
    """NLTK_DATA with a sample whose dev part (wsj_0001) and test part (wsj_0100) both hold the
    five sentences: the names decide, not the trees."""
    import nltk

    combined = tmp_path / "nltk_data" / "corpora" / "treebank" / "combined"
    combined.mkdir(parents=True)
    for name in ("wsj_0001.mrg", "wsj_0100.mrg"):
        (combined / name).write_text(MRG, encoding="utf-8")
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "nltk_data"))
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "nltk_data")])


def _copy(run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(run, out)
    return out


# ----------------------------------------------------------------------------- the rule
def test_the_choice_and_its_ties():
    s = "parse_f1/{}/L{}".format
    assert choose({s("split", 1): .5, s("official", 2): .5, s("official", 1): .4}) == (
        "official", 2, .5)                                  # official before split
    assert choose({s("split", 2): .5, s("split", 1): .5}) == ("split", 1, .5)   # lower layer
    assert choose({s("official", 3): .7, s("split", 1): .6}) == ("official", 3, .7)
    assert chooses("nltk-dev", paths=False) and chooses("sinica-dev", paths=False)
    for test in ("nltk-test", "sinica-test", "nltk", "sinica"):
        assert not chooses(test, paths=True)
    assert chooses("/data/dev.mrg", paths=True) and not chooses("/data/dev.mrg", paths=False)
    # the verbs' --checkpoint names one checkpoint per tree rule
    assert CHECKPOINTS == ("best", "best-trees", *map(rule_checkpoint, TREE_STYLES), "last")


# ----------------------------------------------------------------------------- training
def test_training_records_the_choice_of_best_and_best_trees(chosen, mrg, capsys):
    vals = read_metrics(chosen, "valid")
    keys = [k for k in vals[0] if k.startswith("parse_f1/")]
    ptr, entries = read_pointer(chosen), read_choices(chosen)
    assert set(entries) == {"best", "best-trees", "best-trees-official",
                            "best-trees-split"} and len(vals) > 3

    # best: the choice at the validation that made it best (epoch ends and the budget's end
    # choose best; the first of equal losses)
    made = min((v for v in vals if v.get("epoch_end") or v.get("budget_end")),
               key=lambda v: v["loss"])
    b = entries["best"]
    assert (b.rule, b.layer, b.sentence_f1) == choose({k: made[k] for k in keys})
    assert (b.step, b.tokens, b.path, b.how) == (made["step"], made["tokens"], ptr["best"],
                                                 HOW_BEST)
    assert b.treebank == str(mrg) and b.scores == {k: made[k] for k in keys}
    assert load_trainer_state(chosen, "best")["loop"]["step"] == made["step"]

    # best-trees: the validation whose chosen F1 is the highest (the first on a tie), any of them
    top = max(range(len(vals)), key=lambda i: (choose({k: vals[i][k] for k in keys})[2], -i))
    t = entries["best-trees"]
    assert (t.rule, t.layer, t.sentence_f1) == choose({k: vals[top][k] for k in keys})
    assert (t.step, t.path, t.how) == (vals[top]["step"], ptr["best-trees"], HOW_BEST_TREES)
    assert load_trainer_state(chosen, "best-trees")["loop"]["step"] == vals[top]["step"]

    # best-trees-<rule>: the same under that rule alone (the first on a tie)
    for rule in ("official", "split"):
        mine = [k for k in keys if k.split("/")[1] == rule]
        top_r = max(range(len(vals)),
                    key=lambda i: (choose({k: vals[i][k] for k in mine})[2], -i))
        r = entries[f"best-trees-{rule}"]
        assert (r.rule, r.layer, r.sentence_f1) == choose({k: vals[top_r][k] for k in mine})
        assert (r.step, r.path, r.how) == (vals[top_r]["step"], ptr[f"best-trees-{rule}"],
                                           HOW_BEST_RULE)
        assert r.scores == {k: vals[top_r][k] for k in mine}
        assert load_trainer_state(chosen, f"best-trees-{rule}")["loop"]["step"] == \
            vals[top_r]["step"]
    # the overall one is one of the rules' own
    assert ptr["best-trees"] == ptr[f"best-trees-{t.rule}"]
    kept = {d.name for d in (chosen / "ckpt").iterdir()}
    assert kept == {ptr[n].split("/")[1] for n in CHECKPOINTS}

    # its weights are the ones that validation scored
    before = (chosen / "trees.json").read_text(encoding="utf-8")
    code, out, _ = _run(capsys, "eval-parse", chosen, "--treebank", mrg, "--checkpoint",
                        "best-trees", "--style", t.rule, "--no-baselines", "--format", "json")
    assert code == 0
    assert json.loads(out)["layers"][str(t.layer)]["sentence_f1"] == pytest.approx(
        t.sentence_f1, abs=1e-12)
    # a file given to eval-parse never chooses (it cannot tell dev from test)
    assert (chosen / "trees.json").read_text(encoding="utf-8") == before


def test_a_test_treebank_never_chooses_and_eval_parse_on_dev_does(tmp_path, nltk_sample,
                                                                   capsys):
    run = tmp_path / "r"
    assert _train(run, "train.epochs=1", "train.eval_parse={treebank: nltk-test}") == 0
    assert "parse_f1/official/L1" in read_metrics(run, "valid")[-1]     # logged...
    assert not (run / "trees.json").exists() and "best-trees" not in read_pointer(run)
    assert _error(capsys, "parse", run, "the company", "--checkpoint", "best-trees") == (
        f"treelm: error: {run} has no best-trees checkpoint: no validation of it has chosen on "
        f"dev trees yet (a test treebank, nltk-test or sinica-test, never chooses)")
    for test in ("nltk-test", "nltk"):
        assert _run(capsys, "eval-parse", run, "--treebank", test, "--no-baselines")[0] == 0
    assert not (run / "trees.json").exists()
    code, out, err = _run(capsys, "parse", run, SENTENCE)
    assert code == 0 and err == ""                 # no choice: the last-but-one, silently

    # eval-parse on the dev part: the layer of the highest F1 under its rule...
    code, out, err = _run(capsys, "eval-parse", run, "--treebank", "nltk-dev", "--format",
                          "json", "--no-baselines")
    official = {f"parse_f1/official/L{k}": r["sentence_f1"]
                for k, r in json.loads(out)["layers"].items()}
    b = read_choices(run)["best"]
    assert (b.rule, b.layer, b.sentence_f1) == choose(official)
    assert (b.treebank, b.how, b.path) == ("nltk-dev", HOW_EVAL_PARSE, read_pointer(run)["best"])
    assert b.step == load_trainer_state(run, "best")["loop"]["step"]
    assert err == (f"treelm eval-parse: {run}'s best checkpoint now parses with layer {b.layer}, "
                   f"{b.rule} rule, chosen on nltk-dev (sentence F1 {100 * b.sentence_f1:.1f} "
                   f"at the best checkpoint) (trees.json)\n")
    # ...then under the other rule: both rules' scores, chosen among together
    code, out, _ = _run(capsys, "eval-parse", run, "--treebank", "nltk-dev", "--format", "json",
                        "--no-baselines", "--style", "split")
    both = {**official, **{f"parse_f1/split/L{k}": r["sentence_f1"]
                           for k, r in json.loads(out)["layers"].items()}}
    b = read_choices(run)["best"]
    assert b.scores == both and (b.rule, b.layer, b.sentence_f1) == choose(both)
    code, _, err = _run(capsys, "parse", run, SENTENCE)
    assert err == (f"treelm parse: layer {b.layer}, {b.rule} rule, chosen on nltk-dev "
                   f"(sentence F1 {100 * b.sentence_f1:.1f} at the best checkpoint)\n")
    # a write that fails leaves the scores printed and says so
    def refuse(run, changes):
        raise PermissionError(13, "Permission denied", str(run / "trees.json"))

    with pytest.MonkeyPatch.context() as mp:
        import treelm.rundir.trees as trees_file

        mp.setattr(trees_file, "write_choices", refuse)
        code, out, err = _run(capsys, "eval-parse", run, "--treebank", "nltk-dev",
                              "--no-baselines", "--format", "json")
    assert code == 0 and json.loads(out)["layers"] and err == (
        f"treelm eval-parse: warning: the choice is not recorded ({run / 'trees.json'}: "
        f"Permission denied)\n")
    # another checkpoint gets its own entry
    assert _run(capsys, "eval-parse", run, "--treebank", "nltk-dev", "--checkpoint", "last",
                "--no-baselines")[0] == 0
    assert set(read_choices(run)) == {"best", "last"}
    assert "at the last checkpoint" in _run(capsys, "parse", run, SENTENCE, "--checkpoint",
                                            "last")[2]


# ----------------------------------------------------------------------------- the defaults
def test_parse_plot_api_and_serve_default_to_the_choice(chosen, mrg, tmp_path, capsys):
    b = read_choices(chosen)["best"]
    why = f"chosen on {mrg} (sentence F1 {100 * b.sentence_f1:.1f} at the best checkpoint)"
    code, out, err = _run(capsys, "parse", chosen, SENTENCE)
    assert code == 0 and err == f"treelm parse: layer {b.layer}, {b.rule} rule, {why}\n"
    code, given, err = _run(capsys, "parse", chosen, SENTENCE, "--layer", b.layer, "--style",
                            b.rule)
    assert given == out and err == ""                         # given flags win, silently
    other = 3 - b.layer                                       # the tiny model has layers 1, 2
    err = _run(capsys, "parse", chosen, SENTENCE, "--layer", other)[2]
    assert err == f"treelm parse: {b.rule} rule (as at layer {b.layer}), {why}\n"
    err = _run(capsys, "parse", chosen, SENTENCE, "--style", "split")[2]
    assert err == f"treelm parse: layer {b.layer} (as with the {b.rule} rule), {why}\n"

    png = tmp_path / "levels.png"
    code, out, err = _run(capsys, "plot", chosen, SENTENCE, "-o", png)
    assert (code, out, err) == (0, f"{png}\n", f"treelm plot: layer {b.layer}, {b.rule} rule, "
                                               f"{why}\n")
    err = _run(capsys, "plot-tree", "--run", chosen, SENTENCE, "-o", tmp_path / "t.png")[2]
    assert err == f"treelm plot-tree: layer {b.layer}, {b.rule} rule, {why}\n"

    m = treelm.load(chosen)
    assert (m.default_layer, m.default_rule) == (b.layer, b.rule)
    assert m.choice.chosen == b and m.choice.why == why
    assert m.parse(SENTENCE) == m.parse(SENTENCE, layer=b.layer, style=b.rule)
    assert json.loads(json.dumps(m.choice.as_dict()))["chosen"]["layer"] == b.layer
    row = App({"r": m}).runs()[0]
    view = tree_view(m, SENTENCE)
    for got in (row, view):
        assert (got["default_layer"], got["default_rule"], got["default_why"]) == (
            b.layer, b.rule, why)

    # best-trees has its own choice; last has none: the last-but-one layer, official, silently
    t = read_choices(chosen)["best-trees"]
    err = _run(capsys, "parse", chosen, SENTENCE, "--checkpoint", "best-trees")[2]
    assert err.startswith(f"treelm parse: layer {t.layer}, {t.rule} rule, chosen on ") and \
        err.endswith("at the best-trees checkpoint)\n")
    assert treelm.load(chosen, "best-trees").choice.chosen == t
    code, out, err = _run(capsys, "parse", chosen, SENTENCE, "--checkpoint", "last")
    assert err == "" and out == _run(capsys, "parse", chosen, SENTENCE, "--checkpoint", "last",
                                     "--layer", "1", "--style", "official")[1]
    last = treelm.load(chosen, "last")
    assert last.choice.chosen is None and last.default_layer == 1 and "no dev choice" in \
        last.choice.why


def test_a_stale_or_damaged_choice_is_left_out(chosen, tmp_path, capsys):
    run = _copy(chosen, tmp_path)
    entries = json.loads((run / "trees.json").read_text(encoding="utf-8"))
    entries["best"]["path"] = "ckpt/999999"       # made for weights the pointer no longer names
    (run / "trees.json").write_text(json.dumps(entries), encoding="utf-8")
    code, out, err = _run(capsys, "parse", run, SENTENCE)
    assert code == 0 and err == "" and treelm.load(run).choice.chosen is None
    (run / "trees.json").write_text("{", encoding="utf-8")
    code, out2, err = _run(capsys, "parse", run, SENTENCE)
    assert code == 0 and out2 == out and err == (
        f"treelm: warning: {run / 'trees.json'}: cannot read (not JSON); delete it to parse "
        f"with the default layer and rule\n")


# ----------------------------------------------------------------------------- best-trees
def test_best_trees_absent_is_one_line(lm_run, capsys):
    says = (f"treelm: error: {lm_run} has no best-trees checkpoint: it was trained without "
            f"train.eval_parse")
    for verb in (["parse", lm_run, "the company"], ["plot", lm_run, "the company", "-o", "x.png"],
                 ["eval", lm_run], ["eval-parse", lm_run, "--treebank", "x.mrg"]):
        assert _error(capsys, *verb, "--checkpoint", "best-trees") == says
    with pytest.raises(TreelmError, match="it was trained without train.eval_parse"):
        treelm.load(lm_run, "best-trees")


def test_a_missing_rule_checkpoint_says_why(chosen, tmp_path, capsys):
    """A run trained before the checkpoints per rule (its pointer has best-trees alone), and one
    whose train.eval_parse scored one rule: one line each, naming the reason."""
    run = _copy(chosen, tmp_path)
    ptr = json.loads((run / "checkpoint.json").read_text(encoding="utf-8"))
    for name in ("best-trees-official", "best-trees-split"):
        del ptr[name]
    (run / "checkpoint.json").write_text(json.dumps(ptr), encoding="utf-8")
    assert _error(capsys, "parse", run, SENTENCE, "--checkpoint", "best-trees-split") == (
        f"treelm: error: {run} has no best-trees-split checkpoint: it was trained before treelm "
        f"kept a checkpoint per rule; best-trees is its best dev trees under either rule")
    cfg = (run / "config.yaml").read_text(encoding="utf-8")
    assert "  eval_parse:\n" in cfg and "rules:" not in cfg       # (the default: both rules)
    (run / "config.yaml").write_text(
        cfg.replace("  eval_parse:\n", "  eval_parse:\n    rules: [official]\n"), encoding="utf-8")
    assert _error(capsys, "parse", run, SENTENCE, "--checkpoint", "best-trees-split") == (
        f"treelm: error: {run} has no best-trees-split checkpoint: its train.eval_parse.rules "
        f"do not score the split rule")


def test_best_trees_reads_the_averaged_weights_as_best_does(chosen, tmp_path):
    """NT-ASGD: where a checkpoint has averaged weights, best-trees is evaluated with them (as
    its validation scored them), last with the live ones (what a resume continues)."""
    run = _copy(chosen, tmp_path)
    ptr = read_pointer(run)
    live = load_file(str(run / ptr["best-trees"] / "model.safetensors"))
    model = load_run(run, "best-trees").model
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.5)
    (run / ptr["best-trees"] / "averaged.safetensors").write_bytes(weights_bytes(model))
    halved = load_run(run, "best-trees").model.state_dict()
    assert all(torch.equal(halved[k], 0.5 * v) for k, v in live.items())
    plain = load_run(run, "best-trees", averaged=False).model.state_dict()
    assert all(torch.equal(plain[k], v) for k, v in live.items())


# ----------------------------------------------------------------------------- the treebank
def test_if_missing_skip_trains_on_after_one_line(tmp_path, capsys, monkeypatch):
    import nltk

    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    capsys.readouterr()
    run = tmp_path / "r"
    assert _train(run, "train.epochs=1", "train.eval_parse={treebank: nltk-dev, "
                  "if_missing: skip}") == 0
    err = capsys.readouterr().err
    assert err == ("train.eval_parse: treebank nltk-dev not found (NLTK's WSJ sample: set "
                   "NLTK_DATA, see docs/syntax.md); training without tree scores\n")
    assert not any(k.startswith("parse_f1/") for k in read_metrics(run, "valid")[-1])
    assert not (run / "trees.json").exists() and "best-trees" not in read_pointer(run)
    missing = tmp_path / "none.mrg"
    assert _train(tmp_path / "r2", "train.epochs=1", f"train.eval_parse={{treebank: {missing}, "
                  "if_missing: skip}") == 0
    assert capsys.readouterr().err == (f"train.eval_parse: treebank {missing} not found (no such "
                                       f"file or directory); training without tree scores\n")
    # a treebank that is there but malformed still stops the run
    bad = tmp_path / "bad.mrg"
    bad.write_text("( (S (NP (DT the)\n", encoding="utf-8")
    assert _train(tmp_path / "r3", "train.epochs=1", f"train.eval_parse={{treebank: {bad}, "
                  "if_missing: skip}") == 2
    assert not (tmp_path / "r3").exists()


def test_the_tree_config_scores_nltk_dev_or_says_it_is_missing():
    """configs/ptb-onlstm-trees.yaml: trees on nltk-dev at each validation where NLTK's sample
    is found, one line and no tree scores where it is not (the path tested above)."""
    from treelm.config import load_config
    from treelm.train.builders import read_config

    tc, _ = read_config(load_config(ROOT / "configs" / "ptb-onlstm-trees.yaml"), new=True)
    ep = tc.eval_parse
    assert (ep.treebank, ep.layers, ep.rules, ep.if_missing) == (
        "nltk-dev", "all", ["official", "split"], "skip")
    assert tc.eval_every_units == 400_000


def test_a_resume_mends_trees_json(chosen, tmp_path, capsys):
    """A kill between a checkpoint and trees.json, or a damaged file: the resume writes it
    from the checkpoint's state; an entry for a directory the pointer left is dropped."""
    run = _copy(chosen, tmp_path)
    want = read_choices(run)
    (run / "trees.json").unlink()
    assert main(["train", "--resume", str(run), "--quiet"]) == 0     # finished: restores only
    assert read_choices(run) == want
    entries = json.loads((run / "trees.json").read_text(encoding="utf-8"))
    entries["last"] = {**entries["best"], "checkpoint": "last", "path": "ckpt/000001"}
    (run / "trees.json").write_text(json.dumps(entries), encoding="utf-8")
    assert main(["train", "--resume", str(run), "--quiet"]) == 0
    assert read_choices(run) == want
