"""Evaluation that keeps up and talks: the LM's stream evaluation against a token-by-token
reference, long passes (the cell called once per pass, not once per ``bptt`` rows), and progress
lines on stderr from every long command with the stdout result unchanged."""

import json
import os
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from treelm import progress
from treelm.cli import main
from treelm.data.batching import batchify
from treelm.models.lm import RNNLM
from treelm.progress import Ticker
from treelm.tasks.lm import evaluate_stream

V = 23
ROOT = Path(__file__).resolve().parents[1]


def _models(dtype: torch.dtype) -> tuple[RNNLM, RNNLM]:
    """The same random ON-LSTM LM twice: the fused kernel (evaluated) and the readable per-step
    cell (the reference)."""
    torch.manual_seed(0)
    kw = dict(cell="onlstm", sizes=[12, 16, 12], dropout=0.3, dropouth=0.2, dropouti=0.2,
              dropoute=0.1, wdrop=0.3)
    fused = RNNLM(V, cell_options={"chunk_size": 4, "impl": "cpu"}, **kw).to(dtype)
    ref = RNNLM(V, cell_options={"chunk_size": 4, "impl": "reference"}, **kw).to(dtype)
    ref.load_state_dict(fused.state_dict())
    return fused, ref


def _token_by_token(model: RNNLM, data: torch.Tensor, batch_size: int) -> float:
    """Mean −log p per token, one step at a time from the zero state, in float64 sums: column
    ``b`` of :func:`batchify` is an independent stream."""
    model.eval()
    source = batchify(data, batch_size)
    states, total, count = None, 0.0, 0
    with torch.no_grad():
        for t in range(source.size(0) - 1):
            logits, states = model.step(source[t], states)
            logp = F.log_softmax(logits.double(), -1)
            total -= logp.gather(1, source[t + 1].unsqueeze(1)).sum().item()
            count += batch_size
    return total / count


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
@pytest.mark.parametrize("batch_size", [1, 3])
def test_stream_loss_equals_a_token_by_token_reference(dtype, tol, batch_size):
    fused, ref = _models(dtype)
    data = torch.randint(0, V, (301,), generator=torch.Generator().manual_seed(1))
    want = _token_by_token(ref, data, batch_size)
    # passes of 16 tokens (several, the last one short) and of the default length (one)
    for tokens in (16, 4096):
        got = evaluate_stream(fused, data, batch_size, bptt=5, vocab_size=V, tokens=tokens)
        assert got == pytest.approx(want, abs=tol, rel=0)
    assert fused.training            # the model's mode is restored


def test_long_passes_call_each_cell_once_per_pass():
    """At batch 1 a 300-token stream is one pass (was one per ``bptt`` = 5 rows)."""
    fused, _ = _models(torch.float32)
    calls = []
    for cell in fused.layer_cells():
        cell.register_forward_hook(lambda m, args, out: calls.append(args[0].shape[0]))
    data = torch.randint(0, V, (301,), generator=torch.Generator().manual_seed(1))
    evaluate_stream(fused, data, 1, bptt=5, vocab_size=V)
    assert calls == [300, 300]
    calls.clear()
    evaluate_stream(fused, data, 1, bptt=5, vocab_size=V, tokens=128)
    assert calls == [128, 128, 128, 128, 44, 44]


# ------------------------------------------------------------------------------ the ticker
def test_ticker_lines_at_the_interval_and_a_last_one(capsys, monkeypatch):
    monkeypatch.setenv(progress.ENV_VAR, "0")
    with Ticker("test set", 10, "tokens") as tick:
        for _ in range(5):
            tick.update(2)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 6 and err[0].startswith("test set: 2/10 tokens, ")
    assert "tokens/s" in err[0] and "ETA" in err[0]
    assert err[-1].startswith("test set: 10/10 tokens") and err[-1].endswith("(done)")
    # the default interval: a short job prints nothing
    monkeypatch.delenv(progress.ENV_VAR)
    with Ticker("quick", 3) as tick:
        tick.update(3)
    assert capsys.readouterr().err == ""


