"""Cross-check treelm.syntax baseline F1 scores against a deliberately naive re-computation.

The naive side shares no code with ``treelm.syntax`` / ``treelm.data.treebank``:

* trees are read by NLTK's own ``BracketParseCorpusReader`` (not treelm's parser) and
  preprocessed with a small recursive function (word-tag filter, lower-case, digit runs ->
  ``N``, empty nodes dropped, unary chains collapsed);
* baseline brackets come from closed formulas -- right-branching ``{(i, n): 1 <= i <= n-2}``,
  left-branching ``{(0, j): 2 <= j <= n-1}`` -- or small recursive builders (balanced: halves
  with the odd word on the right, as in the ON-LSTM paper; balanced_left: on the left; random
  from the same ``numpy.random.default_rng(seed).random(n)`` draws per sentence);
* the gold bracket sets of both sides are compared sentence by sentence;
* sentence F1 uses the reference formula with its ``1e-8`` epsilons (PRPN / ON-LSTM
  ``test_phrase_grammar.py``), corpus F1 sums matches over the corpus.

Usage::

    NLTK_DATA=/work/shared/data/nltk_data python tools/verify_baselines.py [--max-len 10]
        [--treebank nltk|FILE|DIR] [--seeds 5]

Prints one JSON object with both sets of numbers and exits 1 if they differ by > 1e-6.

It lives in ``tools/``, not ``benchmarks/``: it checks scores and measures no speed; its record
goes where the benchmarks' go (``benchmarks/common.py``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))
from common import write_result  # noqa: E402

WORDS = set(
    "CC CD DT EX FW IN JJ JJR JJS LS MD NN NNS NNP NNPS PDT POS PRP PRP$ RB RBR RBS RP SYM "
    "TO UH VB VBD VBG VBN VBP VBZ WDT WP WP$ WRB".split()
)
TOLERANCE = 1e-6
DETERMINISTIC = ("left_branching", "right_branching", "balanced", "balanced_left")


# --------------------------------------------------------------------------- naive side
def naive_sentences(treebank: str) -> list:
    """Raw nltk.Tree objects via NLTK's reader (never downloads)."""
    import nltk
    from nltk.corpus.reader import BracketParseCorpusReader

    if treebank == "nltk":
        paths = [p for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
        root = nltk.data.find("corpora/treebank/combined/", paths=paths + nltk.data.path)
        reader = BracketParseCorpusReader(root, r"wsj_.*\.mrg")
    elif os.path.isdir(treebank):
        reader = BracketParseCorpusReader(treebank, r"(?i).*\.mrg")
    else:
        reader = BracketParseCorpusReader(os.path.dirname(treebank) or ".",
                                          [os.path.basename(treebank)])
    return list(reader.parsed_sents())


def simplify(t):
    """nltk.Tree -> nested lists of kept words; [] if nothing survives."""
    if isinstance(t, str):
        return []
    if t.height() == 2:  # pre-terminal
        if t.label() in WORDS:
            return re.sub("[0-9]+", "N", t[0].lower())
        return []
    kids = [k for k in (simplify(c) for c in t) if k != []]
    if not kids:
        return []
    return kids[0] if len(kids) == 1 else kids


def n_leaves(t) -> int:
    return sum(n_leaves(c) for c in t) if isinstance(t, list) else 1


def spans_of(t, start=0) -> set:
    """Spans of length >= 2 strictly inside the tree rooted at ``t`` (root span excluded)."""
    out = set()
    pos = start
    if isinstance(t, list):
        for child in t:
            size = n_leaves(child)
            if size > 1:
                out.add((pos, pos + size))
                out |= spans_of(child, pos)
            pos += size
    return out


def naive_balanced(lo, hi, extra_right=True) -> set:
    """Halve [lo, hi) recursively; an odd word goes to the right half (or the left)."""
    if hi - lo < 2:
        return set()
    half = (hi - lo) // 2 if extra_right else (hi - lo + 1) // 2
    mid = lo + half
    return ({(lo, hi)} | naive_balanced(lo, mid, extra_right)
            | naive_balanced(mid, hi, extra_right))


def naive_random(levels, lo, hi) -> set:
    if hi - lo < 2:
        return set()
    best = lo + 1
    for i in range(lo + 1, hi):
        if levels[i] > levels[best]:
            best = i
    return {(lo, hi)} | naive_random(levels, lo, best) | naive_random(levels, best, hi)


def naive_scores(pairs) -> dict:
    f1s = []
    match = pred_total = gold_total = 0
    for pred, gold in pairs:
        overlap = len(pred & gold)
        prec = overlap / (len(pred) + 1e-8)
        reca = overlap / (len(gold) + 1e-8)
        if len(gold) == 0:
            reca = 1.0
            if len(pred) == 0:
                prec = 1.0
        f1s.append(2 * prec * reca / (prec + reca + 1e-8))
        match += overlap
        pred_total += len(pred)
        gold_total += len(gold)
    p, r = match / pred_total, match / gold_total
    return {"sentence_f1": sum(f1s) / len(f1s), "corpus_f1": 2 * p * r / (p + r) if p + r else 0.0}


def naive_all(treebank: str, max_len: int | None, seeds: list[int]) -> tuple[dict, list]:
    """Scores, and the per-sentence ``(n_words, gold_spans)`` list they were computed from."""
    sents = []
    for raw in naive_sentences(treebank):
        tree = simplify(raw)
        if tree == []:
            continue
        n = n_leaves(tree)
        if max_len is None or n <= max_len:
            sents.append((n, spans_of(tree)))
    out = {"n_sentences": len(sents)}
    formulas = {
        "left_branching": lambda n: {(0, j) for j in range(2, n)},
        "right_branching": lambda n: {(i, n) for i in range(1, n - 1)},
        "balanced": lambda n: naive_balanced(0, n) - {(0, n)},
        "balanced_left": lambda n: naive_balanced(0, n, extra_right=False) - {(0, n)},
    }
    for name, make in formulas.items():
        out[name] = naive_scores((make(n), gold) for n, gold in sents)
    runs = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        pairs = []
        for n, gold in sents:
            levels = rng.random(n).tolist()
            pairs.append((naive_random(levels, 0, n) - {(0, n)}, gold))
        runs.append(naive_scores(pairs))
    out["random"] = {k: statistics.fmean(r[k] for r in runs) for k in ("sentence_f1", "corpus_f1")}
    return out, sents


# --------------------------------------------------------------------------- treelm side
def treelm_all(treebank: str, max_len: int | None, seeds: list[int]) -> tuple[dict, list]:
    """Scores via treelm, and the per-sentence ``(n_words, gold_brackets)`` list."""
    from treelm.data.treebank import load_treebank
    from treelm.syntax.baselines import evaluate_baselines
    from treelm.syntax.metrics import brackets

    golds = load_treebank(treebank, max_len=max_len)
    res = evaluate_baselines(golds, seeds=seeds, names=[*DETERMINISTIC, "random"])
    out: dict = {"n_sentences": len(golds)}
    for name in DETERMINISTIC:
        out[name] = {k: res[name][k] for k in ("sentence_f1", "corpus_f1")}
        out[name]["label_recall"] = res[name]["label_recall"]
    out["random"] = {k: res["random"][k]["mean"] for k in ("sentence_f1", "corpus_f1")}
    out["random_std"] = {k: res["random"][k]["std"] for k in ("sentence_f1", "corpus_f1")}
    return out, [(len(g.words), brackets(g.tree)) for g in golds]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--treebank", default="nltk", help="'nltk', a .mrg file or a directory")
    parser.add_argument("--max-len", type=int, default=None, help="keep sentences <= N words")
    parser.add_argument("--seeds", type=int, default=5, help="random-tree seeds 0..N-1")
    args = parser.parse_args(argv)
    seeds = list(range(args.seeds))
    naive, naive_golds = naive_all(args.treebank, args.max_len, seeds)
    ours, our_golds = treelm_all(args.treebank, args.max_len, seeds)
    gold_mismatches = sum(a != b for a, b in zip(naive_golds, our_golds))
    gold_mismatches += abs(len(naive_golds) - len(our_golds))
    diffs = {}
    for name in (*DETERMINISTIC, "random"):
        for key in ("sentence_f1", "corpus_f1"):
            diffs[f"{name}.{key}"] = abs(naive[name][key] - ours[name][key])
    ok = gold_mismatches == 0 and max(diffs.values()) <= TOLERANCE
    report = {
        "treebank": args.treebank,
        "max_len": args.max_len,
        "seeds": seeds,
        "naive": naive,
        "treelm": ours,
        "gold_mismatches": gold_mismatches,
        "max_abs_diff": max(diffs.values()),
        "agree": ok,
    }
    key = f"{args.treebank} max_len={args.max_len}"
    write_result("verify_baselines", {"checks": {key: report}}, merge_key="checks",
                 folder="tools")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
