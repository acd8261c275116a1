"""Speed of tree ensembles (:func:`treelm.syntax.ensemble.ensemble_trees`), in sentences a second.

Tree averaging (Shayegh et al., ICLR 2024) gives, per sentence, the binary tree with the most
span votes of K source trees: the votes cost ``O(K·n)`` and the dynamic programme over spans
``O(n^3)``, whose inner maximum over split points is one numpy operation per span length. This
times the whole call (votes, programme, the tree built back) on random binary source trees
(:func:`treelm.syntax.baselines.random_tree`; speed does not depend on what the trees are):

* a grid of sentence length ``n`` against number of sources ``K`` (``--lengths``, ``--sources``),
  ``--sentences`` sentences of exactly ``n`` words per cell;
* the figure the issue asks for: 2,000 sentences of WSJ-like lengths from 10 sources, the lengths
  drawn from a normal distribution of the NLTK sample's test part after the protocol's
  preprocessing (``nltk-test``: 1,993 sentences, mean 21.0 words, standard deviation 10.0),
  rounded and clipped to 2..120 words.

Every figure is the best of ``--rounds`` timed rounds. No data and no model are read.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/average_speed.py --note "..."

Prints one JSON object and writes it to ``benchmarks/results/average_speed-<YYYYMMDD>.json`` (or
``--out``) with the machine and the command.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import time_runs, write_result  # noqa: E402


def sources_of(lengths: list[int], k: int, seed: int) -> list[list[object]]:
    """``k`` sources of random binary trees over sentences of the given lengths."""
    from treelm.syntax.baselines import random_tree

    rng = np.random.default_rng(seed)
    return [[random_tree(list(range(n)), rng) for n in lengths] for _ in range(k)]


def best_time(sources: list[list[object]], rounds: int) -> float:
    from treelm.syntax.ensemble import ensemble_trees

    return min(time_runs(lambda: ensemble_trees(sources), 0, rounds))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[10, 20, 40, 80],
                        help="sentence lengths of the grid (10 20 40 80)")
    parser.add_argument("--sources", type=int, nargs="+", default=[2, 5, 10, 20],
                        help="numbers of sources of the grid (2 5 10 20)")
    parser.add_argument("--sentences", type=int, default=200,
                        help="sentences per grid cell (200)")
    parser.add_argument("--corpus", type=int, default=2000,
                        help="sentences of the WSJ-like corpus (2000)")
    parser.add_argument("--corpus-sources", type=int, default=10,
                        help="sources of the WSJ-like corpus (10)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds; best kept (3)")
    parser.add_argument("--note", help="a note kept in the record (e.g. what else ran)")
    parser.add_argument("--out", help="result file (default benchmarks/results/"
                        "average_speed-<YYYYMMDD>.json)")
    args = parser.parse_args(argv)

    best_time(sources_of([10] * 20, 2, 0), 1)                         # warm-up
    grid = []
    for n in args.lengths:
        for k in args.sources:
            t = best_time(sources_of([n] * args.sentences, k, n * 1000 + k), args.rounds)
            grid.append({"n": n, "K": k, "sentences": args.sentences, "seconds": round(t, 4),
                         "sentences_per_second": round(args.sentences / t, 1)})
            print(f"n={n:4d} K={k:3d}: {args.sentences / t:9.1f} sentences/s", file=sys.stderr)
    rng = np.random.default_rng(1)
    lengths = np.clip(np.rint(rng.normal(21.0, 10.0, args.corpus)), 2, 120).astype(int).tolist()
    t = best_time(sources_of(lengths, args.corpus_sources, 2), args.rounds)
    corpus = {"sentences": args.corpus, "K": args.corpus_sources,
              "mean_words": round(float(np.mean(lengths)), 2), "max_words": max(lengths),
              "seconds": round(t, 3), "sentences_per_second": round(args.corpus / t, 1)}
    result = {
        "benchmark": "average_speed",
        "what": "treelm.syntax.ensemble.ensemble_trees on random binary source trees: span "
                "votes, the dynamic programme over spans and the trees built back; best of "
                f"{args.rounds} rounds",
        "grid": grid,
        "wsj_like_corpus": corpus,
        "numpy": np.__version__,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        **({"note": args.note} if args.note else {}),
    }
    write_result("average_speed", result, path=Path(args.out) if args.out else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
