"""The Python API (``treelm.load``): each method against its verb's output (one path for Python
and the command line), scores against a step-by-step reference, the unsupported-method error,
bad arguments, and the runnable examples of docs/api.md."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import treelm
from treelm.api.model import UnsupportedMethodError, to_nltk
from treelm.cli import main
from treelm.errors import TreelmError
from treelm.syntax.trees import tree_leaves

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def models(tiny_runs):
    return {task: treelm.load(path) for task, path in tiny_runs.items()}


def _verb(capsys, *argv) -> str:
    capsys.readouterr()
    assert main([str(a) for a in argv]) == 0
    return capsys.readouterr().out


def brackets(tree) -> str:
    """An nltk.Tree of the API in the brackets ``treelm parse`` prints: ((the cat) sat)."""
    if len(tree) == 1 and isinstance(tree[0], str):     # a one-word sentence: a bare leaf
        return tree[0]
    return re.sub(r"\(X ", "(", tree.pformat(margin=10**9))


def test_import_treelm_stays_light():
    code = "import sys, treelm; print(sorted(m for m in ('torch', 'nltk') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert out.strip() == "[]"


def test_each_task_supports_its_methods(models):
    assert models["lm"].supports == ("parse", "levels", "score", "generate", "probe", "curves")
    assert models["translation"].supports == ("parse", "levels", "translate", "attention",
                                              "curves")
    assert models["tagging"].supports == ("tag", "curves")
    assert models["lm"].layers == (1, 2) and models["lm"].default_layer == 1


@pytest.mark.parametrize("task,call", [
    ("tagging", lambda m: m.parse(["a b"])), ("tagging", lambda m: m.translate(["a"])),
    ("lm", lambda m: m.tag(["a b"])), ("lm", lambda m: m.attention("a", "b")),
    ("translation", lambda m: m.score(["a"])), ("translation", lambda m: m.generate("a")),
])
def test_an_unsupported_method_is_one_clear_error(models, task, call):
    m = models[task]
    with pytest.raises(UnsupportedMethodError) as e:
        call(m)
    msg = str(e.value)
    assert "\n" not in msg and repr(task) in msg and isinstance(e.value, TreelmError)
    assert msg.endswith("it supports " + ", ".join(m.supports))


def test_parse_is_what_the_verb_prints(models, tiny_runs, capsys):
    m, run = models["lm"], tiny_runs["lm"]
    sentences = ["the company said it would sell its stake", "prices rose", "the"]
    for layer, style in [(None, "official"), (2, "split"), (1, "split")]:
        trees = m.parse(sentences, layer=layer, style=style)
        assert [t.leaves() for t in trees] == [s.split() for s in sentences]
        for s, t in zip(sentences, trees):
            extra = [] if layer is None else ["--layer", layer]
            assert brackets(t) == _verb(capsys, "parse", run, s, "--style", style,
                                        *extra).strip()
    lv = m.levels(sentences[0])
    assert lv.df.shape == lv.di.shape == (2, 8) and lv.layers == (1, 2)
    out = json.loads(_verb(capsys, "parse", run, sentences[0], "--format", "json",
                           "--layer", "all"))
    for p, row in zip(out["parses"], lv.df, strict=True):
        assert p["df"] == pytest.approx(row.tolist(), abs=1e-6)


def test_source_trees_of_a_translation_run_are_the_verbs(models, tiny_runs, capsys):
    t = models["translation"].parse("a b c d e f")[0]
    assert t.leaves() == list("abcdef")
    assert brackets(t) == _verb(capsys, "parse", tiny_runs["translation"], "a b c d e f").strip()
    with pytest.raises(TreelmError, match="bidirectional"):
        models["lm"].parse("a b", direction="backward")


def test_score_is_the_sum_of_step_by_step_log_probabilities(models):
    m = models["lm"]
    sentences = ["the company said", "said the company", "an unknownword here"]
    got = m.score(sentences)
    vocab, tok, model = m.run.vocab, m.run.tokenizer, m.run.model
    for s, g in zip(sentences, got):
        ids = [vocab.eos, *vocab.encode(tok.encode(s)), vocab.eos]
        total, state = 0.0, None
        with torch.no_grad():
            for a, b in zip(ids, ids[1:]):
                logits, state = model.step(torch.tensor([a]), state)
                total += float(logits[0].double().log_softmax(-1)[b])
        assert g == pytest.approx(total, abs=1e-4)
    assert got[0] > got[1] or got[0] < got[1]          # the order of words matters


def test_generate_and_probe_are_what_the_verbs_print(models, tiny_runs, capsys):
    m, run = models["lm"], tiny_runs["lm"]
    out = _verb(capsys, "generate", run, "--prompt", "the company", "--length", "12",
                "--seed", "3", "--temperature", "0.9")
    assert out == "the company" + m.generate("the company", 12, seed=3, temperature=0.9) + "\n"
    out = _verb(capsys, "generate", run, "--prompt", "the", "--length", "6", "--beam", "3")
    assert out == "the" + m.generate("the", 6, beam=3) + "\n"
    rows = json.loads(_verb(capsys, "probe", run, "--prompt", "the", "--top-k", "4", "--format",
                            "json"))
    got = m.probe("the", 4)
    assert [n["symbol"] for n in rows["prefixes"][0]["next"]] == [s for s, _ in got]
    assert [n["prob"] for n in rows["prefixes"][0]["next"]] == pytest.approx(
        [p for _, p in got], abs=1e-6)
    assert math.fsum(p for _, p in m.probe("the", len(m.run.vocab))) == pytest.approx(1, 1e-4)


def test_tag_is_what_the_verb_prints(models, tiny_runs, capsys, monkeypatch):
    import io

    utterances = ["show me flights from boston to denver", "list flights to Dallas tomorrow"]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(utterances) + "\n"))
    out = _verb(capsys, "tag", tiny_runs["tagging"], "--format", "json")
    assert [json.loads(line) for line in out.splitlines()] == models["tagging"].tag(utterances)


def test_translate_and_attention(models, tiny_runs, capsys, tmp_path):
    m = models["translation"]
    src = ["a b c d", "e f g", "h a"]
    f = tmp_path / "src.txt"
    f.write_text("\n".join(src) + "\n")
    for beam in (1, 3):
        out = _verb(capsys, "translate", tiny_runs["translation"], "--input", f, "--beam", beam)
        assert out.splitlines() == m.translate(src, beam=beam)
    att = m.attention("a b c d", "d c b a")
    assert att.source == ["a", "b", "c", "d", "<eos>"]
    assert att.target == ["d", "c", "b", "a", "<eos>"]
    assert att.weights.shape == (1, 5, 5)
    assert att.weights.sum(-1) == pytest.approx(1, abs=1e-5)
    assert att.text == "d c b a"
    own = m.attention("a b c d", beam=1)
    assert own.text == m.translate("a b c d", beam=1)[0] and own.target[:-1] == own.text.split()
    with pytest.raises(TreelmError,
                       match="sentence 1: 'zz' not in the run's source vocabulary; unk='map'"):
        m.translate(["a zz"], unk="error")
    assert len(m.translate(["a zz"])) == 1                  # read as <unk>, as the verb does


# ----------------------------------------------------------------------------- curves
def test_curves_are_the_metrics_log(models, tiny_runs):
    """Each task's curves hold the scores of its metrics.jsonl against tokens, as logged."""
    from treelm.rundir.files import read_metrics

    for task, headline in (("lm", "ppl"), ("translation", "bleu"), ("tagging", "f1")):
        c = models[task].curves()
        valid = read_metrics(tiny_runs[task], "valid")
        train = read_metrics(tiny_runs[task], "train")
        assert c.headline == headline and c.done and c.trees == {}
        assert c.valid[headline] == [(e["tokens"], e[headline]) for e in valid]
        assert c.valid["loss"] == [(e["tokens"], e["loss"]) for e in valid]
        assert c.train["loss"] == [(e["tokens"], e["loss"]) for e in train]
        assert "lr" not in c.valid and "tok_s" not in c.train and "train_loss" not in c.valid
    assert models["lm"].curves().train["ppl"] == [
        (e["tokens"], e["ppl"]) for e in read_metrics(tiny_runs["lm"], "train")]