def test_ticker_quiet_scope_unknown_total_and_bad_interval(capsys, monkeypatch):
    monkeypatch.setenv(progress.ENV_VAR, "0")
    with progress.reporting(quiet=True), Ticker("x", 4) as tick:
        tick.update(4)
    assert capsys.readouterr().err == ""
    with progress.reporting(every=3600.0), Ticker("x", 4) as tick:     # the scope's interval
        tick.update(4)
    assert capsys.readouterr().err == ""
    with Ticker("stream", None, "sentences") as tick:
        tick.update(7)
    line = capsys.readouterr().err.splitlines()[0]
    assert line.startswith("stream: 7 sentences, ") and "ETA" not in line
    with pytest.raises(RuntimeError), Ticker("failing", 4) as tick:   # no "(done)" on an error
        tick.update(1)
        raise RuntimeError
    assert "(done)" not in capsys.readouterr().err
    monkeypatch.setenv(progress.ENV_VAR, "soon")
    with pytest.raises(ValueError, match="TREELM_PROGRESS_SECONDS"):
        Ticker("x", 1)


# ---------------------------------------------------------------- commands, end to end
@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("evalrun") / "lm"
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        assert main(["train", "--config", "configs/tiny-lm.yaml", "--out", str(run), "--quiet",
                     "train.epochs=1"]) == 0
    finally:
        os.chdir(cwd)
    return run


