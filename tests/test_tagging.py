"""Slot filling: conlleval scores, the tagger's windows / directions / Jordan feedback against
hand-built references, data checks, and a run through train / eval / tag on the synthetic sample."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from treelm.cli import main
from treelm.models.tagger import Tagger, reverse_within
from treelm.rundir.files import read_metrics
from treelm.tasks.conlleval import chunk_scores, chunks

# ----------------------------------------------------------------------------- conlleval


def test_chunks_follow_conlleval_rules():
    # I- after O or after another type starts a chunk (conlleval is lenient); B- always starts
    assert chunks("B-a I-a O B-b I-b I-a O I-c".split()) == {
        ("a", 0, 2), ("b", 3, 5), ("a", 5, 6), ("c", 7, 8)}
    assert chunks("B-a B-a I-a".split()) == {("a", 0, 1), ("a", 1, 3)}
    assert chunks("O O".split()) == set()
    assert chunks("I-x".split()) == {("x", 0, 1)}


def test_chunk_scores_hand_computed():
    gold = [["B-city", "I-city", "O", "B-date"], ["O", "B-city"]]
    pred = [["B-city", "I-city", "O", "B-time"], ["O", "B-city"]]
    # 3 gold chunks, 3 predicted, 2 correct (the wrongly typed date is both a miss and a false hit)
    s = chunk_scores(gold, pred)
    assert s["precision"] == pytest.approx(200 / 3) and s["recall"] == pytest.approx(200 / 3)
    assert s["f1"] == pytest.approx(200 / 3)
    # a boundary error makes the chunk wrong
    s = chunk_scores([["B-city", "I-city"]], [["B-city", "B-city"]])
    assert (s["precision"], s["recall"], s["f1"]) == (0.0, 0.0, 0.0)


def test_chunk_scores_match_seqeval():
    from seqeval import metrics as seqeval  # a dev dependency: this check never skips
    rng = random.Random(0)
    tags = ["O", "O", "B-a", "I-a", "B-b", "I-b", "I-a"]
    gold = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(400)]
    pred = [[t if rng.random() < 0.7 else rng.choice(tags) for t in g] for g in gold]
    ours = chunk_scores(gold, pred)
    assert ours["precision"] == pytest.approx(100 * seqeval.precision_score(gold, pred))
    assert ours["recall"] == pytest.approx(100 * seqeval.recall_score(gold, pred))
    assert ours["f1"] == pytest.approx(100 * seqeval.f1_score(gold, pred))


# ----------------------------------------------------------------------------- model


def test_reverse_within_keeps_padding_in_place():
    x = torch.arange(8).view(4, 2).float()      # columns: lengths 3 and 4
    r = reverse_within(x, torch.tensor([3, 4]))
    assert r[:, 0].tolist() == [4.0, 2.0, 0.0, 6.0]
    assert r[:, 1].tolist() == [7.0, 5.0, 3.0, 1.0]
    assert torch.equal(reverse_within(r, torch.tensor([3, 4])), x)


def test_window_concatenates_neighbours_with_pad_at_the_edges():
    torch.manual_seed(0)
    m = Tagger(vocab_size=10, n_labels=3, pad_id=0, sizes=[4, 5], window=3).eval()
    words = torch.tensor([[3], [5], [7]])
    x = m.windows(words)
    E = m.embedding.weight
    want = torch.stack([torch.cat([E[0], E[3], E[5]]), torch.cat([E[3], E[5], E[7]]),
                        torch.cat([E[5], E[7], E[0]])]).unsqueeze(1)
    assert torch.equal(x, want)


@pytest.mark.parametrize("cell", ["elman", "lstm", "gru", "onlstm"])
def test_bidirectional_scores_do_not_depend_on_the_batch(cell):
    torch.manual_seed(0)
    opts = {"chunk_size": 4} if cell == "onlstm" else None
    m = Tagger(vocab_size=20, n_labels=5, pad_id=0, n_intents=3, cell=cell, sizes=[6, 8],
               window=3, bidirectional=True, intent=True, cell_options=opts).eval()
    a, b = [4, 9, 2, 7, 3], [5, 6]
    words = torch.tensor([a, b + [0, 0, 0]]).t()
    batch = m(words, torch.tensor([5, 2]))
    alone = m(torch.tensor([b]).t(), torch.tensor([2]))
    assert torch.allclose(batch.scores[:2, 1], alone.scores[:, 0], atol=1e-6)
    assert torch.allclose(batch.intent[1], alone.intent[0], atol=1e-6)


def test_jordan_feeds_back_its_label_distribution():
    """feedback: labels is Mesnil's Jordan net: h_t = σ(W x_t + U y_{t-1} + b),
    y_t = softmax(V h_t + c), scores log y_t; checked against the equations written out."""
    torch.manual_seed(0)
    m = Tagger(vocab_size=12, n_labels=4, pad_id=0, cell="jordan", sizes=[3, 6], window=1,
               feedback="labels").double().eval()
    words = torch.tensor([[1], [5], [7], [2]])
    got = m(words, torch.tensor([4])).scores[:, 0]
    cell = m.stacks[0].layers[0]
    y = torch.zeros(4, dtype=torch.float64)
    want = []
    for w in words[:, 0]:
        x = m.embedding.weight[w]
        h = torch.sigmoid(cell.weight_ih @ x + cell.bias_ih + cell.weight_hh @ y)
        y = F.softmax(cell.weight_ho @ h + cell.bias_ho, -1)
        want.append(torch.log(y))
    assert torch.allclose(got, torch.stack(want), atol=1e-12)


def test_feedback_labels_needs_a_cell_with_an_output_layer():
    with pytest.raises(ValueError, match="bad options for cell 'lstm'"):
        Tagger(vocab_size=5, n_labels=3, pad_id=0, cell="lstm", sizes=[4, 4], feedback="labels")
    with pytest.raises(ValueError, match="window must be odd"):
        Tagger(vocab_size=5, n_labels=3, pad_id=0, window=4)


# ----------------------------------------------------------------------------- data checks


def _write(d, words, tags, labels=None):
    d.mkdir(parents=True, exist_ok=True)
    (d / "seq.in").write_text("".join(w + "\n" for w in words))
    (d / "seq.out").write_text("".join(t + "\n" for t in tags))
    if labels is not None:
        (d / "label").write_text("".join(t + "\n" for t in labels))


@pytest.fixture
def bad_data(tmp_path, root):
    """A config whose test split can be spoilt case by case."""
    ok = (["fly to boston", "fly to denver"], ["O O B-city", "O O B-city"])
    for split in ("train", "valid", "test"):
        _write(tmp_path / split, *ok)

    def run(words, tags):
        _write(tmp_path / "test", words, tags)
        return ["train", "--config", str(root / "configs/tiny-tagging.yaml"), "--out",
                str(tmp_path / "run"), "--quiet", f"data.train={tmp_path / 'train'}",
                f"data.valid={tmp_path / 'valid'}", f"data.test={tmp_path / 'test'}",
                "train.epochs=1", "model.intent=false"]
    return run


@pytest.mark.parametrize("words, tags, message", [
    (["fly to boston"], ["O B-city"], "seq.out:1: 2 tags for 3 words"),
    (["fly to boston", ""], ["O O B-city", ""], "seq.in:2: empty utterance"),
    (["fly to boston"], ["O O B-town"],
     "utterance 1: label 'B-town' does not occur in the training data"),
])
def test_bad_data_gives_one_line_errors_before_training(bad_data, capsys, tmp_path, words, tags,
                                                        message):
    assert main(bad_data(words, tags)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "run").exists()


def test_unknown_labels_can_be_scored_as_misses(bad_data, tmp_path, capsys):
    args = bad_data(["fly to boston"], ["O O B-town"])
    assert main(args + ["data.unknown_labels=score"]) == 0
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "run"), "--split", "test"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # the gold B-town chunk counts, and the model cannot find it: no chunk of the test is right
    assert out["recall"] == 0.0 and out["words"] == 3


# ----------------------------------------------------------------------------- end to end


ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tagging_run(tmp_path_factory):
    import os

    run = tmp_path_factory.mktemp("tagging") / "run"
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        assert main(["train", "--config", "configs/tiny-tagging.yaml", "--out", str(run),
                     "--quiet"]) == 0
    finally:
        os.chdir(here)
    return run


def test_tiny_tagger_learns_the_synthetic_slots(tagging_run, capsys):
    valid = read_metrics(tagging_run, "valid")
    assert len(valid) == 4 and all({"f1", "precision", "recall", "intent_accuracy"} <= set(m)
                                   for m in valid)
    assert max(m["f1"] for m in valid) > 90
    assert main(["eval", str(tagging_run), "--split", "test"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["words"] > 0 and out["f1"] > 90 and out["intent_accuracy"] > 90


def test_no_intent_output_means_no_intent_accuracy(tmp_path, capsys, monkeypatch):
    """Intent labels in the data but ``model.intent: false``: nothing to score (it was reported
    as 0.0, which read as a model that never gets an intent right)."""
    monkeypatch.chdir(ROOT)
    run = tmp_path / "run"
    assert main(["train", "--config", "configs/tiny-tagging.yaml", "--out", str(run), "--quiet",
                 "train.epochs=1", "model.intent=false"]) == 0
    assert all("intent_accuracy" not in m for m in read_metrics(run, "valid"))
    capsys.readouterr()
    assert main(["eval", str(run), "--split", "test"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "f1" in out and "intent_accuracy" not in out


def test_tag_prints_slots_as_text_and_json(tagging_run, capsys, monkeypatch, tmp_path):
    import io

    utterance = "show me flights from Boston to Denver tomorrow\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(utterance))
    assert main(["tag", str(tagging_run)]) == 0
    line = capsys.readouterr().out.strip()
    assert line == ("[atis_flight] show me flights from [Boston : fromloc.city_name] to "
                    "[Denver : toloc.city_name] [tomorrow : depart_date.date_relative]"), line
    f = tmp_path / "in.txt"
    f.write_text("what ground transportation is there in salt lake city\n")
    assert main(["tag", str(tagging_run), "--input", str(f), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["intent"] == "atis_ground_service"
    assert d["slots"] == [{"type": "city_name", "text": "salt lake city", "start": 6, "end": 9}]


def test_tag_blank_lines_and_empty_input(tagging_run, capsys, tmp_path):
    """A blank line gives an empty result (the output stays aligned with the input); input
    without any text is a one-line error; an unknown word is counted, or refused with --unk
    error naming the line."""
    f = tmp_path / "in.txt"
    f.write_text("fly to boston\n\nfly to denver\n")
    capsys.readouterr()
    assert main(["tag", str(tagging_run), "--input", str(f)]) == 0
    out = capsys.readouterr().out.split("\n")
    assert len(out) == 4 and out[1] == "" and out[0] and out[2] and out[3] == ""
    assert main(["tag", str(tagging_run), "--input", str(f), "--format", "json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert rows[1] == {"words": [], "tags": [], "slots": [], "intent": None}
    assert len(rows[0]["tags"]) == 3 and len(rows[2]["tags"]) == 3
    f.write_text("\n  \n")
    assert main(["tag", str(tagging_run), "--input", str(f)]) == 2
    assert capsys.readouterr().err.strip() == f"treelm: error: no input: {f} is empty"
    f.write_text("fly to boston\nfly to qqzzy\n")
    assert main(["tag", str(tagging_run), "--input", str(f)]) == 0
    err = capsys.readouterr().err.strip()
    assert err == "treelm: 1 symbol(s) outside the run's vocabulary read as <unk>: 'qqzzy'"
    assert main(["tag", str(tagging_run), "--input", str(f), "--unk", "error"]) == 2
    assert f"{f}:2: 'qqzzy' not in the run's vocabulary" in capsys.readouterr().err


# ----------------------------------------------------------------------------- epoch plan
def _slots_task(rank: int = 0, world: int = 1, batch_size: int = 7):
    import torch

    from treelm.tasks import read_run_config
    from treelm.tasks.tagging import TaggingTask

    data = {k: str(ROOT / "tests" / "data" / "slots" / k) for k in ("train", "valid", "test")}
    config = read_run_config({"task": "tagging", "seed": 5, "data": data,
                             "train": {"batch_size": batch_size}})
    return TaggingTask.create(config, torch.device("cpu"), rank, world)


@pytest.mark.parametrize("world", [1, 2])
def test_epoch_plan_is_the_one_tagging_always_drew(world):
    """The shared iterator gives each rank the batches the task drew itself before: the
    utterances shuffled by Random(seed · 1 000 003 + epoch), cut to a multiple of ``world``,
    every world-th, then ``batch_size`` at a time in that order."""
    import random

    for epoch in (0, 1):
        for rank in range(world):
            task = _slots_task(rank, world)
            task.load_state_dict({"epoch": epoch, "pos": 0, "pos_counts": "batches"})
            idx = list(range(len(task.split("train"))))
            random.Random(5 * 1_000_003 + epoch).shuffle(idx)
            idx = idx[: len(idx) // world * world][rank::world]
            assert task.epochs.plan() == [idx[i:i + 7] for i in range(0, len(idx), 7)]
            sizes = [b.size for b in task.batches()]
            train = task.split("train")
            assert sizes == [sum(len(train[i].words) for i in idx[j:j + 7])
                             for j in range(0, len(idx), 7)]


def test_a_checkpoint_counting_utterances_resumes_at_the_same_batch():
    """Before the shared iterator a tagging checkpoint's ``pos`` counted utterances (whole
    batches); it resumes at the batch it stopped before, the epoch's end included."""
    task = _slots_task()
    plan = task.epochs.plan()
    old = _slots_task()
    old.load_state_dict({"epoch": 0, "pos": 3 * 7})             # written by the old code
    first = next(old.batches())
    assert first.data[0].shape[1] == len(plan[3])
    ref = _slots_task()
    ref.load_state_dict({"epoch": 0, "pos": 3, "pos_counts": "batches"})
    assert all(a is b or a.equal(b) for a, b in zip(first.data, next(ref.batches()).data))
    n = len(task.split("train"))
    done = _slots_task()
    done.load_state_dict({"epoch": 0, "pos": n})
    assert list(done.batches()) == [] and done.state_dict()["pos"] == len(plan)
