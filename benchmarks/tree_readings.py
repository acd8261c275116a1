"""Other readings of a trained ON-LSTM's levels, scored on a dev treebank (issue 44, item 4: what
keeps split-rule trees above right-branching): the same levels, read four ways.

    NLTK_DATA=../shared/data/nltk_data python benchmarks/tree_readings.py RUN [RUN ...] \
        [--treebank nltk-dev] [--checkpoints best best-trees] [--out FILE.json]

For every run, checkpoint and ON-LSTM layer, one batched pass gives each word's master-forget-gate
level ``d_f`` and master-input-gate level ``d_i`` (:func:`treelm.syntax.levels.sentence_levels`);
the trees are then built from them by

    official      the highest word opens a constituent (the official evaluation);
    split         the highest word (from the second on) starts the right part: a split before it;
    split-after   the split after the highest word (the level read as the boundary on its right:
                  ``split`` of the levels shifted one word to the right);
    official-rev  ``official`` on the negated levels (the lowest word opens a constituent);

and scored by sentence F1 (:func:`treelm.syntax.metrics.sentence_f1`, as ``eval-parse``). The dev
treebank alone is read: this chooses nothing on test.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import write_result  # noqa: E402


def readings(levels: list[float], words: list[str]) -> dict[str, Any]:
    from treelm.syntax.trees import build_tree

    if len(words) == 1:
        return dict.fromkeys(("official", "split", "split-after", "official-rev"), words[0])
    return {"official": build_tree(levels, words, "official"),
            "split": build_tree(levels, words, "split"),
            "split-after": build_tree([0.0, *levels[:-1]], words, "split"),
            "official-rev": build_tree([-x for x in levels], words, "official")}


def score(run: str, checkpoint: str, golds: list[Any]) -> dict[str, float]:
    from treelm.run import load_run
    from treelm.syntax.levels import sentence_levels
    from treelm.syntax.metrics import sentence_f1

    r = load_run(run, checkpoint, expect="lm")
    lvs = sentence_levels(r.model, r.vocab, [g.words for g in golds])
    out = {}
    for k in lvs[0].layers:
        row = lvs[0].row(k)
        for src in ("df", "di"):
            trees: dict[str, list[Any]] = {}
            for lv, g in zip(lvs, golds):
                for name, t in readings([float(x) for x in getattr(lv, src)[row]],
                                        list(g.words)).items():
                    trees.setdefault(name, []).append(t)
            for name, ts in trees.items():
                out[f"{src}/{name}/L{k}"] = sentence_f1(ts, golds).f1
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from treelm.syntax.report import load_golds

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--treebank", default="nltk-dev")
    ap.add_argument("--checkpoints", nargs="+", default=["best", "best-trees"])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    golds = load_golds(args.treebank)
    scores = {}
    for run in args.runs:
        for ck in args.checkpoints:
            scores[f"{run}:{ck}"] = s = score(run, ck, golds)
            best = {name: max(v for k, v in s.items() if k.startswith(f"df/{name}/"))
                    for name in ("official", "split", "split-after", "official-rev")}
            print(f"{run} {ck}: best layer, d_f: " + ", ".join(
                f"{n} {100 * v:.1f}" for n, v in best.items()), file=sys.stderr, flush=True)
    means = {}
    for key in next(iter(scores.values())):
        vals = [s[key] for s in scores.values()]
        means[key] = sum(vals) / len(vals)
    return write_result("tree_readings", {"treebank": args.treebank, "runs": args.runs,
                                          "checkpoints": args.checkpoints, "scores": scores,
                                          "mean": means}, path=args.out, echo=False)


if __name__ == "__main__":
    main()
