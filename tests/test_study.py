"""``treelm study``: a tiny study (2 variants × 2 seeds of the tiny config, trees scored on a
five-sentence treebank) through the local launcher, whole, killed and rerun.

- the study file is checked whole before anything runs, each problem in one line;
- a driver and one training killed with SIGKILL, then the same command again: the record equals
  an uninterrupted study's (every figure; times and job ids aside);
- a driver started while another driver's job trains a run (and after that driver was killed,
  its job still alive) submits no second copy of the run;
- the summary: per variant and rule the layer with the best mean dev F1, the per-run choice.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_train_eval_parse import MRG  # the five-sentence treebank of the tracking tests

from treelm.cli import main
from treelm.study.record import read_record

ROOT = Path(__file__).resolve().parent.parent
#: tokens a run of the whole study trains (``tiny_study``, ``tests/conftest.py``); the studies
#: compared against it train as many
WHOLE = 8000


def write_study(where: Path, name: str = "tiny", units: int = 3000, seeds: int = 2,
                extra: str = "", runs: str = "runs", record: str = "record.json") -> Path:
    """A tiny study in ``where``: its treebank, its runs (folder ``runs``) and its record (file
    ``record``) all inside."""
    (where / "mini.mrg").write_text(MRG, encoding="utf-8")
    path = where / f"{name}.yaml"
    path.write_text(f"""\
name: {name}
config: {ROOT / 'configs/tiny-lm.yaml'}
variants:
  paper: {{}}
  symmetric: {{model.cell_options.master_input: symmetric}}
seeds: {seeds}
budget: {{max_units: {units}, eval_every_units: 1000}}
overrides: {{data.file: {ROOT / 'tests/data/tiny.txt'}, train.save_every_minutes: 0.001}}
score:
  trees: {{dev: {where / 'mini.mrg'}, test: {where / 'mini.mrg'}, test_max_len: [null, 10]}}
  eval: [{{split: test}}]