def _valid_line(tokens: int, ppl: float, **f1: float) -> str:
    scores = {f"parse_f1/{k.replace('_', '/L')}": v for k, v in f1.items()}
    return json.dumps({"event": "valid", "epoch": 9, "step": 9, "elapsed": 1.0,
                       "tokens": tokens, "loss": math.log(ppl), "ppl": ppl, **scores}) + "\n"


def test_curves_follow_a_growing_log_and_read_it_only_when_it_changed(lm_run, tmp_path,
                                                                      monkeypatch):
    """A validation appended while the run is open shows up (a writer holding the run's lock
    too: readers ignore it), tree F1 keys become curves per rule and layer, a resume's cut log
    is read again, and an unchanged log is not re-read (one stat)."""
    import shutil

    import treelm.api.curves as curves_mod
    from treelm.rundir.files import RunFiles
    from treelm.rundir.lock import RunLock

    run = tmp_path / "run"
    shutil.copytree(lm_run, run)
    m = treelm.load(run)
    reads = []
    real = curves_mod.read_metrics
    monkeypatch.setattr(curves_mod, "read_metrics", lambda f: reads.append(1) or real(f))
    first = m.curves()
    assert m.curves() is first and len(reads) == 1           # unchanged: not read again
    log = RunFiles(run).metrics
    before = log.read_bytes()
    with RunLock(RunFiles(run).lock):                        # a trainer writes the run
        with open(log, "a", encoding="utf-8") as f:
            f.write(_valid_line(99_000, 120.5, official_1=0.25, official_2=0.5, split_2=0.4))
        grown = m.curves()
    assert len(reads) == 2 and grown.version != first.version
    assert grown.valid["ppl"][-1] == (99_000, 120.5) and not grown.done   # logs on after "done"
    assert grown.trees == {"official": {1: [(99_000, 0.25)], 2: [(99_000, 0.5)]},
                           "split": {2: [(99_000, 0.4)]}}
    log.write_bytes(before)                                  # --resume cuts the log back
    assert m.curves().valid == first.valid and len(reads) == 3


