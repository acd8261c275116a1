"""ListOps: values checked against an independent evaluator (the expression transcribed into
Python and ``eval``-ed), the original TSV format both ways, one-line errors for malformed lines,
the generator's splits, the classifier's padding, equal parameter counts of the two configs, and
the tiny config through train / eval / resume and under torchrun."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from treelm.cli import main
from treelm.data.corpus import CorpusError
from treelm.data.listops import (
    Example,
    ExpressionError,
    ListOpsData,
    depth,
    generate_split,
    load_split,
    parse,
    random_expression,
    read_examples,
    to_text,
    to_tokens,
    value,
    write_examples,
)
from treelm.errors import ConfigError
from treelm.models import build_model
from treelm.models.classifier import SequenceClassifier
from treelm.run import load_run
from treelm.rundir.files import read_metrics

ROOT = Path(__file__).resolve().parents[1]
TINY = "configs/tiny-listops.yaml"

# ----------------------------------------------------------------------------- the evaluator


def _med(*a: int) -> int:
    s, k = sorted(a), len(a)
    return s[k // 2] if k % 2 else (s[k // 2 - 1] + s[k // 2]) // 2


PY = {"[MAX": "max(", "[MIN": "min(", "[MED": "_med(", "[SM": "_sm(", "]": ")"}


def python_value(tokens: list[str] | tuple[str, ...]) -> int:
    """The expression as a Python call expression: ``[MAX 2 [SM 4 9 ] ]`` is
    ``max(2, _sm(4, 9, ), )``."""
    code = " ".join(PY.get(t, t + ",") if t != "]" else ")," for t in tokens).rstrip(",")
    return eval(code, {"max": max, "min": min, "_med": _med, "_sm": lambda *a: sum(a) % 10})


HAND = [
    ("[MAX 2 9 ]", 9), ("[MIN 2 9 0 ]", 0), ("[SM 9 9 ]", 8), ("[SM 5 5 ]", 0),
    ("[MED 3 1 2 ]", 2), ("[MED 1 4 ]", 2),           # even count: ⌊(1 + 4) / 2⌋, as int(np.median)
    ("[MED 1 2 3 4 ]", 2), ("[MED 8 9 ]", 8), ("[MED 0 9 9 0 ]", 4),
    ("[MAX 2 [MIN 4 7 ] 0 ]", 4), ("[SM [MED 1 9 ] [MAX 3 7 ] 8 ]", 0), ("7", 7),
]


@pytest.mark.parametrize("text, want", HAND)
def test_hand_cases(text, want):
    assert python_value(text.split()) == want
    assert value(parse(text)) == want


def test_generated_values_match_the_python_evaluator():
    rng = random.Random(0)
    exprs = [random_expression(rng, 5, 5, 0.35) for _ in range(3000)]
    assert {e[0] for e in exprs} == {"[MAX", "[MIN", "[MED", "[SM"}
    assert {value(e) for e in exprs} == set(range(10))
    for e in exprs:
        toks = to_tokens(e)
        assert python_value(toks) == value(e), " ".join(toks)
        assert parse(toks) == e
        assert 1 <= depth(e) <= 5 and depth(e) == _depth_by_brackets(toks)


def _depth_by_brackets(toks: list[str]) -> int:
    d = best = 0
    for t in toks:
        d += t.startswith("[") - (t == "]")
        best = max(best, d)
    return best


# ----------------------------------------------------------------------------- files


def test_the_original_bracketing():
    assert to_text(parse("[MAX 2 9 ]")) == "( ( ( [MAX 2 ) 9 ) ] )"
    assert to_text(parse("[MIN 1 [SM 2 3 ] ]")) == \
        "( ( ( [MIN 1 ) ( ( ( [SM 2 ) 3 ) ] ) ) ] )"


@pytest.mark.parametrize("brackets", [True, False])
def test_tsv_round_trip(tmp_path, brackets):
    xs = generate_split(ListOpsData.parse({"train_size": 200, "max_depth": 4}), "train")
    write_examples(tmp_path / "x.tsv", xs, brackets)
    assert read_examples(tmp_path / "x.tsv") == xs
    line = (tmp_path / "x.tsv").read_text().splitlines()[0]
    label, expr = line.split("\t")
    assert int(label) == xs[0].label and ("(" in expr) == brackets


@pytest.mark.parametrize("line, message", [
    ("3\t[MAX 2 9 ]", "f:2: label 3, but the expression's value is 9"),
    ("x\t[MAX 2 9 ]", "f:2: label 'x' is not a digit 0-9"),
    ("12\t[MAX 2 9 ]", "f:2: label '12' is not a digit 0-9"),
    ("9\t[MAX 2 9", "f:2: [MAX at token 1 is never closed by ']'"),
    ("9\t[MAX 2 9 ] ]", "f:2: tokens after the end of the expression, from token 5"),
    ("9\t[MAX ]", "f:2: [MAX at token 1 has no arguments"),
    ("9\t] 9", "f:2: ']' at token 1 closes no operator"),
    ("9\t[MAX 2 10 ]", "f:2: unknown token '10' at token 3"),
    ("9\t[MAX\t2 9 ]", "f:2: expected 'label<TAB>expression', got 3 tab-separated fields"),
    ("9\t( ( [MAX 2 ) 9 ) ] )", "f:2: the round brackets are not the original's bracketing"),
    ("9\t", "f:2: empty expression"),
])
def test_bad_lines_name_file_and_line(tmp_path, line, message):
    f = tmp_path / "f"
    f.write_text("9\t( ( ( [MAX 2 ) 9 ) ] )\n" + line + "\n")
    with pytest.raises(CorpusError) as e:
        read_examples(f)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_long_range_arena_layout_is_named(tmp_path):
    (tmp_path / "lra.tsv").write_text("Source\tTarget\n[MAX 2 9 ]\t9\n")
    with pytest.raises(CorpusError, match="lra.tsv:1: a 'Source<TAB>Target' header"):
        read_examples(tmp_path / "lra.tsv")


def test_files_and_every_tenth_held_out(tmp_path):
    xs = generate_split(ListOpsData.parse({"train_size": 50, "max_depth": 3}), "train")
    write_examples(tmp_path / "train.tsv", xs)
    write_examples(tmp_path / "test.tsv", xs[:7], brackets=False)
    spec = ListOpsData.parse({"source": "files", "train": str(tmp_path / "train.tsv"),
                              "test": str(tmp_path / "test.tsv")})
    assert load_split(spec, "valid") == xs[9::10]
    assert len(load_split(spec, "train")) == 45 and load_split(spec, "test") == xs[:7]


# ----------------------------------------------------------------------------- generator


def test_generated_splits_are_disjoint_sized_bounded_and_fixed():
    spec = ListOpsData.parse({"train_size": 300, "valid_size": 60, "test_size": 60,
                              "max_depth": 3, "test_depth": 5, "max_length": 30, "p_op": 0.4})
    splits = {s: generate_split(spec, s) for s in ("train", "valid", "test")}
    keys = {s: {x.tokens for x in xs} for s, xs in splits.items()}
    assert [len(keys[s]) for s in ("train", "valid", "test")] == [300, 60, 60]
    assert not keys["train"] & keys["valid"] and not keys["train"] & keys["test"]
    assert not keys["valid"] & keys["test"]
    assert max(x.depth for x in splits["train"] + splits["valid"]) == 3
    assert max(x.depth for x in splits["test"]) > 3
    assert all(len(x.tokens) <= 30 for xs in splits.values() for x in xs)
    bigger = ListOpsData.parse({**spec.__dict__, "train_size": 500})
    assert generate_split(bigger, "test") == splits["test"]          # test does not move
    assert generate_split(bigger, "train")[:300] == splits["train"]
    other = ListOpsData.parse({**spec.__dict__, "seed": 2})
    assert generate_split(other, "train") != splits["train"]


def test_too_few_expressions_is_one_line():
    spec = ListOpsData.parse({"valid_size": 5000, "max_depth": 1, "max_args": 2})
    with pytest.raises(ConfigError, match="only .* distinct valid expressions found"):
        generate_split(spec, "valid")


@pytest.mark.parametrize("data, message", [
    ({"max_args": 1}, "data.max_args = 1: must be at least 2"),
    ({"max_depth": 4, "test_depth": 3}, "data.test_depth = 3 is below data.max_depth = 4"),
    ({"train": "x.tsv"}, "contradict each other"),
    ({"source": "files", "train": "x.tsv"}, "needs data.train and data.test"),
    ({"p_op": 1.0}, "data.p_op = 1.0"),
])
def test_bad_data_sections(data, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        ListOpsData.parse(data)


def test_bad_expression_text_in_parse():
    with pytest.raises(ExpressionError, match="unknown token"):
        parse("( [MAX 1 2 ] )")                      # the tree brackets are the reader's


# ----------------------------------------------------------------------------- model


@pytest.mark.parametrize("pool", ["last", "mean"])
@pytest.mark.parametrize("cell", ["lstm", "onlstm"])
def test_padding_and_batch_mates_do_not_change_the_logits(cell, pool):
    torch.manual_seed(0)
    opts = {"chunk_size": 4} if cell == "onlstm" else None
    m = SequenceClassifier(vocab_size=16, n_classes=10, pad_id=0, cell=cell, sizes=[6, 8],
                           cell_options=opts, pool=pool, dropout=0.3).eval()
    rng = random.Random(0)
    seqs = [[rng.randint(1, 15) for _ in range(rng.randint(1, 9))] for _ in range(5)]

    def pad(rows, extra=0):
        T = max(map(len, rows)) + extra
        return (torch.tensor([r + [0] * (T - len(r)) for r in rows]).t(),
                torch.tensor([len(r) for r in rows]))

    y = m(*pad(seqs))
    assert y.shape == (5, 10)
    assert torch.allclose(m(*pad(seqs, 4)), y, atol=1e-6)
    for b, s in enumerate(seqs):
        assert torch.allclose(m(*pad([s]))[0], y[b], atol=1e-5)
        out = m.features(torch.tensor([s]).t()).out[:, 0]            # (T, H)
        want = out[-1] if pool == "last" else out.mean(0)
        assert torch.allclose(m.encode(*pad(seqs))[b], want, atol=1e-5)


def test_configs_have_equal_parameter_counts(capsys):
    counts = {}
    for name in ("listops-onlstm", "listops-lstm"):
        cfg = yaml.safe_load((ROOT / "configs" / f"{name}.yaml").read_text())
        assert cfg["model"]["cell"] == name.split("-")[1] and cfg["task"] == "listops"
        model = build_model(cfg["model"], vocab_size=16, n_classes=10, pad_id=0)
        counts[name] = sum(p.numel() for p in model.parameters())
    with capsys.disabled():
        print(f"\nparameters: {counts}")
    a, b = counts.values()
    assert abs(a - b) / a < 0.01
    assert counts == {"listops-onlstm": 124_362, "listops-lstm": 123_882}   # as the configs say


# ----------------------------------------------------------------------------- task and CLI


@pytest.fixture(scope="module")
def listops_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("listops") / "run"
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        assert main(["train", "--config", TINY, "--out", str(run), "--quiet"]) == 0
    finally:
        os.chdir(here)
    return run


def test_tiny_run_learns_and_evaluates(listops_run, capsys):
    valid = read_metrics(listops_run, "valid")
    assert len(valid) == 8 and all({"accuracy", "loss", "acc_depth1", "acc_depth3"} <= set(m)
                                   for m in valid)
    r = load_run(listops_run)
    labels = [x.label for x in r.task.split("valid")]
    majority = 100 * max(labels.count(v) for v in range(10)) / len(labels)
    assert max(m["accuracy"] for m in valid) > majority + 8
    assert min(m["loss"] for m in valid) < valid[0]["loss"] - 0.15
    assert main(["eval", str(listops_run), "--split", "test"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["expressions"] == 200 and "acc_depth4" in out and "acc_deeper" in out


def test_eval_data_scores_a_file_as_its_split(listops_run, tmp_path, capsys):
    r = load_run(listops_run)
    write_examples(tmp_path / "test.tsv", r.task.split("test"))
    assert main(["eval", str(listops_run), "--split", "test"]) == 0
    split = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["eval", str(listops_run), "--data", str(tmp_path / "test.tsv")]) == 0
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    keys = [k for k in split if k == "accuracy" or k == "loss" or k.startswith("acc_")]
    assert len(keys) > 4 and all(data[k] == pytest.approx(split[k]) for k in keys)
    (tmp_path / "bad.tsv").write_text("3\t[MAX 2 9 ]\n")
    assert main(["eval", str(listops_run), "--data", str(tmp_path / "bad.tsv")]) == 2
    assert "bad.tsv:1: label 3, but the expression's value is 9" in capsys.readouterr().err


def test_tiny_run_resumes_exactly(tmp_path):
    os.chdir(ROOT)
    ref, run = tmp_path / "ref", tmp_path / "run"
    common = ["--quiet", "train.epochs=3", "train.log_interval=4"]
    assert main(["train", "--config", TINY, "--out", str(ref), *common]) == 0
    assert main(["train", "--config", TINY, "--out", str(run), *common,
                 "train.max_units=1000"]) == 0                       # stops inside epoch 2
    assert read_metrics(run, "done")[-1]["epochs"] == 1
    assert main(["train", "--resume", str(run), "--quiet", "train.max_units=null"]) == 0

    def curve(r: Path) -> list[tuple]:     # (the budget's end adds a validation of its own)
        return [(m["event"], m["step"], m.get("loss")) for m in read_metrics(r)
                if m["event"] == "train" or m.get("epoch_end")]

    assert curve(ref) == curve(run) and len(curve(ref)) > 10
    wa, wb = (load_run(r, "last").model.state_dict() for r in (ref, run))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_two_processes_under_torchrun(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           "--master_addr=127.0.0.1", f"--master_port={port}", "-m", "treelm.cli", "train",
           "--config", TINY, "--out", str(run), "--quiet", "train.epochs=2",
           "train.device=cpu"]
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    done = read_metrics(run, "done")[-1]
    assert len(done["rank_digests"]) == 2 and done["rank_digests"][0] == done["rank_digests"][1]
    assert done["epochs"] == 2 and done["tokens"] == 2 * 600         # both halves, both epochs
    assert len(read_metrics(run, "valid")) == 2


def test_examples_keep_their_fields():
    x = Example(9, ("[MAX", "2", "9", "]"), 1)
    assert x.line() == "9\t( ( ( [MAX 2 ) 9 ) ] )" and x.line(False) == "9\t[MAX 2 9 ]"


def study_table(record: dict) -> str:
    """The ListOps study's table (``treelm study studies/listops.yaml``): per variant, accuracy
    in % as mean ± std over the seeds, on the held-out valid expressions and on test per depth,
    of each run's best checkpoint; made from the record's summary alone."""
    variants = record["summary"]["scores"]["variants"]
    test = {v: e["eval"]["test"] for v, e in variants.items()}
    depths = sorted({int(k[len("acc_depth"):]) for t in test.values() for k in t
                     if k.startswith("acc_depth")})
    out = ["| accuracy (%) | " + " | ".join(
               f"{v} ({len(e['seeds'])} seeds)" for v, e in variants.items()) + " |",
           "| --- |" + " ---: |" * len(variants)]

    def row(label: str, get) -> None:
        cells = []
        for v in variants:
            m = get(v)
            cells.append("–" if m is None else f"{m['mean']:.2f} ± {m['std']:.2f}")
        out.append(f"| {label} | " + " | ".join(cells) + " |")

    row("valid (held out, ≤ train depth)", lambda v: variants[v]["eval"]["valid"]["accuracy"])
    for d in depths:
        row(f"test, depth {d}", lambda v, d=d: test[v].get(f"acc_depth{d}"))
    row("test, deeper than training (acc_deeper)", lambda v: test[v].get("acc_deeper"))
    row("test, all expressions", lambda v: test[v]["accuracy"])
    return "\n".join(out)


def test_the_docs_table_is_the_newest_study_record():
    """docs/listops.md shows the table of the newest committed record of the ListOps study
    (``studies/listops.yaml``), made from it, not a copy."""
    records = sorted((ROOT / "benchmarks" / "results").glob("listops-study-*.json"))
    if not records:
        pytest.skip("no record of studies/listops.yaml committed yet")
    record = json.loads(records[-1].read_text(encoding="utf-8"))
    assert study_table(record) in (ROOT / "docs" / "listops.md").read_text(encoding="utf-8")
