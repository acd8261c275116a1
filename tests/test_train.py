"""The trainer end to end on the tiny config: learning, resume after SIGKILL, run-dir errors."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_train_eval_parse import MRG  # five WSJ-style sentences: the dev trees of a resume

from treelm.cli import main
from treelm.errors import CheckpointError
from treelm.run import CHECKPOINTS, load_run
from treelm.rundir.checkpoint import load_trainer_state, read_pointer
from treelm.rundir.files import RunFiles, read_metrics
from treelm.train.optim import Averager, make_optimizer

CFG = "configs/tiny-lm.yaml"


def _metrics(run: Path) -> list[dict]:
    return read_metrics(run)


def _train(run: Path, *overrides: str) -> None:
    assert main(["train", "--config", CFG, "--out", str(run), "--quiet", *overrides]) == 0


def test_training_lowers_valid_loss_and_eval_matches(tmp_path, root, capsys):
    os.chdir(root)
    run = tmp_path / "r"
    _train(run, "train.epochs=3")
    vals = [m for m in _metrics(run) if m["event"] == "valid"]
    assert len(vals) == 3 and vals[-1]["loss"] < vals[0]["loss"]
    # the run's account of its time: every phase, summing to the whole (issue 56)
    done = [m for m in _metrics(run) if m["event"] == "done"][-1]
    phases = done["seconds_by_phase"]
    assert list(phases) == ["start", "steps", "validation", "checkpoints", "loop"]
    assert phases["start"] > 0 and phases["steps"] > 0 and phases["validation"] > 0
    assert phases["checkpoints"] > 0 and phases["loop"] >= 0     # (3 epoch-end saves)
    assert sum(phases.values()) == pytest.approx(done["elapsed"], abs=0.06)
    assert main(["eval", str(run), "--split", "valid"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    best = min(v["loss"] for v in vals)
    assert out["loss"] == pytest.approx(best, abs=1e-4)


@pytest.mark.parametrize("cell,opts", [("lstm", []), ("gru", []),
                                       ("elman", ["model.cell_options={}"])])
def test_other_cells_train(tmp_path, root, cell, opts):
    os.chdir(root)
    run = tmp_path / cell
    _train(run, f"model.cell={cell}", "model.cell_options={}", "train.epochs=1", *opts)
    assert (run / "checkpoint.json").exists()


def test_averager_trigger_rule_and_mean():
    """Merity et al. Alg. 1: switch when the newest loss is worse than min(all but last n)."""
    p = torch.nn.Parameter(torch.zeros(3))
    avg = Averager([p], nonmono=2)
    assert not avg.maybe_trigger([5.0, 4.0])              # too few evaluations
    assert not avg.maybe_trigger([5.0, 4.0, 4.5])         # 4.5 < min([5.0])
    assert avg.maybe_trigger([5.0, 4.0, 4.5, 4.2])        # 4.2 > min([5.0, 4.0])
    for v in (1.0, 2.0, 3.0):
        with torch.no_grad():
            p.fill_(v)
        avg.update()
    avg.swap()
    assert torch.allclose(p, torch.full((3,), 1.5))       # mean of 0 (at switch), 1, 2, 3
    avg.swap()
    assert torch.allclose(p, torch.full((3,), 3.0))


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_momentum_by_hand(nesterov):
    """v ← μ v + g; x ← x − η v (classical) or x ← x − η (g + μ v) (Nesterov), on f = ½ x²."""
    p = torch.nn.Parameter(torch.tensor([1.0], dtype=torch.float64))
    opt = make_optimizer("sgd", [p], lr=0.1, weight_decay=0.0, momentum=0.9, nesterov=nesterov)
    x, v = 1.0, 0.0
    for _ in range(3):
        opt.zero_grad()
        (0.5 * p.pow(2)).sum().backward()
        opt.step()
        g = x
        v = 0.9 * v + g
        x -= 0.1 * ((g + 0.9 * v) if nesterov else v)
        assert p.item() == pytest.approx(x, abs=1e-12)
    with pytest.raises(ValueError, match="options of sgd"):
        make_optimizer("adam", [p], 0.1, 0.0, momentum=0.9)
    with pytest.raises(ValueError, match="nesterov needs momentum"):
        make_optimizer("sgd", [p], 0.1, 0.0, nesterov=True)


@pytest.mark.parametrize("momentum,nesterov", [(0.0, False), (0.9, False), (0.99, True)])
def test_sgd_is_fused_and_steps_as_the_loop_does(momentum, nesterov):
    """The fused SGD step (one pass a tensor) gives torch's per-tensor loop's parameters to the
    last bit, with weight decay, in groups of their own rates; a state saved by the loop's
    optimiser resumes fused, to the same bits."""
    torch.manual_seed(0)
    start = [torch.randn(300, 41), torch.randn(1000), torch.randn(7, 3, 5)]
    grads = [[torch.randn_like(x) * 1e-2 for x in start] for _ in range(4)]

    def run(fused, steps, resume=None):
        ps = [torch.nn.Parameter(x.clone()) for x in start]
        name = "sgd" if momentum else "ntasgd"
        if fused:
            opt = make_optimizer(name, ps, 0.5, 1.2e-3, momentum, nesterov, scaled=[(ps[2:], 0.1)])
        else:
            opt = torch.optim.SGD([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.05}], lr=0.5,
                                  weight_decay=1.2e-3, momentum=momentum, nesterov=nesterov)
        if resume is not None:
            for p, x in zip(ps, resume[0]):
                p.data.copy_(x)
            opt.load_state_dict(resume[1])
        for gs in steps:
            for p, g in zip(ps, gs):
                p.grad = g.clone()
            opt.step()
        return [p.detach().clone() for p in ps], opt

    loop, _ = run(False, grads)
    fused, opt = run(True, grads)
    assert all(g["fused"] for g in opt.param_groups)
    assert all(torch.equal(a, b) for a, b in zip(loop, fused))
    half, unfused = run(False, grads[:2])
    resumed, opt = run(True, grads[2:], resume=(half, unfused.state_dict()))
    assert all(g["fused"] for g in opt.param_groups)
    assert all(torch.equal(a, b) for a, b in zip(loop, resumed))


def test_ntasgd_switches_and_saves_averaged(tmp_path, root):
    os.chdir(root)
    run = tmp_path / "asgd"
    # a huge learning rate makes validation worsen quickly, which triggers the switch
    _train(run, "train.optimizer=ntasgd", "train.nonmono=1", "train.epochs=5", "train.lr=60")
    assert any(m["event"] == "asgd_start" for m in _metrics(run))
    ptr = read_pointer(run)
    assert (run / ptr["last"] / "averaged.safetensors").exists()


def _weights(run: Path, which: str = "last") -> dict[str, torch.Tensor]:
    r = load_run(run, which)
    return {k: v.clone() for k, v in r.model.state_dict().items()}


@pytest.fixture
def restore_determinism():
    """``train.deterministic`` switches process-wide flags: put them back for the other tests."""
    before = (torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled(),
              torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
              os.environ.get("CUBLAS_WORKSPACE_CONFIG"))
    yield
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[2:4]
    if before[4] is None:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = before[4]


# on CUDA a resume is exact only with deterministic kernels (treelm.train.reproducible)
EXACT = ["train.deterministic=true"] if torch.cuda.is_available() else []


def test_resume_after_sigkill_matches_uninterrupted(tmp_path, root, restore_determinism):
    """Kill mid-epoch with SIGKILL, resume, and get the same curve and weights as one run; with
    tree F1 on dev trees at every validation, the same best, best-trees and best-trees-<rule>
    checkpoints and the same trees.json (issue 44)."""
    os.chdir(root)
    treebank = tmp_path / "mini.mrg"
    treebank.write_text(MRG, encoding="utf-8")
    common = ["train.epochs=3", "train.save_every_batches=7", "train.log_interval=5", *EXACT,
              f"train.eval_parse={{treebank: {treebank}}}", "train.eval_every_units=1500"]
    ref = tmp_path / "ref"
    _train(ref, *common)
    run = tmp_path / "killed"
    cmd = [sys.executable, "-m", "treelm.cli", "train", "--config", CFG, "--out", str(run),
           "--quiet", *common]
    proc = subprocess.Popen(cmd, cwd=root)
    # wait until a mid-epoch checkpoint of epoch 2 exists, then kill without warning
    _wait_for(run, lambda ls: any('"epoch": 2' in l and '"train"' in l for l in ls), proc,
              what="a training line of epoch 2")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (run / "checkpoint.json").exists()
    assert main(["train", "--resume", str(run), "--quiet"]) == 0
    def curve(r: Path) -> list[tuple]:     # every event (the precision line once), its loss
        losses = [(m, m.get("loss", m.get("best_valid_loss"))) for m in _metrics(r)]
        return [(m["event"], m["step"], None if x is None else round(x, 6)) for m, x in losses]

    a, b = curve(ref), curve(run)
    assert a == b
    assert [v for v in _metrics(ref) if v["event"] == "valid"] == [  # tree F1s too (elapsed
        {**v, "elapsed": w["elapsed"]}                               # aside)
        for v, w in zip(_metrics(run), _metrics(ref)) if v["event"] == "valid"]
    # the pointer's checkpoints, each at the same step with the same weights, and trees.json
    # (the directories' numbers aside: a kill while a checkpoint was written may shift them)
    assert set(read_pointer(ref)) == set(read_pointer(run)) >= set(CHECKPOINTS)
    keys = ("step", "tokens", "best", "tree_best", "tree_top", "tree_top_rule")
    for which in CHECKPOINTS:
        sa, sb = ({k: load_trainer_state(r, which)["loop"][k] for k in keys} for r in (ref, run))
        assert sa == sb
        wa, wb = _weights(ref, which), _weights(run, which)
        assert all(torch.equal(wa[k], wb[k]) for k in wa)
    ta, tb = (json.loads((r / "trees.json").read_text(encoding="utf-8")) for r in (ref, run))
    assert set(ta) == set(CHECKPOINTS) - {"last"} and all(
        {**ta[n], "path": None} == {**tb[n], "path": None} for n in ta)


def test_deterministic_option_and_saved_rng_states(tmp_path, root, restore_determinism):
    """``train.deterministic`` turns PyTorch's deterministic algorithms on; the checkpoint holds
    the CPU generator's state and, on CUDA, the training device's, and loads weights_only."""
    os.chdir(root)
    run = tmp_path / "det"
    _train(run, "train.epochs=1", "train.deterministic=true")
    assert torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.deterministic
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    state = load_trainer_state(run)             # torch.load(weights_only=True)
    assert isinstance(state["torch_rng"], torch.Tensor)
    assert ("cuda_rng" in state) == torch.cuda.is_available()   # train.device=auto


def test_cuda_rng_state_saved_and_restored(monkeypatch):
    """The CUDA generator of the training device goes into the checkpoint and comes back on
    resume, on CUDA only (CPU-side check, with the CUDA calls recorded)."""
    from treelm.train.reproducible import rng_state, set_rng_state

    calls = []
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda d: calls.append(("get", d))
                        or torch.zeros(4, dtype=torch.uint8))
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda s, d: calls.append(("set", d)))
    cuda1 = torch.device("cuda", 1)
    saved = rng_state(cuda1)
    assert set(saved) == {"torch_rng", "cuda_rng"} and calls == [("get", cuda1)]
    assert set(rng_state(torch.device("cpu"))) == {"torch_rng"}
    set_rng_state(saved, torch.device("cpu"))          # a GPU run resumed on a CPU
    assert calls == [("get", cuda1)]
    set_rng_state(saved, cuda1)
    assert calls == [("get", cuda1), ("set", cuda1)]
    set_rng_state({"torch_rng": saved["torch_rng"]}, cuda1)   # a CPU run resumed on a GPU
    assert len(calls) == 2


def test_run_dir_errors(tmp_path, root, capsys):
    os.chdir(root)
    run = tmp_path / "r"
    _train(run, "train.epochs=1")
    # not a run dir
    assert main(["eval", str(tmp_path)]) == 2
    assert "not a treelm run directory" in capsys.readouterr().err
    # another model: same type but other sizes -> clear error
    other = tmp_path / "other"
    _train(other, "train.epochs=1", "model.sizes=[16,24,16]", "model.cell_options={chunk_size: 8}")
    ptr = read_pointer(run)
    optr = read_pointer(other)
    (run / ptr["best"] / "model.safetensors").write_bytes(
        (other / optr["best"] / "model.safetensors").read_bytes())
    with pytest.raises(CheckpointError, match="do not fit|another model"):
        load_run(run)
    # corrupted weights
    (run / ptr["best"] / "model.safetensors").write_bytes(b"garbage" * 10)
    assert main(["eval", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert "corrupted" in err and len(err.splitlines()) == 1
    # corrupted trainer state: resume refuses clearly, nothing is unpickled
    (run / ptr["last"] / "trainer.pt").write_bytes(b"\x80\x04junk")
    assert main(["train", "--resume", str(run), "--quiet"]) == 2
    assert "corrupted" in capsys.readouterr().err


def test_config_errors(tmp_path, root, capsys):
    os.chdir(root)
    assert main(["train", "--config", "nope.yaml", "--out", str(tmp_path / "x")]) == 2
    assert "no such config file" in capsys.readouterr().err
    assert main(["train", "--config", CFG, "--out", str(tmp_path / "x"), "train.bogus=1"]) == 2
    assert "unknown train options" in capsys.readouterr().err
    assert main(["train", "--config", CFG, "--out", str(tmp_path / "x"), "model.cell=xyz"]) == 2
    assert "unknown cell" in capsys.readouterr().err
    assert main(["train", "--config", CFG, "--out", str(tmp_path / "x"),
                 "data.file=/no/such.txt"]) == 2
    assert "/no/such.txt: no such file" in capsys.readouterr().err


def test_runs_of_the_previous_layout_load_and_resume_exactly(tmp_path, root, capsys,
                                                            monkeypatch):
    """A run written by commit 4562731 (before the Task seam: ``decoder.*`` weights, a
    vocabulary with a level, a flat trainer state) evaluates to the loss it recorded, generates,
    and resumes deterministically from its saved weights and optimiser, as far along as a run of
    today's code after the same epoch. (Not bit for bit against today's run any more: since the
    fused output-layer loss and the faster dropout masks, today's code rounds the loss and draws
    the masks differently from 4562731's.)"""
    os.chdir(root)
    # that run was trained on the Python fused ON-LSTM path; the C++ loop rounds its float32
    # gates differently in the last bits: the evaluation below is compared to 4 decimals
    monkeypatch.setenv("TREELM_CXX", "0")
    import shutil

    old, again = tmp_path / "old", tmp_path / "again"
    shutil.copytree(root / "tests/data/run-4562731", old)
    shutil.copytree(root / "tests/data/run-4562731", again)
    assert main(["eval", str(old)]) == 0
    ev = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert ev["loss"] == pytest.approx(min(m["loss"] for m in _metrics(old)
                                           if m["event"] == "valid"), abs=1e-4)
    assert main(["generate", str(old), "--prompt", "the company", "--length", "5"]) == 0
    assert capsys.readouterr().out.startswith("the company")
    # the committed run was trained on a CPU: the runs stay there, so the curves can agree
    for run in (old, again):
        assert main(["train", "--resume", str(run), "--quiet", "train.epochs=2",
                     "train.device=cpu"]) == 0
    new = tmp_path / "new"
    _train(new, "train.epochs=2", "train.device=cpu")

    def curve(r: Path) -> list[tuple]:     # every event (the precision line once), its loss
        losses = [(m, m.get("loss", m.get("best_valid_loss"))) for m in _metrics(r)]
        return [(m["event"], m["step"], None if x is None else round(x, 6)) for m, x in losses]

    def losses(r: Path, epoch: int) -> list[float]:
        return [m["loss"] for m in _metrics(r) if m["event"] == "train" and m["epoch"] == epoch]

    assert curve(old) == curve(again)
    resumed, today = losses(old, 2), losses(new, 2)
    assert len(resumed) == len(today) > 0
    mean = sum(resumed) / len(resumed)
    assert mean == pytest.approx(sum(today) / len(today), rel=0.01)
    assert mean < sum(losses(new, 1)) / len(losses(new, 1)) - 0.1     # not from the start