def test_curves_of_a_log_being_written_or_broken(lm_run, tmp_path):
    """A last line still being written (or cut short by a kill) is left out; a damaged line
    before it is one line naming the file and the line; no log yet is no curves."""
    import shutil

    from treelm.rundir.files import RunFiles

    run = tmp_path / "run"
    shutil.copytree(lm_run, run)
    m = treelm.load(run)
    log = RunFiles(run).metrics
    whole = m.curves().valid
    with open(log, "a", encoding="utf-8") as f:
        f.write('{"event": "valid", "tok')                   # a writer that died mid-line
    assert m.curves().valid == whole and whole["ppl"]
    lines = log.read_text(encoding="utf-8").split("\n")
    lines[1] = lines[1][:-5]                                  # a damaged line inside the log
    log.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(TreelmError, match=r"metrics.jsonl:2: not a metrics event"):
        m.curves()
    log.unlink()
    assert m.curves().valid == {} and m.curves().headline is None


# ----------------------------------------------------------------------------- one path
@pytest.mark.parametrize("task,method,argv", [
    ("lm", "levels_stream", ["parse", "{run}", "the company said"]),
    ("translation", "levels_stream", ["parse", "{run}", "--input", "{file}"]),
    ("lm", "levels_stream", ["plot", "{run}", "the company said", "-o", "{png}"]),
    ("lm", "levels_stream", ["plot-tree", "--run", "{run}", "the company said", "-o", "{png}"]),
    ("lm", "generate_stream", ["generate", "{run}", "--prompt", "the", "--length", "4"]),
    ("lm", "generate_stream", ["generate", "{run}", "--length", "3", "--beam", "2"]),
    ("lm", "probe", ["probe", "{run}", "--prompt", "the", "--prompt", "a"]),
    ("tagging", "tag", ["tag", "{run}", "--input", "{file}", "--format", "json"]),
    ("translation", "translate_batches", ["translate", "{run}", "--input", "{file}", "-o",
                                          "{png}"]),
    ("translation", "attention", ["translate", "{run}", "--input", "{file}", "-o", "{png}"]),
    ("lm", "score", ["suite", "agreement", "{run}", "--pairs", "{pairs}"]),
])
def test_each_verb_goes_through_the_api(tiny_runs, tmp_path, capsys, monkeypatch, task, method,
                                        argv):
    """The verb's output is the API method's: a spy on the method sees the verb call it, and
    what the verb prints changes with what the method returns (a verb that bypassed the API
    would print the same as before)."""
    from treelm.api.model import TreelmModel

    f = tmp_path / "in.txt"
    f.write_text("a b c d\n\nthe company said\n")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("agr\tthe company said\tsaid the company\n")     # words the run knows
    names = {"run": tiny_runs[task], "file": f, "png": tmp_path / "att.png", "pairs": pairs}
    argv = [a.format(**names) for a in argv]
    before = _verb(capsys, *argv)
    original, calls = getattr(TreelmModel, method), []

    def spy(self, *args, **kwargs):
        calls.append(method)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(TreelmModel, method, spy)
    assert _verb(capsys, *argv) == before and calls
    if method in ("levels_stream", "generate_stream", "translate_batches", "attention"):
        return                     # the streams' values are checked by the tests above
    fake = {"probe": lambda self, prefix, k, **kw: [("MARK", 0.5)],
            "tag": lambda self, lines, **kw: [{"words": ["MARK"], "tags": ["O"], "slots": [],
                                                 "intent": None} for _ in lines],
            "score": lambda self, sentences, **kw: [0.0 for _ in sentences]}[method]  # ties
    monkeypatch.setattr(TreelmModel, method, fake)
    after = _verb(capsys, *argv)
    assert after != before
    assert "MARK" in after or method == "score"