def _cli(args: list[str], seconds: str | None, capsys, monkeypatch) -> tuple[str, str]:
    """``treelm ARGS`` in this process with the progress interval ``seconds`` (``None``: the
    default): (stdout, stderr)."""
    if seconds is None:
        monkeypatch.delenv(progress.ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(progress.ENV_VAR, seconds)
    capsys.readouterr()
    assert main(args) == 0
    out = capsys.readouterr()
    return out.out, out.err


def test_eval_prints_progress_and_the_same_result(lm_run, capsys, monkeypatch):
    args = ["eval", str(lm_run), "--split", "test"]
    out, err = _cli(args, None, capsys, monkeypatch)
    out0, err0 = _cli(args, "0", capsys, monkeypatch)
    assert out == out0 and json.loads(out)["tokens"] > 0
    assert err == ""
    lines = err0.splitlines()
    assert lines and all(line.startswith("test set: ") for line in lines)
    assert lines[-1].endswith("(done)")


def test_parse_and_suite_print_progress(lm_run, tmp_path, capsys, monkeypatch):
    text = tmp_path / "s.txt"
    text.write_text("the company said it would buy the shares\nprices rose in new york\n")
    args = ["parse", str(lm_run), "--input", str(text)]
    out, err = _cli(args, None, capsys, monkeypatch)
    out0, err0 = _cli(args, "0", capsys, monkeypatch)
    assert out == out0 and len(out.splitlines()) == 2
    assert "reading levels: " in err0 and re.search(r"^parsing: 2(/2)? sentences", err0, re.M)
    _, err = _cli(["suite", "agreement", str(lm_run), "--max-per-construction", "1"], "0",
                  capsys, monkeypatch)
    assert any(line.startswith("scoring: ") for line in err.splitlines())


def test_final_validation_talks_unless_quiet(tmp_path, root, capsys):
    os.chdir(root)
    args = ["train", "--config", "configs/tiny-lm.yaml", "train.epochs=1",
            "train.progress_seconds=0.000001"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert "valid set: " in capsys.readouterr().err
    assert main([*args, "--out", str(tmp_path / "b"), "--quiet"]) == 0
    assert "valid set: " not in capsys.readouterr().err


# ------------------------------------------------------------------ long sentences (parse)
def test_a_long_sentence_is_read_in_pieces_with_the_same_levels(monkeypatch):
    from treelm.syntax import levels

    fused, _ = _models(torch.float32)
    ids = torch.randint(1, V, (3000,), generator=torch.Generator().manual_seed(2)).tolist()
    whole = levels.compute_levels(fused, [ids, ids[:7]], eos=0)
    monkeypatch.setattr(levels, "STEPS", 1000)
    calls = []
    hook = fused.layer_cells()[0].register_forward_hook(
        lambda m, args, out: calls.append(tuple(args[0].shape[:2])))
    pieces = levels.compute_levels(fused, [ids, ids[:7]], eos=0)
    hook.remove()
    # the opening <eos> once, then the batch of two in pieces of 1000 // 2 steps: both sentences
    # in the first, the long one alone once the short one (7 words) has ended
    assert calls == [(1, 1), (500, 2), *[(500, 1)] * 5]
    for (a, b), (c, d) in zip(whole, pieces):
        assert a.shape == c.shape and b.shape == d.shape
        assert abs(a - c).max() < 1e-6 and abs(b - d).max() < 1e-6


def test_parse_of_a_10000_word_line_talks(lm_run, tmp_path, capsys, monkeypatch):
    words = ((ROOT / "tests/data/tiny.txt").read_text().split() * 2)[:10_000]
    line = tmp_path / "long.txt"
    line.write_text(" ".join(words) + "\n")
    out, err = _cli(["parse", str(lm_run), "--input", str(line)], "0", capsys, monkeypatch)
    assert out.count("(") == len(words) - 1 == out.count(")")     # a binary tree over them
    assert "reading levels: 4,096/10,000 words" in err


def test_recurrences_of_small_steps_run_on_one_thread():
    from treelm.threads import SMALL_STEP, recurrence_threads, step_size

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        fused, _ = _models(torch.float32)
        per_row = step_size(fused, 1)       # U of both layers: (4·16 + 2·4)·16 + (4·12 + 2·3)·12
        assert per_row == 72 * 16 + 54 * 12
        big = SMALL_STEP // per_row + 1     # the first batch whose step is not small
        with recurrence_threads(fused, big - 1):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with recurrence_threads(fused, big):
            assert torch.get_num_threads() == 2
        with recurrence_threads(torch.nn.Linear(2, 2), 1):     # no recurrent cells: unchanged
            assert torch.get_num_threads() == 2
        seen = []
        fused.layer_cells()[0].register_forward_hook(
            lambda m, args, out: seen.append(torch.get_num_threads()))
        data = torch.randint(0, V, (big * 2 + 2,), generator=torch.Generator().manual_seed(1))
        evaluate_stream(fused, data, 1, bptt=5, vocab_size=V)
        evaluate_stream(fused, data, big, bptt=5, vocab_size=V)
        assert set(seen[:-1]) == {1} and seen[-1] == 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("config,unit", [("tiny-tagging", "utterances"), ("tiny-logic", "pairs"),
                                         ("tiny-translation", "sentences")])
def test_every_task_reports_its_evaluation(config, unit, capsys, monkeypatch):
    """Each task's evaluation counts its units on stderr (an untrained model: the same code);
    the scores do not depend on whether it talks."""
    from treelm.config import load_config
    from treelm.train.builders import build_task, build_task_model, read_config

    monkeypatch.chdir(ROOT)
    cfg = load_config(f"configs/{config}.yaml")
    _, config = read_config(cfg)
    torch.manual_seed(0)
    task = build_task(config, torch.device("cpu"))
    model = build_task_model(config, task)
    monkeypatch.delenv(progress.ENV_VAR, raising=False)
    quiet = task.evaluate(model, "valid").scores
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(progress.ENV_VAR, "0")
    talking = task.evaluate(model, "valid").scores
    err = capsys.readouterr().err.splitlines()
    assert talking == quiet
    assert err and all(f" {unit}, " in line for line in err), err
