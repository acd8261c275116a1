"""Score minimal pairs with trained language models: accuracy per construction, per run.

A pair counts as correct when the model gives the grammatical sentence the higher whole-sentence
log-probability, ``log p(good) > log p(bad)``, as in Marvin & Linzen's ``analyze_results.py``.
Two kinds of pair say nothing about the model and are counted apart, outside the accuracy:

* **<unk> in the difference**: the span where the two sentences differ (their symbols, from the
  run's tokenizer, after the common prefix and before the common suffix) holds a symbol outside
  the vocabulary, read as ``<unk>``, on either side.
  The model then compares a word with "some word it does not know", or, when both differing
  words are unknown, two identical sentences (Marvin & Linzen's own pairs with a PTB model:
  most of their verbs and nouns are outside the 10k words). An ``<unk>`` elsewhere in the
  sentence is shared by both and leaves the pair scored (``pairs_with_unk`` counts those too).
* **ties**: the two scores are exactly equal (in float64, summed position by position) although
  the differing span is known, e.g. a "pair" of one sentence twice.

``accuracy = correct / scored`` with ``scored = pairs − unk_in_difference − ties`` (null when
nothing is left to score). Sentence scores come from the Python API,
:meth:`treelm.api.model.TreelmModel.score` (:func:`treelm.decode.score.sentence_logprobs`:
``<eos>`` + sentence + ``<eos>``, all positions summed, in the run's precision). Every
distinct sentence is scored once per run, however many pairs share it.

The report (a JSON-ready dict) holds per construction its label, phenomenon, number of pairs
and, for generated pairs, M&L's number; per run and construction the accuracy, correct and
scored pairs, ties, pairs with ``<unk>`` in the difference, pairs with an ``<unk>`` anywhere and
``<unk>`` tokens; per run the mean of the construction accuracies (unweighted: a construction
counts once however many pairs it has; constructions with nothing scored are left out) and the
totals of those counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treelm.suite.agreement import BY_NAME, generate
from treelm.suite.pairs import Pair, read_pairs

if TYPE_CHECKING:   # torch and the runs load only when a suite is scored
    from treelm.api.model import TreelmModel

SCORING = ("log p(<eos> s <eos>) in nats: every symbol of the sentence and the closing <eos>, "
           "each given all before it; correct when log p(grammatical) > log p(ungrammatical)")


def construction_rows(pairs: Sequence[Pair], generated: bool) -> list[dict[str, Any]]:
    """Constructions in the order they first appear, with their pair counts."""
    rows: dict[str, dict[str, Any]] = {}
    for p in pairs:
        if p.construction not in rows:
            c = BY_NAME.get(p.construction) if generated else None
            rows[p.construction] = {
                "name": p.construction, "label": c.label if c else p.construction,
                "phenomenon": c.phenomenon if c else "", "pairs": 0,
                "original_pairs": c.original if c else None}
        rows[p.construction]["pairs"] += 1
    return list(rows.values())


COUNTS = ("pairs", "scored", "correct", "ties", "unk_in_difference", "pairs_with_unk",
          "unk_tokens")


def difference(a: Sequence[Any], b: Sequence[Any]) -> tuple[Sequence[Any], Sequence[Any]]:
    """The spans where sequences ``a`` and ``b`` differ: what remains of each after their
    longest common prefix and then their longest common suffix (both empty when ``a == b``)."""
    n = min(len(a), len(b))
    head = next((i for i in range(n) if a[i] != b[i]), n)
    tail = 0
    while tail < n - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    return a[head:len(a) - tail], b[head:len(b) - tail]


def score_run(model: TreelmModel, pairs: Sequence[Pair],
              batch_size: int) -> dict[str, dict[str, Any]]:
    """Per construction: accuracy and :data:`COUNTS` (see the module docstring), the sentences
    scored by :meth:`treelm.api.model.TreelmModel.score`."""
    vocab, tokenizer = model.run.vocab, model.run.tokenizer
    index: dict[str, int] = {}
    for p in pairs:
        index.setdefault(p.grammatical, len(index))
        index.setdefault(p.ungrammatical, len(index))
    sentences = list(index)
    logp = model.score(sentences, batch_size=batch_size)
    symbols = [tokenizer.encode(x) for x in sentences]
    unks = [len(vocab.unknown(x)) for x in symbols]      # read as <unk> by the scorer
    out: dict[str, dict[str, Any]] = {}
    for p in pairs:
        g, u = index[p.grammatical], index[p.ungrammatical]
        s = out.setdefault(p.construction, dict.fromkeys(COUNTS, 0))
        s["pairs"] += 1
        s["pairs_with_unk"] += (unks[g] + unks[u]) > 0
        s["unk_tokens"] += unks[g] + unks[u]
        dg, du = difference(symbols[g], symbols[u])
        if any(x not in vocab for x in (*dg, *du)):
            s["unk_in_difference"] += 1
        elif logp[g] == logp[u]:
            s["ties"] += 1
        else:
            s["scored"] += 1
            s["correct"] += logp[g] > logp[u]
    for s in out.values():
        s["accuracy"] = round(s["correct"] / s["scored"], 4) if s["scored"] else None
    return out


def check_unknown(pairs: Sequence[Pair], vocab: Any, tokenizer: Any, policy: Any,
                  where: str) -> None:
    """The words of every pair outside ``vocab`` follow ``policy``
    (:class:`~treelm.text.inputs.UnknownSymbols`); a pair is named by its line of ``where`` (a
    ``--pairs`` file) or its number and construction (generated)."""
    for k, p in enumerate(pairs, 1):
        symbols = [*tokenizer.encode(p.grammatical), *tokenizer.encode(p.ungrammatical)]
        name = f"{where}:{p.line}" if p.line else f"pair {k} ({p.construction})"
        policy.check([symbols[i] for i in vocab.unknown(symbols)], name)


def agreement_report(run_dirs: Sequence[str], pairs_file: str | None = None, seed: int = 0,
                     max_per_construction: int | None = None, batch_size: int = 128,
                     checkpoint: str = "best", unk: str = "map",
                     precision: str = "run") -> dict[str, Any]:
    """Score the generated suite (or the pairs of ``pairs_file``) with every run of
    ``run_dirs`` (language-model runs, opened by :func:`treelm.api.model.load` in
    ``precision``; any other is a one-line error) and return the report. Words outside a run's
    vocabulary are read as ``<unk>`` and counted (``unk="map"``), or refused before any scoring
    with one line naming the pair (``unk="error"``)."""
    from treelm.api.model import load
    from treelm.text.inputs import UnknownSymbols

    if pairs_file is not None:
        pairs = read_pairs(pairs_file)
        source: dict[str, Any] = {"pairs_file": str(pairs_file)}
    else:
        pairs = generate(seed, max_per_construction)
        source = {"generated": "Marvin & Linzen (2018) templates, treelm lexicon",
                  "seed": seed, "max_per_construction": max_per_construction}
    constructions = construction_rows(pairs, pairs_file is None)
    runs = []
    for path in run_dirs:
        m = load(path, checkpoint, precision=precision, expect="lm")
        if unk == "error":
            check_unknown(pairs, m.run.vocab, m.run.tokenizer,
                          UnknownSymbols(unk, f"{path}'s vocabulary"), str(pairs_file))
        scores = score_run(m, pairs, batch_size)
        accs = [a for c in constructions if (a := scores[c["name"]]["accuracy"]) is not None]
        runs.append({"run": str(path), "checkpoint": checkpoint, "constructions": scores,
                     "mean_accuracy": round(sum(accs) / len(accs), 4) if accs else None,
                     **{k: sum(s[k] for s in scores.values()) for k in COUNTS if k != "pairs"}})
    return {"suite": "agreement", **source, "scoring": SCORING,
            "pairs": len(pairs), "constructions": constructions, "runs": runs}


def run_names(paths: Sequence[str]) -> list[str]:
    """Column heads: the runs' folder names, or their paths where two folders share a name."""
    short = [Path(p).name or str(p) for p in paths]
    return short if len(set(short)) == len(short) else [str(p) for p in paths]