@pytest.mark.parametrize("call,message", [
    (lambda m: m.parse([""]), "sentence 1 is empty"),
    (lambda m: m.parse([]), "no sentences"),
    (lambda m: m.parse(["a b"], layer=7), "layer 7"),
    (lambda m: m.parse(["a b"], style="best"), "style must be"),
    (lambda m: m.parse(["a b"], batch_size=0), "batch_size"),
    (lambda m: m.parse(["zzzq"], unk="error"), "'zzzq' .* unk='map'"),
    (lambda m: m.probe("the zzzq", unk="error"), "'zzzq' .* unk='map'"),
    (lambda m: m.generate("the", -1), "length"),
    (lambda m: m.generate("the", 3, top_p=0.0), "top_p"),
    (lambda m: m.probe("the", 0), "k must be"),
    (lambda m: m.levels(["a", "b"]), "one sentence"),
])
def test_bad_arguments_are_one_line_errors(models, call, message):
    with pytest.raises(TreelmError, match=message) as e:
        call(models["lm"])
    assert "\n" not in str(e.value)


def test_load_refuses_what_is_not_a_run(tmp_path):
    with pytest.raises(TreelmError):
        treelm.load(tmp_path)
    with pytest.raises(TreelmError, match="checkpoint"):
        treelm.load(tmp_path, checkpoint="newest")


def test_deep_trees_convert_without_recursion():
    deep: list = ["w0"]
    for i in range(1, 20000):
        deep = [deep, f"w{i}"]
    t = to_nltk(deep)
    leaves, stack = [], [t]          # nltk's own leaves() recurses: walk it with a stack
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            leaves.append(node)
        else:
            assert node.label() == "X"
            stack.extend(reversed(list(node)))
    assert leaves == tree_leaves(deep) and len(leaves) == 20000
    assert to_nltk("one").leaves() == ["one"]


# ----------------------------------------------------------------------------- docs/api.md
def code_blocks(page: Path, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", page.read_text(encoding="utf-8"),
                      flags=re.S | re.M)


def test_the_examples_of_docs_api_run(tiny_runs, tmp_path, monkeypatch, capsys):
    """Every ``python`` block of docs/api.md, in order, in one namespace, in a directory where
    ``runs/tiny-*`` are the tiny runs the page's ``bash`` block trains."""
    page = ROOT / "docs/api.md"
    bash = "\n".join(code_blocks(page, "bash"))
    runs = tmp_path / "runs"
    runs.mkdir()
    for path in tiny_runs.values():
        name = path.name
        assert f"--out runs/{name}" in bash, f"docs/api.md does not train runs/{name}"
        (runs / name).symlink_to(path)
    blocks = code_blocks(page, "python")
    assert len(blocks) >= 4
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for k, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"docs/api.md block {k}", "exec"), namespace)
        except Exception as e:                      # name the block that failed
            raise AssertionError(f"docs/api.md python block {k} failed: {e!r}") from e
    assert capsys.readouterr().out