def test_sentencepiece_lm_trains_and_generates(tmp_path, root, capsys):
    """data.tokenizer=bpe: pieces learned on the training lines, saved in the run, used by
    eval and generate."""
    os.chdir(root)
    run = tmp_path / "bpe"
    _train(run, "data.tokenizer=bpe", "data.vocab_size=300", "train.epochs=1")
    assert (run / "tokenizer.model").exists()
    assert json.loads((run / "tokenizer.json").read_text())["kind"] == "bpe"
    assert main(["eval", str(run)]) == 0
    assert "ppl" in json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["generate", str(run), "--prompt", "the company", "--length", "5"]) == 0
    assert capsys.readouterr().out.startswith("the company")


def _wait_until(cond, proc, what: str, timeout: float = 60) -> None:
    """Poll ``cond()`` while ``proc`` runs; fail the test, naming ``what`` was awaited, when the
    process ends first or ``timeout`` seconds pass (the signal would come too late or never)."""
    deadline = time.time() + timeout
    while not cond():
        if proc.poll() is not None:
            pytest.fail(f"the training process ended (exit {proc.returncode}) before {what}")
        if time.time() > deadline:
            proc.kill()
            proc.wait()
            pytest.fail(f"waited {timeout:.0f} s for {what}; it never came")
        time.sleep(0.02)