choose: [variant, layer]
runs: {where / runs}
record: {where / record}
env: {{TREELM_GEMM: mm}}        # the same products in every process: bit-identical reruns
launcher: {{jobs: 2, threads: 1}}
{extra}""", encoding="utf-8")
    return path


def driver(study: Path, *args: str) -> subprocess.Popen[str]:
    """``treelm study`` as its own process (so that it can be killed), in ``study``'s folder;
    its output to files (a killed driver's jobs live on, holding any pipe it had open)."""
    log = study.parent / f"driver-{time.monotonic_ns()}"
    p = subprocess.Popen([sys.executable, "-m", "treelm.cli", "study", str(study), *args],
                         cwd=study.parent, stdout=open(f"{log}.out", "w"),
                         stderr=open(f"{log}.err", "w"), text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    p.log = log  # type: ignore[attr-defined]
    return p


def finish(study: Path, *args: str, timeout: float = 300) -> tuple[str, str]:
    p = driver(study, *args)
    p.wait(timeout=timeout)
    out, err = (Path(f"{p.log}.{k}").read_text() for k in ("out", "err"))  # type: ignore
    assert p.returncode == 0, err[-3000:]
    return out, err


VOLATILE = {"minutes", "job_seconds", "job_id", "machine", "elapsed", "date", "command",
            "overrides",
            "commands", "run_dir", "tok_s"}


def figures(x: Any) -> Any:
    """A record without what a rerun may change: times, job ids, the machine, paths."""
    if isinstance(x, dict):
        return {k: figures(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [figures(v) for v in x]
    return x


def trainers(run_dir: Path) -> list[int]:
    """Pids of the ``treelm train`` processes training ``run_dir``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"train" in cmd and b"treelm.cli" in cmd and any(
                os.fsencode(str(run_dir)) == c for c in cmd):
            pids.append(int(proc.name))
    return pids


def wait_for(predicate: Any, timeout: float = 120, what: str = "") -> None:
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def valid_events(run_dir: Path) -> int:
    m = run_dir / "metrics.jsonl"
    return m.read_text().count('"event": "valid"') if m.exists() else 0


@pytest.fixture(scope="module")
def uninterrupted(tiny_study) -> dict[str, Any]:
    """The whole study's record (``tiny_study``), its runs' kept trees read back in."""
    return read_record(tiny_study / "record.json")


@pytest.fixture(scope="module")
def uninterrupted_seed1(tiny_study_seed1) -> dict[str, Any]:
    """Its seed 1 as a study of its own (``tiny_study_seed1``), read the same way."""
    return read_record(tiny_study_seed1)


# ----------------------------------------------------------------------------- the file
@pytest.mark.parametrize("old, new, says", [
    ("choose:", "bogus: 1\nchoose:", "unknown study keys ['bogus']"),
    ("seeds: 2", "seeds: 0", "seeds = 0"),
    ("budget: {max_units: 3000,", "budget: {max_minutes: 1, max_units: 3000,",
     "max_units or max_minutes, not both"),
    ("choose: [variant, layer]", "choose: [test]", "choose = ['test']"),
    ("  eval: [{split: test}]", "  eval: [{split: test}]\n  bleu: {}",
     "score: expected the keys trees and/or eval"),
    ("  paper: {}", "  paper: {train.lr: [1, 2]}", "run paper/1"),
    ("name: tiny", "name: ../x", "name '../x': a plain name (letters, digits, '.', '_', '-'"),
    ("name: tiny", "name: a/b", "name 'a/b': a plain name (letters, digits, '.', '_', '-'"),
    ("name: tiny", "name: ..", "name '..': a plain name"),
])
def test_a_bad_study_file_is_one_line_before_anything_runs(tmp_path, capsys, old, new, says):
    study = write_study(tmp_path)
    text = study.read_text()
    assert old in text
    study.write_text(text.replace(old, new, 1))
    assert main(["study", str(study)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("key, where", [("runs", "treelm/x"), ("runs", "tests"),
                                        ("record", "configs/x.json")])
def test_runs_and_record_stay_out_of_the_project_sources(tmp_path, capsys, key, where):
    study = write_study(tmp_path)
    text = study.read_text()
    start = text.index(f"\n{key}: ") + 1
    end = text.index("\n", start)
    study.write_text(text[:start] + f"{key}: {ROOT / where}" + text[end:])
    assert main(["study", str(study), "--status"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"{key}: {ROOT / where} lies inside the project's {where.split('/')[0]}/" in err, err
    assert not (ROOT / where).exists() or where == "tests"


def test_a_missing_study_file_and_config(tmp_path, capsys):
    assert main(["study", str(tmp_path / "none.yaml")]) == 2
    assert "no such study file" in capsys.readouterr().err
    (tmp_path / "s.yaml").write_text("config: nowhere.yaml\n")
    assert main(["study", str(tmp_path / "s.yaml")]) == 2
    assert "nowhere.yaml: no such config file" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the runs
def test_the_record_holds_every_run_and_the_choice_on_dev(uninterrupted):
    rec = uninterrupted
    assert sorted(rec["runs"]) == ["paper/1", "paper/2", "symmetric/1", "symmetric/2"]
    run = rec["runs"]["paper/1"]
    assert run["tokens"] >= WHOLE and set(run["trees"]["best"]) == {"official", "split"}
    assert set(run["trees"]["best"]["official"]) >= {"dev", "test", "test_10"}
    assert run["eval"]["test"]["ppl"] > 1 and run["curve"][-1]["tokens"] == run["tokens"]
    summ = rec["summary"]["trees"]["variants"]["paper"]["rules"]["official"]
    dev = summ["dev_by_layer"]
    assert summ["layer"] == max(dev, key=lambda k: (dev[k]["mean"], -int(k)))
    seeds = [rec["runs"][f"paper/{s}"]["trees"]["best"]["official"]["test"][summ["layer"]]
             ["sentence_f1"] for s in (1, 2)]
    assert summ["test"]["runs"] == seeds
    assert rec["baselines"]["test"]["baselines"]["right_branching"]["sentence_f1"] > 0
    chosen = rec["summary"]["trees"]["chosen"]
    assert chosen["variant"] in ("paper", "symmetric") and chosen["rule"] == "official"


def test_killed_driver_and_run_then_rerun_equal_the_uninterrupted_study(tmp_path,
                                                                        uninterrupted_seed1):
    """Seed 1 of each variant (two runs side by side): when the driver and paper/1's training are
    killed, symmetric/1's job trains on alone, and the rerun follows it and resumes paper/1."""
    study = write_study(tmp_path, units=WHOLE, seeds=1)
    first = driver(study)
    run = tmp_path / "runs" / "paper-seed1"
    wait_for(lambda: valid_events(run) >= 1, what="a validation of paper/1")
    first.send_signal(signal.SIGKILL)         # the driver, then one training, unsaved
    first.wait()
    pids = trainers(run)
    assert pids, "paper/1 should still be training"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    out, err = finish(study)
    assert "paper/1: submitted" in err        # the killed run, resumed by a new job
    rec = read_record(tmp_path / "record.json")
    assert sorted(rec["runs"]) == ["paper/1", "symmetric/1"]
    assert figures(rec["runs"]) == figures(uninterrupted_seed1["runs"])
    assert figures(rec["summary"]) == figures(uninterrupted_seed1["summary"])
    assert figures(rec["baselines"]) == figures(uninterrupted_seed1["baselines"])


def test_a_second_driver_starts_no_second_copy(tmp_path):
    study = write_study(tmp_path, units=24000, seeds=1, extra="")
    study.write_text(study.read_text().replace("launcher: {jobs: 2, threads: 1}",
                                               "launcher: {jobs: 1, threads: 1}"))
    first = driver(study)
    run = tmp_path / "runs" / "paper-seed1"
    wait_for(lambda: valid_events(run) >= 1, what="paper/1 training")
    # a second driver while the first follows its job: nothing to submit
    out, err = finish(study, "--no-wait")
    assert "submitted" not in err and "paper/1" in out
    assert "running" in out.split("paper/1", 1)[1].splitlines()[0]
    # the first driver killed, its job alive: a third driver finds it and waits for it
    first.send_signal(signal.SIGKILL)
    first.wait()
    alive = bool(trainers(run))     # (on a slow machine the run may have finished by now)
    out, err = finish(study)
    assert "paper/1: submitted" not in err and "symmetric/1: submitted" in err
    state = json.loads((tmp_path / "runs" / "study-state.json").read_text())
    assert len(state["jobs"]) == 2
    logs = "".join(p.read_text() for p in (tmp_path / "runs" / ".submitit").glob("*.err"))
    assert "resuming" not in logs and "already training" not in logs.lower(), (alive, logs)
    rec = json.loads((tmp_path / "record.json").read_text())
    assert sorted(rec["runs"]) == ["paper/1", "symmetric/1"]


def test_status_on_a_study_with_no_runs_yet(tmp_path, capsys):
    study = write_study(tmp_path)
    assert main(["study", str(study), "--status"]) == 0
    out = capsys.readouterr().out
    assert "4 left" in out and "paper/1" in out and "symmetric/2" in out


def test_a_changed_study_does_not_extend_the_record_of_the_old_one(tmp_path, capsys,
                                                                   uninterrupted):
    study = write_study(tmp_path, units=WHOLE + 1000)   # the fixture's study trained WHOLE
    (tmp_path / "record.json").write_text(json.dumps(uninterrupted))
    assert main(["study", str(study), "--no-wait"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "another version of this study (its budget" in err
    assert not list((tmp_path / "runs").glob("*-seed*"))


# ----------------------------------------------------------------------------- failures
def tagging_study(where: Path, extra: str) -> Path:
    """A study of the tiny tagging config (its data named absolute), with ``extra`` keys."""
    data = ROOT / "tests/data/slots"
    path = where / "tag.yaml"
    path.write_text(f"""\
name: tag
config: {ROOT / 'configs/tiny-tagging.yaml'}
overrides: {{data.train: {data / 'train'}, data.valid: {data / 'valid'}, \
data.test: {data / 'test'}}}
runs: {where / 'runs'}
record: {where / 'record.json'}
launcher: {{jobs: 1, threads: 1}}
{extra}""", encoding="utf-8")
    return path


@pytest.mark.parametrize("study, old, new, says", [
    ("tagging", "", "score: {trees: {dev: {w}/mini.mrg, test: null}}",
     "run default/1: score.trees scores a language model's trees; "
     "{root}/configs/tiny-tagging.yaml is a 'tagging' run (drop score.trees)"),
    ("tagging", "", "variants: {a: {train.eval_parse: {treebank: {w}/mini.mrg}}}",
     "run a/1: train.eval_parse scores a language model's trees; this is a 'tagging' run"),
    ("lm", "test: {w}/mini.mrg", "test: {w}/none.mrg", "run paper/1: {w}/none.mrg"),
    ("lm", "dev: {w}/mini.mrg", "dev: {w}/bad.mrg", "run paper/1: {w}/bad.mrg"),
    ("lm", "data.file: {root}/tests/data/tiny.txt", "data.file: {w}/no.txt",
     "run paper/1: {w}/no.txt: no such file or directory"),
])
def test_a_run_that_training_would_refuse_is_refused_before_anything_is_submitted(
        tmp_path, capsys, study, old, new, says):
    """What ``treelm train`` or the job would refuse after the submission, said first: the
    task's (trees are a language model's), the data files, the treebanks read."""
    def fill(text: str) -> str:
        return text.replace("{w}", str(tmp_path)).replace("{root}", str(ROOT))

    (tmp_path / "bad.mrg").write_text("(S (NP the) (VP ran)\n")
    if study == "tagging":
        (tmp_path / "mini.mrg").write_text(MRG, encoding="utf-8")
        path = tagging_study(tmp_path, fill(new))
    else:
        path = write_study(tmp_path)
        text = path.read_text()
        assert fill(old) in text
        path.write_text(text.replace(fill(old), fill(new)))
    assert main(["study", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fill(says) in err, err
    assert err.startswith(f"treelm: error: {path.name}: run "), err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "record.json").exists()


def test_a_training_that_refuses_its_config_fails_at_once_with_its_own_line(tmp_path, capsys):
    """A usage error only the training sees (an empty corpus): exit 2, not submitted again; the
    driver says the training's error line and the job's log, and gives no rerun advice."""
    (tmp_path / "empty.txt").write_text("")
    study = write_study(tmp_path, seeds=1)
    study.write_text(study.read_text().replace(str(ROOT / "tests/data/tiny.txt"),
                                               str(tmp_path / "empty.txt")))
    assert main(["study", str(study), "--retries", "2"]) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert sum("paper/1: submitted" in line for line in lines) == 1, lines
    why = f"treelm study: paper/1: {tmp_path / 'empty.txt'}: empty corpus (no text)"
    assert why in lines, lines
    log = next(line for line in lines if line.startswith("treelm study: paper/1: log "))
    assert lines.index(log) == lines.index(why) + 1
    text = Path(log.split(" log ", 1)[1]).read_text()
    assert f"treelm: error: {tmp_path / 'empty.txt'}: empty corpus" in text   # passed through
    assert not any("run the study again" in line for line in lines), lines
    assert lines[-1] == "treelm study: 2 run(s) failed (paper/1, symmetric/1)", lines
    assert "paper/1      failed" in captured.out, captured.out
    # --status reads the same failure from the job's result, in another process
    assert main(["study", str(study), "--status"]) == 0
    assert "2 failed" in capsys.readouterr().out.splitlines()[0]


def test_why_a_job_ended(tmp_path):
    """The job's error as submitit keeps it (a traceback's text) read back; a job with no result
    (cancelled, killed, its node lost) is one a rerun resumes."""
    import traceback

    from treelm.study.job import JobFailed, read_failure, why_ended
    from treelm.study.launch import ended

    try:
        raise JobFailed(2, "x.yaml: data.file: no such file")
    except JobFailed:
        trace = traceback.format_exc()
    assert read_failure(trace) == (2, "x.yaml: data.file: no such file")
    assert read_failure("Traceback...\nValueError: bad\n") == (None, "ValueError: bad")
    assert why_ended(2, ["loading", "treelm: error: no corpus", ""]) == "no corpus"
    assert why_ended(-9, []) == "treelm train was killed (SIGKILL) before the run finished"
    assert why_ended(1, ["treelm: error: earlier", "Traceback ...", "  File ...",
                         "RuntimeError: boom", ""]) == "RuntimeError: boom"
    gone = ended(tmp_path, "123", "slurm", "CANCELLED")
    assert gone.rerun_helps and not gone.usage and gone.log is None
    assert gone.why == "its Slurm job ended CANCELLED before the run finished"
    assert ended(tmp_path, "123", "local").rerun_helps


def test_the_launcher_is_remembered_and_a_flag_decides_new_submissions_only():
    from treelm.study.launch import choose_launcher
    from treelm.study.spec import Launcher

    section = Launcher(threads=1)                                # the file's launcher:
    first, note = choose_launcher(section, {}, {"name": "slurm", "partition": "gpu",
                                                "time": 10.0})
    assert (first.name, first.partition, first.threads, note) == ("slurm", "gpu", 1, None)
    state = {"launcher": {"launcher": dataclasses.asdict(first),
                          "section": dataclasses.asdict(section)}}
    assert choose_launcher(section, state, {}) == (first, None)    # the plain command
    assert choose_launcher(section, state, {"time": 10.0}) == (first, None)
    longer, note = choose_launcher(section, state, {"time": 60.0})  # slurm, 60 minutes
    assert longer == dataclasses.replace(first, time=60.0) and note == (
        "treelm study: new submissions go to slurm (threads 1, time 60, partition gpu), from "
        "the command line; the study was submitted with slurm (threads 1, time 10, partition "
        "gpu), and its jobs are followed there")
    local, note = choose_launcher(section, state, {"name": "local"})  # the file's, made local
    assert local == Launcher(threads=1) and note.startswith(
        "treelm study: new submissions go to local (threads 1), from the command line; ")
    changed, note = choose_launcher(Launcher(jobs=3), state, {})
    assert changed == Launcher(jobs=3) and note.startswith(
        "treelm study: new submissions go to local (jobs 3), from the study file's launcher: "
        "section; the study was submitted with slurm")


# ----------------------------------------------------------------------------- ensembles
def test_the_records_ensemble_is_the_ensemble_verbs(uninterrupted, tmp_path, capsys):
    """Every run keeps its readings as bits (issue 48), and the study's tree average of its
    runs, each at its own dev-chosen rule and layer, scores as ``treelm ensemble`` of the same
    readings prints, number for number."""
    from treelm.study.ensemble import refresh
    from treelm.study.record import run_choice

    rec = json.loads(json.dumps(uninterrupted))
    runs = list(rec["runs"].values())
    assert all(set(r["readings"]) == {"best"} for r in runs)
    mrg = Path(rec["study"]["score"]["trees"]["dev"])
    assert rec["study"]["score"]["trees"]["test"] == str(mrg)
    rec["study"]["score"]["trees"]["ensemble"] = "all"
    assert refresh(rec) and not refresh(rec)      # made once, then kept
    ens = rec["ensembles"]
    assert set(ens["groups"]) == {"paper", "symmetric", "all"} and ens["missing"] == []
    own = ens["groups"]["all"]["own@best"]
    sources = []
    for r in runs:
        c = run_choice(r["trees"]["best"], ["official", "split"])
        sources.append(f"{mrg.parent / r['run_dir']}:{c['layer']}:{c['rule']}")
    assert own["sources"] == len(sources) == 4
    capsys.readouterr()
    assert main(["ensemble", *sources, "--treebank", str(mrg), "--format", "json",
                 "-o", str(tmp_path / "avg.txt")]) == 0
    report = json.loads(capsys.readouterr().out)
    verb = next(v for k, v in report["trees"].items() if k.startswith("tree average"))
    assert own["test"]["sentence_f1"] == pytest.approx(verb["sentence_f1"], abs=1e-12)
    assert own["test"]["corpus_f1"] == pytest.approx(verb["corpus_f1"], abs=1e-12)
