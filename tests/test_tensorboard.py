"""TensorBoard's view of a run (issue 43, :mod:`treelm.train.tensorboard`): where the package is
installed, ``RUN/tb/`` holds the metrics log's train and valid scalars, step = units seen, tree
F1 included; a resume purges what a killed process logged after its checkpoint; ``--force``
starts the view afresh. Where it is not installed, a run has no ``tb/`` and says nothing of it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from treelm.cli import main
from treelm.rundir.files import RunFiles, read_metrics

ROOT = Path(__file__).resolve().parents[1]
TREEBANK = """\
( (S (NP-SBJ (DT the) (NN company) ) (VP (VBD said) (SBAR (S (NP-SBJ (PRP it) )
  (VP (MD would) (VP (VB sell) (NP (DT the) (NNS shares) )))))) (. .) ))
( (S (NP-SBJ (NNS prices) ) (VP (VBD rose) (NP (CD 3) (NN %) )) (. .) ))
"""


def _train(run: Path, *more: str) -> int:
    os.chdir(ROOT)
    return main(["train", "--config", "configs/tiny-lm.yaml", "--out", str(run), "--quiet",
                 "train.precision=fp32", *more])


def _scalars(run: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(RunFiles(run).tb))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _logged(run: Path, event: str, key: str) -> list[tuple[int, float]]:
    return [(r["tokens"], r[key]) for r in read_metrics(run, event) if key in r]


def _same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    """Equal steps, equal values to float32 (an event file's scalars are float32)."""
    return [s for s, _ in a] == [s for s, _ in b] and all(
        x == pytest.approx(y, rel=1e-6) for (_, x), (_, y) in zip(a, b, strict=True))


def test_a_run_writes_its_scalars_for_tensorboard(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    bank = tmp_path / "trees.mrg"
    bank.write_text(TREEBANK, encoding="utf-8")
    run = tmp_path / "run"
    assert _train(run, "train.epochs=1", f"train.eval_parse={{treebank: {bank}}}") == 0
    tb = _scalars(run)
    assert _same(tb["valid/loss"], _logged(run, "valid", "loss"))
    assert _same(tb["train/loss"], _logged(run, "train", "loss"))
    assert _same(tb["parse_f1/official/L1"], _logged(run, "valid", "parse_f1/official/L1"))
    assert {"valid/ppl", "train/ppl", "train/lr", "train/tok_s"} <= tb.keys()
    assert not {"train/threads", "train/tokens", "valid/epoch_end"} & tb.keys()

    # a killed process's view went past its checkpoint (here: an event file of points after
    # the run's end, older than what the resume writes): the resume purges them
    end = read_metrics(run, "done")[-1]["tokens"]
    with SummaryWriter(str(RunFiles(run).tb), filename_suffix=".killed") as w:
        for k in range(1, 4):
            w.add_scalar("valid/loss", 99.0, end + 100 * k)
    killed = next(RunFiles(run).tb.glob("*.killed"))
    killed.rename(killed.with_name("events.out.tfevents.0000000001.killed"))  # read first
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--quiet", "train.epochs=2"]) == 0
    assert "TensorBoard" not in capsys.readouterr().err
    tb = _scalars(run)
    assert _same(tb["valid/loss"], _logged(run, "valid", "loss"))      # both epochs, no 99
    assert len(tb["valid/loss"]) == 2

    # --force: a new run, a new view (the old run's event files go)
    assert _train(run, "--force", "train.epochs=1", "train.lr=1") == 0
    assert len(list(RunFiles(run).tb.iterdir())) == 1
    assert _same(_scalars(run)["valid/loss"], _logged(run, "valid", "loss"))


def test_without_tensorboard_a_run_has_no_tb_and_says_nothing(tmp_path, monkeypatch, capsys):
    """The import made to fail as it does where the package is not installed."""
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    run = tmp_path / "run"
    capsys.readouterr()
    assert _train(run, "train.epochs=1") == 0
    assert not RunFiles(run).tb.exists() and read_metrics(run, "valid")
    assert capsys.readouterr().err == ""