def _wait_for(run: Path, pred, proc, timeout: float = 60, what: str = "the awaited line") -> None:
    """Wait until ``pred`` holds of the metrics log's lines (read as text: the last line may be
    half written)."""
    def cond() -> bool:
        m = RunFiles(run).metrics
        return pred(m.read_text().splitlines() if m.exists() else [])

    _wait_until(cond, proc, f"{what} in {RunFiles(run).metrics}", timeout)


def test_three_interrupts_lose_nothing(tmp_path, root):
    """SIGINT, SIGTERM, SIGINT at three points of a run, each followed by --resume: the same
    curve and weights as one uninterrupted run (nothing lost beyond the batch in progress)."""
    os.chdir(root)
    common = ["train.epochs=4", "train.log_interval=5"]
    ref = tmp_path / "ref"
    _train(ref, *common)
    run = tmp_path / "stopped"
    steps = []
    for k, sig in enumerate((signal.SIGINT, signal.SIGTERM, signal.SIGINT)):
        if k == 0:
            cmd = ["train", "--config", CFG, "--out", str(run), *common]
        else:
            cmd = ["train", "--resume", str(run)]
        proc = subprocess.Popen([sys.executable, "-m", "treelm.cli", *cmd], cwd=root,
                                stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        _wait_for(run, lambda ls, k=k: any(f'"epoch": {k + 2}' in l for l in ls), proc,
                  what=f"a line of epoch {k + 2}")
        proc.send_signal(sig)
        err = proc.communicate(timeout=60)[1]
        assert proc.returncode == 130, err
        assert "saved a checkpoint at step" in err and "--resume" in err, err
        steps.append(int(err.split("checkpoint at step ")[1].split()[0]))
    assert steps == sorted(steps) and len(set(steps)) == 3
    assert main(["train", "--resume", str(run), "--quiet"]) == 0

    def curve(r: Path) -> list[tuple]:     # every event (the precision line once), its loss
        losses = [(m, m.get("loss", m.get("best_valid_loss"))) for m in _metrics(r)]
        return [(m["event"], m["step"], None if x is None else round(x, 6)) for m, x in losses]

    assert curve(ref) == curve(run)
    wa, wb = _weights(ref), _weights(run)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_failed_start_leaves_nothing_and_killed_start_resumes(tmp_path, root):
    os.chdir(root)
    out = tmp_path / "r"
    assert main(["train", "--config", CFG, "--out", str(out), "train.lr=-1"]) == 2
    assert not out.exists()
    # a run killed right after it started has its step-0 checkpoint: --resume works
    proc = subprocess.Popen([sys.executable, "-m", "treelm.cli", "train", "--config", CFG,
                             "--out", str(out), "--quiet", "train.epochs=50"], cwd=root)
    _wait_until((out / "checkpoint.json").exists, proc, f"{out / 'checkpoint.json'}")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert main(["train", "--resume", str(out), "--quiet", "train.epochs=1"]) == 0


def test_data_paths_are_absolute_and_changes_are_noticed(tmp_path, root, capsys):
    """The saved config names data files absolutely (eval works from any directory), and eval
    and resume warn in one line when a data file changed after training."""
    import shutil

    data = tmp_path / "corpus.txt"
    shutil.copy(root / "tests/data/tiny.txt", data)
    os.chdir(tmp_path)
    run = tmp_path / "r"
    assert main(["train", "--config", str(root / CFG), "--out", "r", "--quiet",
                 "data.file=corpus.txt", "train.epochs=1"]) == 0
    saved = (run / "config.yaml").read_text()
    assert f"file: {data}" in saved
    os.chdir(root)
    capsys.readouterr()
    assert main(["eval", str(run)]) == 0
    assert "warning" not in capsys.readouterr().err
    with open(data, "a") as f:
        f.write("one more line of text\n")
    assert main(["eval", str(run)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "corpus.txt changed since the run was trained" in err[0]
    assert main(["train", "--resume", str(run), "--quiet", "train.epochs=2"]) == 0
    assert "changed since the run was trained" in capsys.readouterr().err


def test_plain_progress_lines_without_a_terminal(tmp_path, root, capsys):
    """Under nohup or in a log (stderr not a terminal): a line every progress_seconds with
    tokens/s, loss, the epoch's ETA and the budget left."""
    os.chdir(root)
    assert main(["train", "--config", CFG, "--out", str(tmp_path / "r"), "train.epochs=1",
                 "train.progress_seconds=0.001", "train.max_minutes=30"]) == 0
    lines = [l for l in capsys.readouterr().err.splitlines() if "epoch ETA" in l]
    assert lines, "no progress line"
    assert all("tok/s" in l and "loss" in l and "left of budget" in l for l in lines)


def test_three_file_route_from_the_command_line(tmp_path, root, capsys):
    """data.file=null removes the key, so the three-file route works with overrides alone."""
    os.chdir(root)
    lines = (root / "tests/data/tiny.txt").read_text().splitlines()
    for name, part in (("tr", lines[:80]), ("va", lines[80:90]), ("te", lines[90:])):
        (tmp_path / f"{name}.txt").write_text("\n".join(part) + "\n")
    run = tmp_path / "r"
    assert main(["train", "--config", CFG, "--out", str(run), "--quiet", "train.epochs=1",
                 "data.file=null", "data.split=null", f"data.train={tmp_path / 'tr.txt'}",
                 f"data.valid={tmp_path / 'va.txt'}", f"data.test={tmp_path / 'te.txt'}"]) == 0
    assert "file:" not in (run / "config.yaml").read_text()
    assert main(["eval", str(run), "--split", "test"]) == 0


def test_float_written_without_a_dot_is_a_float() -> None:
    """YAML 1.1 (PyYAML) reads ``1e-3`` as a string; a float field takes it as the number it
    spells, in a config file and in a ``key=value`` override alike, and text stays an error."""
    from treelm.config import apply_overrides, parse_section
    from treelm.errors import ConfigError
    from treelm.train.config import TrainConfig

    cfg = apply_overrides({"train": {"lr": "5e-4"}}, ["train.clip=2E+1"])
    tc = parse_section(TrainConfig, cfg["train"], "train")
    assert tc.lr == 5e-4 and isinstance(tc.lr, float) and tc.clip == 20.0
    with pytest.raises(ConfigError, match="train.lr = 'fast': expected a finite number"):
        parse_section(TrainConfig, {"lr": "fast"}, "train")
    with pytest.raises(ConfigError, match="train.lr"):
        parse_section(TrainConfig, {"lr": "inf"}, "train")


def test_the_waits_fail_loudly():
    """A wait whose process ends first, or whose condition never comes, fails the test (and
    kills the process) instead of carrying on to a signal sent too late."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with pytest.raises(pytest.fail.Exception, match="ended .exit 0. before the line"):
        _wait_until(lambda: False, proc, "the line")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with pytest.raises(pytest.fail.Exception, match="waited 0 s for the line; it never came"):
        _wait_until(lambda: False, proc, "the line", timeout=0.2)
    assert proc.poll() is not None
