"""``treelm teacher-trees``: the tree average of chosen sources over a training corpus.

The teacher trees of ensemble distillation (``train.tree_teacher``): ``treelm ensemble``'s
average (:mod:`treelm.parsing.ensemble`: runs at their dev choice, ``RUN:LAYER:RULE`` readings,
tree files) over the sentences of a corpus, PTB's training text by default, less the sentences
of the treebanks the student will be scored on (:mod:`treelm.syntax.teacher`). Writes the trees
to ``-o`` (a tree a line, as ``eval-parse --trees`` reads them) and what they were made of to
``-o``'s name + ``.json``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from typing import Any

from treelm.errors import TreelmError, check_output
from treelm.parsing.ensemble import add_source_options, read_source, source_trees
from treelm.verb import add_verb

TEACHER_EPILOG = """examples:
  treelm teacher-trees runs/a:2:official runs/a:3:official runs/b:2:official \\
      --checkpoint best-trees -o teacher.txt            # PTB train less nltk-dev/test
  treelm teacher-trees runs/a runs/b --corpus my-text.txt --exclude none -o teacher.txt
  treelm teacher-trees --baseline right_branching -o right.txt     # a control's trees
"""


def teacher_sentences(corpus: str, exclude: list[str]) -> tuple[list[list[str]], dict[str, Any],
                                                                int]:
    """(the sentences kept, the held-out counts, the corpus's size)."""
    from treelm.syntax.report import load_golds
    from treelm.syntax.teacher import held_out, ptb_sentences

    if corpus == "ptb-train":
        sentences = ptb_sentences("train")
    else:
        try:
            with open(corpus, encoding="utf-8") as f:
                sentences = [line.split() for line in f if line.strip()]
        except OSError as e:
            raise TreelmError(f"--corpus {corpus}: {e.strerror or e}") from None
        if not sentences:
            raise TreelmError(f"--corpus {corpus}: no sentence in it")
    parts = {}
    for name in exclude:
        try:
            parts[name] = [list(g.words) for g in load_golds(name)]
        except TreelmError as e:
            raise TreelmError(f"--exclude {name}: {e} (--exclude none keeps every sentence)"
                              ) from None
    keep, counts = held_out(sentences, parts)
    return [sentences[i] for i in keep], counts, len(sentences)


def cmd_teacher_trees(args: argparse.Namespace) -> int:
    """write the tree average of runs and tree files over a training corpus

    The teacher trees of ensemble distillation (train.tree_teacher in a config): for every
    sentence of --corpus (default ptb-train, PTB's training text a sentence a line; or a file of
    sentences, one a line), the binary tree that shares the most spans with the SOURCEs' trees,
    as treelm ensemble averages them. The sentences of the --exclude treebanks (default nltk-dev
    and nltk-test, which lie inside PTB's training text) are left out first, so that a student
    never learns the ensemble's tree of a sentence it is scored on. Writes -o (a tree a line)
    and -o.json (sources, sentences, how many were dropped).
    """
    from treelm.api.ensemble import ensemble_trees
    from treelm.syntax.teacher import teacher_record
    from treelm.syntax.tree_loss import kept_spans
    from treelm.syntax.trees import tree_to_brackets

    t0 = time.perf_counter()
    check_output(args.output, what="trees")
    if bool(args.sources) == bool(args.baseline):
        raise TreelmError("teacher-trees needs SOURCEs or --baseline (a control), not both")
    sources = [read_source(s) for s in args.sources]
    if args.source_weights is not None and len(args.source_weights) != len(sources):
        raise TreelmError(f"--source-weights: {len(args.source_weights)} weights for "
                          f"{len(sources)} sources; give one per source")
    exclude = [] if args.exclude == ["none"] else args.exclude
    sentences, counts, total = teacher_sentences(args.corpus, exclude)
    for name, c in counts.items():
        print(f"treelm teacher-trees: {name}: {c['matched']} of its {c['sentences']} sentences "
              f"found in {args.corpus}, {c['dropped']} lines left out", file=sys.stderr)
    if args.baseline:
        from treelm.syntax import baselines

        average = [getattr(baselines, args.baseline)(words) for words in sentences]
    else:
        args.treebank, args.input = None, args.corpus   # what the source readers expect
        read = source_trees(args, sources, sentences, list(range(len(sentences))), None)
        average = ensemble_trees([trees for _, trees in read], args.source_weights)
    with open(args.output, "w", encoding="utf-8") as f:
        f.writelines(tree_to_brackets(t) + "\n" for t in average)
    control = ["--baseline", args.baseline] if args.baseline else []
    command = ["treelm", "teacher-trees", *args.sources, *control, "--corpus", args.corpus,
               "--exclude", *args.exclude, "--checkpoint", args.checkpoint, "-o", args.output]
    record = teacher_record([s.text for s in sources] or [args.baseline], args.corpus, total,
                            len(sentences), counts, (time.perf_counter() - t0) / 60,
                            shlex.join(command))
    # what a student read by the official rule can learn of them (the split rule: all)
    record["official_rule_keeps"] = round(kept_spans(average, "official"), 4)
    with open(args.output + ".json", "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    made = f"{len(sources)} sources" if sources else args.baseline
    print(f"treelm teacher-trees: {len(average):,} trees of {made} -> "
          f"{args.output} ({total - len(sentences):,} of {total:,} sentences left out)",
          file=sys.stderr)
    return 0


def add_teacher_trees(sub: Any) -> argparse.ArgumentParser:
    p = add_verb(sub, "teacher-trees", cmd_teacher_trees, epilog=TEACHER_EPILOG)
    add_source_options(p, "*", "a file of trees over the corpus's kept sentences")
    p.add_argument("--baseline", choices=("right_branching", "left_branching", "balanced"),
                   help="instead of SOURCEs: that baseline's trees (a control's teacher)")
    p.add_argument("--corpus", default="ptb-train", metavar="ptb-train|FILE",
                   help="the sentences: PTB's training text (default) or a file, one a line")
    p.add_argument("--exclude", nargs="+", default=["nltk-dev", "nltk-test"],
                   metavar="TREEBANK",
                   help="treebanks whose sentences are left out (default nltk-dev nltk-test; "
                   "none: keep all)")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the trees, one a line (and FILE.json, what they were made of)")
    return p


__all__ = ["add_teacher_trees", "cmd_teacher_trees", "teacher_sentences"]
