"""A finished run scored as its study asks: what a job writes into ``RUN/study.json``.

    trees[c][rule][part][k] = {sentence_f1, corpus_f1}   layer k of checkpoint c, under ``rule``,
                                                          against ``part`` (dev, test, test_10)
    eval[name]              = the task's ``treelm eval`` scores of ``best`` (a language model's
                              sample: {text}; its probe: {prefix: [[symbol, p], ...]})
    curve                   = one point per validation: tokens, minutes, loss/ppl, tree F1
    readings[c][rule][k][p] = the trees of layer k of checkpoint c under ``rule`` on ``p`` (dev,
                              test at all lengths), as bits (treelm.syntax.tree_codes)

The figures are those :func:`treelm.syntax.report.parsing_report` and ``Task.evaluate`` give, the
functions behind ``treelm eval-parse`` and ``treelm eval``, so a record's number is the number
those verbs print for the same run and checkpoint.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from treelm.rundir.files import RunFiles, read_metrics

#: Fields of a validation event that are bookkeeping, not scores.
_NOT_SCORES = ("event", "epoch", "step", "elapsed", "tokens", "initial", "budget_end",
               "train_loss", "lr", "asgd")


def last_done(run: Path) -> dict[str, Any] | None:
    """The run's last ``done`` event (None while it has not finished)."""
    if not RunFiles(run).metrics.exists():
        return None
    done = read_metrics(run, "done")
    return done[-1] if done else None


def curve(run: Path) -> list[dict[str, Any]]:
    """The run's validations: tokens, minutes and every score logged (tree F1 as
    ``<rule>/L<k>``, from ``parse_f1/<rule>/L<k>``)."""
    if not RunFiles(run).metrics.exists():
        return []
    points = []
    for v in read_metrics(run, "valid"):
        point = {"tokens": v["tokens"], "minutes": round(v["elapsed"] / 60, 3)}
        for k, x in v.items():
            if k in _NOT_SCORES or not isinstance(x, int | float) or isinstance(x, bool):
                continue
            point[k.removeprefix("parse_f1/")] = x
        points.append(point)
    return points


def part_name(max_len: int | None, base: str = "test") -> str:
    return base if max_len is None else f"{base}_{max_len}"


def _f1s(report: dict[str, Any]) -> dict[str, Any]:
    return {k: {"sentence_f1": v["sentence_f1"], "corpus_f1": v["corpus_f1"]}
            for k, v in report["layers"].items()}


def score_trees(run_dir: Path, trees: dict[str, Any]) -> dict[str, Any]:
    """Every checkpoint of ``trees["checkpoints"]``: each layer under each rule on dev and on
    test (once per ``test_max_len``), and the trees of ``trees["sentences"]``."""
    import torch

    from treelm.run import load_run
    from treelm.syntax.levels import sentence_levels
    from treelm.syntax.report import parsing_report

    parts = [("dev", trees["dev"], None)]
    if trees.get("test"):
        parts += [(part_name(n), trees["test"], n) for n in trees["test_max_len"]]
    layers = None if trees["layers"] == "all" else trees["layers"]
    out: dict[str, Any] = {}
    sentences: dict[str, Any] = {}
    for checkpoint in trees["checkpoints"]:
        r = load_run(run_dir, checkpoint, expect="lm")
        if torch.cuda.is_available():   # read on the GPU where there is one: at the paper's
            r.model.cuda()              # width the CPU reads ~350 words/s (2 threads), and the
            #                             six sweeps of dev and test are ~200k words per run
        scores: dict[str, Any] = {}
        for rule in trees["rules"]:
            for name, treebank, max_len in parts:
                rep = parsing_report(treebank, max_len, run=r, layers=layers, style=rule,
                                     checkpoint=checkpoint, baselines=())
                scores.setdefault(rule, {})[name] = _f1s(rep)
                scores[rule]["oov_" + name] = rep["oov_words"] / max(rep["n_words"], 1)
        out[checkpoint] = scores
        if trees.get("sentences") and checkpoint == trees["checkpoints"][0]:
            words = [r.tokenizer.read_line(s) for s in trees["sentences"]]
            for text, lv in zip(trees["sentences"], sentence_levels(r.model, r.vocab, words)):
                sentences[text] = {rule: {str(k): lv.tree(k, rule) for k in lv.layers}
                                   for rule in trees["rules"]}
    readings = {c: run_readings(run_dir, c, trees) for c in trees["checkpoints"]}
    return {"trees": out, "readings": readings,
            **({"sentences": sentences} if sentences else {})}


def run_readings(run_dir: Path, checkpoint: str, trees: dict[str, Any]) -> dict[str, Any]:
    """Every tree a checkpoint reads, on dev and on test at all lengths, as bits
    (:mod:`treelm.syntax.tree_codes`): ``{rule: {layer: {part: code}}}``. What ensembles of the
    study's runs are made of, kept in the record so that they need no retraining. The trees are
    those :func:`parsing_report` scores (the same levels, :func:`build_tree` under each rule)."""
    import torch

    from treelm.run import load_run
    from treelm.syntax.levels import onlstm_layers, sentence_levels
    from treelm.syntax.report import load_golds
    from treelm.syntax.tree_codes import encode_trees
    from treelm.syntax.trees import build_tree

    r = load_run(run_dir, checkpoint, expect="lm")
    if torch.cuda.is_available():
        r.model.cuda()
    layers = onlstm_layers(r.model) if trees["layers"] == "all" else trees["layers"]
    out: dict[str, Any] = {}
    for part, treebank in (("dev", trees["dev"]), ("test", trees.get("test"))):
        if not treebank:
            continue
        golds = load_golds(treebank)
        levels = sentence_levels(r.model, r.vocab, [g.words for g in golds])
        for k in layers:
            row = levels[0].row(k)
            for rule in trees["rules"]:
                tr = [build_tree(lv.df[row], list(range(len(g.words))), rule)
                      for lv, g in zip(levels, golds)]
                out.setdefault(rule, {}).setdefault(str(k), {})[part] = encode_trees(tr)
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
