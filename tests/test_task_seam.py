"""The Task seam: a task the trainer has never seen trains through ``treelm train``.

A toy sequence classification task (is the majority of a bit string ones?) and its model are
registered in ``TASKS`` / ``MODELS`` from this test only; the trainer is not touched. Training
must beat chance clearly, ``treelm eval`` must print the task's own scores, the best checkpoint
must be chosen by the task's primary score (accuracy, higher is better), and a resume must carry
on from the task's saved position.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F
import yaml
from torch import nn

from treelm.cli import main
from treelm.models import MODELS
from treelm.nn.stack import RNNStack
from treelm.run import load_run
from treelm.rundir.files import read_metrics
from treelm.tasks import TASKS
from treelm.tasks.base import Batch, Evaluation, LossOut, Task, TaskOptions


@dataclass
class MajorityOptions(TaskOptions):
    batch_size: int = 16


def _examples(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 2, (n, 9), generator=g)
    return x, (x.sum(1) > 4).long()


class MajorityTask(Task):
    name = "majority"
    Options = MajorityOptions

    def __init__(self, config: Any, device: torch.device) -> None:
        super().__init__(config)
        n = int(config.data["examples"])     # no DATA dataclass: the section as written
        # a task places its data on the trainer's device (the loop never moves batches)
        self.splits = {k: (x.to(device), y.to(device)) for k, (x, y) in
                       {"train": _examples(n, 1), "valid": _examples(200, 2),
                        "test": _examples(200, 3)}.items()}
        self.pos = 0

    @classmethod
    def create(cls, config, device, rank=0, world=1):
        return cls(config, device)

    @classmethod
    def open(cls, config, files, device, rank=0, world=1, with_data=False):
        assert (files.path / "majority.json").exists()     # its own table, saved by save()
        return cls(config, device)

    def save(self, files) -> None:
        (files.path / "majority.json").write_text(json.dumps({"symbols": [0, 1]}))

    def model_dims(self) -> dict[str, Any]:
        return {"n_symbols": 2, "n_classes": 2}

    def batches(self) -> Iterator[Batch]:
        x, y = self.splits["train"]
        bs = self.options.batch_size
        while self.pos < len(y):
            lo = self.pos
            self.pos += bs
            yield Batch((x[lo:self.pos], y[lo:self.pos]), len(y[lo:self.pos]),
                        last=self.pos >= len(y))

    def progress(self) -> tuple[int, int]:
        return min(self.pos, len(self.splits["train"][1])), len(self.splits["train"][1])

    def new_epoch(self) -> None:
        self.pos = 0

    def loss(self, model: nn.Module, batch: Batch) -> LossOut:
        x, y = batch.data
        ce = F.cross_entropy(model(x), y)
        return LossOut(ce, ce)

    @torch.no_grad()
    def evaluate(self, model, split="valid", batch_size=None) -> Evaluation:
        x, y = self.splits[split]
        was = model.training
        model.eval()
        acc = (model(x).argmax(-1) == y).float().mean().item()
        model.train(was)
        return Evaluation({"accuracy": 100 * acc}, "accuracy", higher_is_better=True,
                          size=len(y), unit="examples")

    def state_dict(self) -> dict[str, Any]:
        return {"pos": self.pos}

    def load_state_dict(self, state: dict[str, Any], same_shards: bool = True) -> None:
        self.pos = state["pos"]


class MajorityModel(nn.Module):
    def __init__(self, n_symbols: int, n_classes: int, cell: str = "lstm",
                 sizes: list[int] | None = None) -> None:
        super().__init__()
        sizes = sizes or [8, 16]
        self.embedding = nn.Embedding(n_symbols, sizes[0])
        self.rnn = RNNStack(cell, sizes)
        self.out = nn.Linear(sizes[-1], n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # x (B, T) -> scores (B, C)
        h = self.rnn(self.embedding(x.t())).out
        return self.out(h[-1])


@pytest.fixture
def majority(monkeypatch, tmp_path):
    monkeypatch.setitem(TASKS, "majority", MajorityTask)
    monkeypatch.setitem(MODELS, "majority", MajorityModel)
    cfg = {"seed": 3, "task": "majority", "data": {"examples": 512},
           "model": {"type": "majority", "cell": "lstm", "sizes": [8, 24]},
           "train": {"optimizer": "adam", "lr": 0.01, "epochs": 6, "batch_size": 16,
                     "threads": 1, "save_every_batches": 10}}
    path = tmp_path / "majority.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_new_task_trains_through_the_cli(majority, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--config", str(majority), "--out", str(run), "--quiet"]) == 0
    valid = [m for m in read_metrics(run, "valid")]
    assert len(valid) == 6 and all("accuracy" in m for m in valid)
    assert max(m["accuracy"] for m in valid) > 85          # chance is about 50-60
    assert main(["eval", str(run), "--split", "test"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["examples"] == 200 and out["accuracy"] > 80
    # the best checkpoint is the most accurate one (higher is better), not the last one
    best = max(m["accuracy"] for m in valid)
    done = read_metrics(run, "done")[-1]
    assert done["best_valid_accuracy"] == pytest.approx(best)
    r = load_run(run)
    assert r.task.evaluate(r.model, "valid").scores["accuracy"] == pytest.approx(best)


def test_a_new_task_resumes_from_its_position(majority, tmp_path):
    ref, run = tmp_path / "ref", tmp_path / "run"
    assert main(["train", "--config", str(majority), "--out", str(ref), "--quiet",
                 "train.epochs=3"]) == 0
    assert main(["train", "--config", str(majority), "--out", str(run), "--quiet",
                 "train.epochs=3", "train.max_minutes=0.0001"]) == 0     # stops mid-epoch
    assert read_metrics(run, "done")[-1]["epochs"] == 0
    assert main(["train", "--resume", str(run), "--quiet", "train.max_minutes=null"]) == 0
    a = [(m["event"], m["step"], m.get("loss")) for m in read_metrics(ref)
         if m["event"] == "train"]
    b = [(m["event"], m["step"], m.get("loss")) for m in read_metrics(run)
         if m["event"] == "train"]
    assert len(b) == len(a) and b[-1] == a[-1]
