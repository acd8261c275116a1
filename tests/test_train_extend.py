"""A finished run continued to a larger token budget (``treelm train --resume RUN
train.max_units=N``) is the run trained to N from the start, bit for bit, NT-ASGD's averaging
included; and with NT-ASGD averaging, every validation (loss and ``train.eval_parse``'s tree F1)
scores the averaged weights, which ``load_run(..., averaged=True)`` loads for any checkpoint.

The tiny config on the first 80 lines of ``tests/data/tiny.txt`` (epochs of about 1,500 tokens,
so that NT-ASGD at ``nonmono=1`` and lr 60 switches to averaging inside the first half)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from treelm.cli import main
from treelm.run import load_run
from treelm.rundir.checkpoint import read_pointer
from treelm.rundir.files import AVERAGED, WEIGHTS, read_metrics

ROOT = Path(__file__).resolve().parents[1]
CFG = str(ROOT / "configs" / "tiny-lm.yaml")
HALF, WHOLE = 5000, 10000
# A few WSJ-style sentences, their words mostly in the tiny corpus's vocabulary.
MRG = """\
( (S (NP-SBJ (DT The) (NN company) )
     (VP (VBD said) (SBAR (-NONE- 0) (S (NP-SBJ (PRP it) )
       (VP (MD would) (VP (VB sell) (NP (DT the) (NNS shares) )))))) (. .) ))
( (S (NP-SBJ (DT the) (NN market) ) (VP (VBD fell) (PP (IN in) (NP (JJ heavy) (NN trading) )))
     (. .) ))
( (S (NP-SBJ (NNS Shares) ) (VP (VBD rose) (NP (CD 3) (NN %) )) (. .) ))
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("extend")
    lines = (ROOT / "tests" / "data" / "tiny.txt").read_text(encoding="utf-8").splitlines()
    (root / "small.txt").write_text("\n".join(lines[:80]) + "\n", encoding="utf-8")
    (root / "mini.mrg").write_text(MRG, encoding="utf-8")
    return root


def _settings(data: Path, every: int = 500) -> list[str]:
    # the screen's settings: NT-ASGD at a constant rate, validations on token multiples
    return ["--quiet", f"data.file={data / 'small.txt'}", "train.optimizer=ntasgd",
            "train.lr=60", "train.nonmono=1", "train.epochs=1000", "train.lr_schedule=constant",
            f"train.eval_every_units={every}", "train.log_interval=4",
            f"train.eval_parse={{treebank: {data / 'mini.mrg'}}}"]


@pytest.fixture(scope="module")
def straight(data) -> Path:
    """Trained to WHOLE tokens in one go."""
    run = data / "straight"
    assert main(["train", "--config", CFG, "--out", str(run), *_settings(data),
                 f"train.max_units={WHOLE}"]) == 0
    return run


def _extended(data: Path, name: str, every: int) -> Path:
    """Trained to HALF, finished, then resumed with the budget raised to WHOLE."""
    run = data / name
    assert main(["train", "--config", CFG, "--out", str(run), *_settings(data),
                 f"train.max_units={HALF}"]) == 0
    assert read_metrics(run, "done")[-1]["tokens"] < WHOLE
    assert any(m["event"] == "asgd_start" for m in read_metrics(run))  # averaging carried over
    assert main(["train", "--resume", str(run), *_settings(data, every),
                 f"train.max_units={WHOLE}"]) == 0
    return run


def _files(run: Path) -> dict[str, bytes]:
    last = run / read_pointer(run)["last"]
    return {name: (last / name).read_bytes() for name in (WEIGHTS, AVERAGED)}


def _curve(run: Path) -> list[tuple]:
    # the training losses and every validation (HALF is a multiple of the period: the half
    # run's validation at its budget's end is where the straight run validates anyway)
    return [(m["event"], m["step"], m["tokens"], m.get("loss"),
             *sorted((k, v) for k, v in m.items() if k.startswith("parse_f1/")))
            for m in read_metrics(run) if m["event"] in ("train", "valid", "asgd_start")]


def test_extending_a_finished_run_is_training_to_the_larger_budget(straight, data):
    run = _extended(data, "extended", 500)
    assert _files(run) == _files(straight)          # live and averaged weights, byte for byte
    assert _curve(run) == _curve(straight) and len(_curve(run)) > 20
    done = read_metrics(run, "done")
    assert len(done) == 1 and done[0]["tokens"] == read_metrics(straight, "done")[0]["tokens"]


def test_another_validation_period_on_resume_changes_no_weight(straight, data):
    """Validations (and their tree scoring) draw no random number and leave the weights as they
    were: the continuation may validate on other multiples (``--eval-every-tokens``)."""
    run = _extended(data, "every300", 300)
    assert _files(run) == _files(straight)
    periodic = [v["tokens"] for v in read_metrics(run, "valid")
                if HALF < v["tokens"] and not (v.get("epoch_end") or v.get("budget_end"))]
    assert periodic and all(t // 300 > (t - 100) // 300 for t in periodic)


def _evaluate(run: Path, averaged: bool, mrg: Path) -> dict[str, float]:
    from treelm.syntax.tracking import ParseTracker

    r = load_run(run, "last", expect="lm", averaged=averaged)
    with torch.no_grad():
        ev = r.task.evaluate(r.model, "valid")
    trees = ParseTracker(str(mrg), r.model)
    return {"loss": ev.scores["loss"], **trees.scores(r.model, r.vocab)}


def test_validations_under_averaging_score_the_averaged_weights(straight, data):
    """The final validation (after NT-ASGD switched) logged the averaged weights' loss and tree
    F1, which ``load_run(..., averaged=True)`` gives back from the last checkpoint; the live
    weights score otherwise (so the check is not empty)."""
    events = [m["event"] for m in read_metrics(straight)]
    assert events.index("asgd_start") < len(events) - 2
    final = read_metrics(straight, "valid")[-1]
    assert final.get("budget_end")
    avg, live = (_evaluate(straight, a, data / "mini.mrg") for a in (True, False))
    assert final["loss"] == pytest.approx(avg["loss"], rel=1e-6)
    assert live["loss"] != pytest.approx(avg["loss"], rel=1e-6)
    keys = [k for k in final if k.startswith("parse_f1/")]
    assert keys and all(final[k] == pytest.approx(avg[k], abs=1e-12) for k in keys)
    # the default stays as it was: best averaged, last live (what a resume continues from)
    default_last = load_run(straight, "last").model.state_dict()
    live_last = load_run(straight, "last", averaged=False).model.state_dict()
    assert all(torch.equal(default_last[k], live_last[k]) for k in live_last)
