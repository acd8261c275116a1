"""Score minimal pairs with trained language models: accuracy per construction, per run.

A pair counts as correct when the model gives the grammatical sentence the higher whole-sentence
log-probability, ``log p(good) > log p(bad)`` strictly (a tie, e.g. when the two differing words
are both outside the vocabulary and read as ``<unk>``, counts as wrong), as in Marvin & Linzen's
``analyze_results.py``. Sentence scores come from
:func:`treelm.decode.score.sentence_logprobs` (``<eos>`` + sentence + ``<eos>``, all positions
summed). Every distinct sentence is scored once per run, however many pairs share it.

The report (a JSON-ready dict) holds per construction its label, phenomenon, number of pairs
and, for generated pairs, M&L's number; per run and construction the accuracy, correct pairs,
ties, pairs with an ``<unk>`` and ``<unk>`` tokens; per run the mean of the construction
accuracies (unweighted: a construction counts once however many pairs it has).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from treelm.suite.agreement import BY_NAME, generate
from treelm.suite.pairs import Pair, read_pairs

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


def score_run(model: Any, vocab: Any, tokenizer: Any, pairs: Sequence[Pair],
              batch_size: int) -> dict[str, dict[str, Any]]:
    """Per construction: accuracy, correct, pairs, ties, pairs_with_unk, unk_tokens."""
    from treelm.decode.score import sentence_logprobs

    index: dict[str, int] = {}
    for p in pairs:
        index.setdefault(p.grammatical, len(index))
        index.setdefault(p.ungrammatical, len(index))
    logp, unks = sentence_logprobs(model, vocab, tokenizer, list(index), batch_size)
    logp, unks = logp.tolist(), unks.tolist()
    out: dict[str, dict[str, Any]] = {}
    for p in pairs:
        g, u = index[p.grammatical], index[p.ungrammatical]
        s = out.setdefault(p.construction, {"pairs": 0, "correct": 0, "ties": 0,
                                            "pairs_with_unk": 0, "unk_tokens": 0})
        s["pairs"] += 1
        s["correct"] += logp[g] > logp[u]
        s["ties"] += logp[g] == logp[u]
        s["pairs_with_unk"] += (unks[g] + unks[u]) > 0
        s["unk_tokens"] += unks[g] + unks[u]
    for s in out.values():
        s["accuracy"] = round(s["correct"] / s["pairs"], 4)
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
                     checkpoint: str = "best", unk: str = "map") -> dict[str, Any]:
    """Score the generated suite (or the pairs of ``pairs_file``) with every run of
    ``run_dirs`` (language-model runs; any other is a one-line error) and return the report.
    Words outside a run's vocabulary are read as ``<unk>`` and counted (``unk="map"``), or
    refused before any scoring with one line naming the pair (``unk="error"``)."""
    from treelm.run import load_run
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
        r = load_run(path, checkpoint, expect="lm")
        if unk == "error":
            check_unknown(pairs, r.vocab, r.tokenizer, UnknownSymbols(unk, f"{path}'s vocabulary"),
                          str(pairs_file))
        scores = score_run(r.model, r.vocab, r.tokenizer, pairs, batch_size)
        accs = [scores[c["name"]]["accuracy"] for c in constructions]
        runs.append({"run": str(path), "checkpoint": checkpoint, "constructions": scores,
                     "mean_accuracy": round(sum(accs) / len(accs), 4),
                     "pairs_with_unk": sum(s["pairs_with_unk"] for s in scores.values()),
                     "unk_tokens": sum(s["unk_tokens"] for s in scores.values())})
    return {"suite": "agreement", **source, "scoring": SCORING,
            "pairs": len(pairs), "constructions": constructions, "runs": runs}


def run_names(paths: Sequence[str]) -> list[str]:
    """Column heads: the runs' folder names, or their paths where two folders share a name."""
    short = [Path(p).name or str(p) for p in paths]
    return short if len(set(short)) == len(short) else [str(p) for p in paths]


def format_table(report: dict[str, Any], names: Sequence[str] | None = None) -> str:
    """Pairs and accuracy per construction, one column per run (headed by ``names`` or
    :func:`run_names`), constructions grouped by phenomenon; then the mean and the ``<unk>``
    counts."""
    runs = report["runs"]
    heads = list(names) if names else run_names([r["run"] for r in runs])
    label_w = max([len(c["label"]) + 2 for c in report["constructions"]] + [26])
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
                        [f"{r['constructions'][c['name']]['accuracy']:.3f}" for r in runs]))
    out.append(line("mean over constructions", "", "",
                    [f"{r['mean_accuracy']:.3f}" for r in runs]))
    out.append(line("pairs with <unk>", "", "", [str(r["pairs_with_unk"]) for r in runs]))
    return "\n".join(out)
