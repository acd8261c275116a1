"""A finished run scored as its study asks: what a job writes into ``RUN/study.json``.

    trees[c][rule][part][k] = {sentence_f1, corpus_f1}   layer k of checkpoint c, under ``rule``,
                                                          against ``part`` (dev, test, test_10)
    eval[name]              = the task's ``treelm eval`` scores of ``best`` (a language model's
                              sample: {text}; its probe: {prefix: [[symbol, p], ...]})
    curve                   = one point per validation: tokens, minutes, loss/ppl, tree F1
    readings[c][rule][k][p] = the trees of layer k of checkpoint c under ``rule`` on ``p`` (dev,
                              test at all lengths), as bits (treelm.syntax.tree_codes)

The figures are those of the functions behind ``treelm eval-parse`` (the trees of
:func:`treelm.syntax.readings.read_parts`, the F1s of :func:`treelm.syntax.metrics.span_prf`) and
``treelm eval`` (``Task.evaluate``), so a record's number is the number those verbs print for the
same run and checkpoint. Each checkpoint is loaded once and each part's levels read once.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from treelm.rundir.files import RunFiles, read_metrics
from treelm.study.parts import tree_parts

#: Fields of a validation event that are bookkeeping, not scores.
_NOT_SCORES = ("event", "epoch", "step", "elapsed", "tokens", "initial", "budget_end",
               "train_loss", "lr", "asgd")


def last_done(run: Path) -> dict[str, Any] | None:
    """The run's last ``done`` event (None while it has not finished)."""
    if not RunFiles(run).metrics.exists():
        return None
    done = read_metrics(run, "done")
    return done[-1] if done else None


#: Training terms a curve carries beside the validation scores (``train.tree_teacher``'s loss).
EXTRA_TERMS = ("tree_loss",)


def curve(run: Path) -> list[dict[str, Any]]:
    """The run's validations: tokens, minutes and every score logged (tree F1 as
    ``<rule>/L<k>``, from ``parse_f1/<rule>/L<k>``)."""
    if not RunFiles(run).metrics.exists():
        return []
    points = []
    extra: dict[str, float] = {}        # the task's extra training terms (the tree loss), as
    for v in read_metrics(run):         # last logged before each validation
        if v["event"] == "train":
            extra = {k: v[k] for k in EXTRA_TERMS if k in v}
        if v["event"] != "valid":
            continue
        point = {"tokens": v["tokens"], "minutes": round(v["elapsed"] / 60, 3)}
        for k, x in v.items():
            if k in _NOT_SCORES or not isinstance(x, int | float) or isinstance(x, bool):
                continue
            point[k.removeprefix("parse_f1/")] = x
        points.append({**point, **extra})
    return points


def score_trees(run_dir: Path, trees: dict[str, Any]) -> dict[str, Any]:
    """Every checkpoint of ``trees["checkpoints"]``, loaded once: each layer under each rule on
    dev and on test (once per ``test_max_len``), the trees of ``trees["sentences"]`` and every
    reading kept. The levels of each part are read once per checkpoint
    (:func:`treelm.syntax.readings.read_parts`), a test part of <= n words being the subset of
    test's trees; the F1s are :func:`treelm.syntax.metrics.span_prf`'s, as ``eval-parse``
    computes them."""
    import torch

    from treelm.run import load_run
    from treelm.syntax.metrics import brackets, span_prf
    from treelm.syntax.readings import read_parts
    from treelm.syntax.report import load_golds
    from treelm.syntax.tree_codes import encode_trees

    golds = {"dev": load_golds(trees["dev"])}
    if trees.get("test"):
        golds["test"] = load_golds(trees["test"])
    gold_spans = {p: [brackets(g.tree) for g in gs] for p, gs in golds.items()}
    words = {p: [g.words for g in gs] for p, gs in golds.items()}
    layers = None if trees["layers"] == "all" else trees["layers"]
    rules = trees["rules"]
    out: dict[str, Any] = {}
    readings: dict[str, Any] = {}
    sentences: dict[str, Any] = {}
    for checkpoint in trees["checkpoints"]:
        r = load_run(run_dir, checkpoint, expect="lm")
        if torch.cuda.is_available():   # read on the GPU where there is one: at the paper's
            r.model.cuda()              # width the CPU reads ~350 words/s (2 threads)
        read = read_parts(r.model, r.vocab, words, layers, rules)
        scores: dict[str, Any] = {}
        for rule in rules:
            for name, _, max_len in tree_parts(trees):
                part = "dev" if name == "dev" else "test"
                keep = [i for i, g in enumerate(golds[part])
                        if max_len is None or len(g.words) <= max_len]
                f1s = {}
                for (k, rr), tr in read[part].trees.items():
                    if rr == rule:
                        sent, corpus = span_prf((brackets(tr[i]), gold_spans[part][i])
                                                for i in keep)
                        f1s[str(k)] = {"sentence_f1": sent.f1, "corpus_f1": corpus.f1}
                scores.setdefault(rule, {})[name] = f1s
                oov = sum(read[part].unknown[i] for i in keep)
                scores[rule]["oov_" + name] = oov / max(sum(len(words[part][i]) for i in keep), 1)
        out[checkpoint] = scores
        readings[checkpoint] = kept_readings(read, rules, encode_trees)
        if trees.get("sentences") and checkpoint == trees["checkpoints"][0]:
            said = [r.tokenizer.read_line(s) for s in trees["sentences"]]
            mine = read_parts(r.model, r.vocab, {"sentences": said}, None, rules)["sentences"]
            for i, text in enumerate(trees["sentences"]):
                sentences[text] = {rule: {str(k): tr[i] for (k, rr), tr in mine.trees.items()
                                          if rr == rule} for rule in rules}
    return {"trees": out, "readings": readings,
            **({"sentences": sentences} if sentences else {})}


