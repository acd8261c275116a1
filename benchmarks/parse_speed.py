"""Throughput of the ``treelm eval-parse`` pipeline: levels -> trees -> F1, in sentences per second.

Times what ``eval-parse`` does per sentence for a model (Shen et al. 2019, Sec. 5.2 / Table 2):
master-gate levels of every ON-LSTM layer (:func:`treelm.syntax.levels.sentence_levels`, each
sentence read alone as ``<eos> w <eos>``, batched), a tree per layer
(:func:`treelm.syntax.trees.build_tree`) and the metrics per layer
(:func:`treelm.syntax.metrics.evaluate`). Baselines are not timed (they need no model).

Input: gold sentences of at most ``--max-len`` words (WSJ10-length with the default 10), repeated
until at least ``--min-sentences`` sentences. Model: ``--run RUN_DIR``, or a randomly initialised
ON-LSTM LM of the size of ``--config`` (default ``configs/ptb-onlstm-cpu.yaml``; sizes
[400, 800, 800, 400], chunk 10 if that file is missing) with a 10,000-word vocabulary -- speed
does not depend on the weights. The best of ``--rounds`` timed rounds is reported, after one
warm-up round.

Usage::

    NLTK_DATA=/work/shared/data/nltk_data OMP_NUM_THREADS=2 \\
        python benchmarks/parse_speed.py --treebank nltk --max-len 10 --threads 2

Prints one JSON object and writes it to ``benchmarks/results/parse_speed-<YYYYMMDD>.json``
(or ``--out``), with the machine (platform, CPU model, torch version, threads) and the command.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import write_result  # noqa: E402

FALLBACK_MODEL = {"cell": "onlstm", "sizes": [400, 800, 800, 400],
                  "cell_options": {"chunk_size": 10, "master_input": "paper"}}
VOCAB_SIZE = 10_000


def random_model(config: Path | None):
    """(model, description) of a randomly initialised LM of the config's size."""
    import torch

    from treelm.config import load_config
    from treelm.models import build_model

    spec = dict(FALLBACK_MODEL)
    source = "fallback sizes"
    if config is not None and config.exists():
        spec = dict(load_config(config)["model"])
        source = str(config)
    spec["type"] = "lm"
    for key in ("dropout", "dropouth", "dropouti", "dropoute", "wdrop"):
        spec[key] = 0.0
    torch.manual_seed(0)
    model = build_model(spec, vocab_size=VOCAB_SIZE).eval()
    return model, {"weights": "random", "size_from": source, "sizes": spec["sizes"],
                         "cell_options": spec.get("cell_options", {}), "vocab_size": VOCAB_SIZE}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--treebank", default="nltk", help="'nltk' (via NLTK_DATA) or a path")
    parser.add_argument("--max-len", type=int, default=10, help="sentence length limit (10)")
    parser.add_argument("--run", help="a trained run (default: a random model, see --config)")
    parser.add_argument("--config", default=str(ROOT / "configs" / "ptb-onlstm-cpu.yaml"),
                        help="model size of the random model")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (2)")
    parser.add_argument("--batch-size", type=int, default=256, help="sentences per pass (256)")
    parser.add_argument("--min-sentences", type=int, default=4000,
                        help="repeat the corpus up to at least this many sentences (4000)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds; best reported (3)")
    parser.add_argument("--out", help="result file (default benchmarks/results/"
                        "parse_speed-<YYYYMMDD>.json)")
    args = parser.parse_args(argv)

    import torch

    from treelm.data.treebank import load_treebank
    from treelm.syntax.levels import onlstm_layers, sentence_levels
    from treelm.syntax.metrics import evaluate
    from treelm.syntax.trees import build_tree
    from treelm.text import Vocab

    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # as the CLI does: trained gates produce denormals
    golds = load_treebank(args.treebank, max_len=args.max_len)
    if not golds:
        raise SystemExit(f"no sentences of <= {args.max_len} words in {args.treebank}")
    unique = len(golds)
    golds = golds * math.ceil(args.min_sentences / len(golds))
    if args.run:
        from treelm.run import load_run

        r = load_run(args.run, expect="lm")
        model, vocab = r.model, r.vocab
        spec = r.task.config.model
        info = {"weights": args.run, "sizes": spec.get("sizes"),
                "cell_options": spec.get("cell_options", {}), "vocab_size": len(vocab)}
    else:
        model, info = random_model(Path(args.config) if args.config else None)
        words = sorted({w for g in golds for w in g.words})[: VOCAB_SIZE - 2]
        vocab = Vocab(["<eos>", "<unk>", *words])
    layers = onlstm_layers(model)
    sentences = [g.words for g in golds]

    def one_round(golds_part, sents_part) -> dict[str, float]:
        t0 = time.perf_counter()
        levels = sentence_levels(model, vocab, sents_part, args.batch_size)
        t1 = time.perf_counter()
        trees = {k: [build_tree(lv.df[k - 1], g.words) for lv, g in zip(levels, golds_part)]
                 for k in layers}
        t2 = time.perf_counter()
        for k in layers:
            evaluate(trees[k], golds_part)
        t3 = time.perf_counter()
        return {"levels": t1 - t0, "trees": t2 - t1, "f1": t3 - t2, "total": t3 - t0}

    one_round(golds[:512], sentences[:512])                           # warm-up
    rounds = [one_round(golds, sentences) for _ in range(args.rounds)]
    best = min(rounds, key=lambda r: r["total"])
    n = len(golds)
    result = {
        "benchmark": "parse_speed",
        "sentences_per_second": round(n / best["total"], 1),
        "levels_only_sentences_per_second": round(n / best["levels"], 1),
        "n_sentences": n,
        "unique_sentences": unique,
        "mean_words": round(sum(len(s) for s in sentences) / n, 3),
        "treebank": args.treebank,
        "max_len": args.max_len,
        "layers_scored": list(layers),
        "batch_size": args.batch_size,
        "seconds_best_round": {k: round(v, 4) for k, v in best.items()},
        "seconds_all_rounds": [{k: round(v, 4) for k, v in r.items()} for r in rounds],
        "model": info,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "load_average_at_end": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }
    write_result("parse_speed", result, path=Path(args.out) if args.out else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