def format_table(report: dict[str, Any], names: Sequence[str] | None = None) -> str:
    """Pairs and accuracy per construction, one column per run (headed by ``names`` or
    :func:`run_names`), constructions grouped by phenomenon; then the mean and the ``<unk>``
    counts, and the pairs left out of the accuracy."""
    runs = report["runs"]
    heads = list(names) if names else run_names([r["run"] for r in runs])
    label_w = max([len(c["label"]) + 2 for c in report["constructions"]] + [34])
    col_w = [max(len(h), 6) for h in heads]
    orig = any(c["original_pairs"] for c in report["constructions"])

    def line(label: str, pairs: str, m_l: str, cells: Sequence[str]) -> str:
        mid = f"  {pairs:>6}" + (f"  {m_l:>6}" if orig else "")
        return (f"{label:<{label_w}}{mid}" +
                "".join(f"  {c:>{w}}" for c, w in zip(cells, col_w))).rstrip()

    out = [line("construction", "pairs", "M&L", heads)]
    group = None
    for c in report["constructions"]:
        if c["phenomenon"] and c["phenomenon"] != group:
            group = c["phenomenon"]
            out.append(group)
        label = ("  " if c["phenomenon"] else "") + c["label"]
        out.append(line(label, str(c["pairs"]), str(c["original_pairs"] or ""),
                        [_acc(r['constructions'][c['name']]['accuracy']) for r in runs]))
    out.append(line("mean over constructions", "", "", [_acc(r["mean_accuracy"]) for r in runs]))
    out.append(line("pairs scored", "", "", [str(r["scored"]) for r in runs]))
    out.append(line("left out: <unk> in the difference", "", "",
                    [str(r["unk_in_difference"]) for r in runs]))
    out.append(line("left out: ties", "", "", [str(r["ties"]) for r in runs]))
    out.append(line("pairs with <unk>", "", "", [str(r["pairs_with_unk"]) for r in runs]))
    return "\n".join(out)


def _acc(a: float | None) -> str:
    return "-" if a is None else f"{a:.3f}"