def kept_readings(read: dict[str, Any], rules: list[str], encode: Any) -> dict[str, Any]:
    """Every tree a checkpoint read, on dev and on test at all lengths, as bits (``encode``:
    :func:`treelm.syntax.tree_codes.encode_trees`): ``{rule: {layer: {part: code}}}``. What
    ensembles of the study's runs are made of, kept beside the record so that they need no
    retraining: the very trees its scores are of."""
    out: dict[str, Any] = {}
    for rule in rules:
        for part, got in read.items():
            for (k, rr), tr in got.trees.items():
                if rr == rule:
                    out.setdefault(rule, {}).setdefault(str(k), {})[part] = encode(tr)
    return out


def eval_key(e: dict[str, Any]) -> str:
    """An eval entry's name in the record (``spec.Eval.key`` of its fields)."""
    if e.get("name") or e.get("split"):
        return str(e.get("name") or e.get("split"))
    return Path(e["data"]).name if e.get("data") else "generate" if e.get("generate") else "probe"


def lm_text(run_dir: Path, e: dict[str, Any]) -> dict[str, Any]:
    """What ``treelm generate`` (``{"text": sample}``) or ``treelm probe`` (``{prefix: [[symbol,
    p], ...]}``) prints for ``best`` of a language-model run, through the Python API those verbs
    call."""
    from treelm.api.model import load

    m = load(run_dir, "best", expect="lm")
    if e.get("generate"):
        return {"text": m.generate(e.get("prompt") or "", e["generate"],
                                   temperature=e.get("temperature", 1.0), seed=e.get("seed", 0))}
    return {p: [[s, q] for s, q in m.probe(p, e.get("top_k") or 5)] for p in e["probe"]}


def score_evals(run_dir: Path, evals: list[dict[str, Any]]) -> dict[str, Any]:
    """The task's scores of ``best`` on each split or data file, as ``treelm eval`` prints
    (with the beam and length penalty given); a language model's samples and probes as text."""
    from treelm.run import load_run

    if not evals:
        return {}
    r = None
    out = {}
    for e in evals:
        if e.get("generate") or e.get("probe"):
            out[eval_key(e)] = lm_text(run_dir, e)
            continue
        r = r or load_run(run_dir, "best")
        search = {k: e[k] for k in ("beam", "length_penalty") if e.get(k) is not None}
        ev = (r.task.evaluate(r.model, e["split"], None, **search) if e.get("split")
              else r.task.evaluate_file(r.model, e["data"], None, **search))
        out[eval_key(e)] = {**ev.scores, ev.unit: ev.size}
    return {"eval": out}


def machine() -> dict[str, Any]:
    """Where a run was trained: enough to read its minutes."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"host": platform.node(), "cpu": cpu, "cores": len(os.sched_getaffinity(0)),
            "gpu": gpu, "torch": torch.__version__}


def score_run(run_dir: Path, trees: dict[str, Any] | None,
              evals: list[dict[str, Any]]) -> dict[str, Any]:
    """A finished run's entry: its end (tokens, minutes, best validation), its curve and the
    scores its study asks for."""
    done = last_done(run_dir)
    if done is None:
        raise RuntimeError(f"{run_dir}: not finished; nothing to score")
    entry: dict[str, Any] = {
        "tokens": done["tokens"], "minutes": round(done["elapsed"] / 60, 3),
        "epochs": done.get("epochs"), "precision": done.get("precision"),
        **{k: v for k, v in done.items() if k.startswith("best_valid_")},
        "curve": curve(run_dir)}
    if trees:
        entry.update(score_trees(run_dir, trees))
    entry.update(score_evals(run_dir, evals))
    return entry
