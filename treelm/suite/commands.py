"""``treelm suite agreement``: targeted syntactic evaluation of language-model runs.

Scores the minimal pairs of :mod:`treelm.suite.agreement` (or a ``--pairs`` file of one's own)
with each run and prints the pairs and the accuracy per construction, one column per run
(:mod:`treelm.suite.report`). ``-o FILE.json`` also writes the full report; ``--format json`` prints
it on stdout instead of the table, which then goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from treelm.errors import TreelmError, check_output
from treelm.run import add_run_options
from treelm.text.inputs import add_unk_option
from treelm.verb import SEED, Number, add_verb

SUITE_EPILOG = """examples:
  treelm suite agreement runs/onlstm runs/lstm
  treelm suite agreement runs/onlstm --max-per-construction 500 -o agreement.json
  treelm suite agreement runs/onlstm --pairs my_pairs.tsv --format json > report.json
"""


def cmd_agreement(args: argparse.Namespace) -> int:
    """Marvin & Linzen (2018): agreement, reflexives, NPIs

    Score minimal pairs (Marvin & Linzen 2018: subject-verb agreement, reflexive anaphora, negative
    polarity items; templates re-made in Penn Treebank words) with each run: a pair is correct when
    the grammatical sentence has the higher log-probability (<eos> + sentence + <eos>). Prints the
    pairs and the accuracy per construction, one column per run.
    """
    from treelm.suite.report import agreement_report, format_table

    if args.pairs and (args.seed is not None or args.max_per_construction is not None):
        raise TreelmError("--pairs scores the file's pairs; drop --seed and --max-per-construction")
    if args.output is not None:
        check_output(args.output, (".json",), "JSON report")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    report = agreement_report(args.run_dirs, args.pairs, args.seed or 0,
                              args.max_per_construction, args.batch_size, args.checkpoint,
                              args.unk, args.precision)
    for run in report["runs"]:      # --unk map: one line per run that read <unk>
        if run["unk_tokens"]:
            print(f"treelm: {run['run']}: {run['unk_tokens']} symbol(s) outside the run's "
                  f"vocabulary read as <unk>, in {run['pairs_with_unk']} pair(s)",
                  file=sys.stderr, flush=True)
    text = json.dumps(report, indent=1, ensure_ascii=False)
    # with --format json the table still shows, on stderr
    print(format_table(report), file=sys.stderr if args.format == "json" else sys.stdout)
    if args.format == "json":
        print(text)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    return 0


def add_suite(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("suite", help="targeted syntactic evaluation suites (minimal pairs)",
                       description="Evaluation suites for language-model runs: "
                       "`treelm suite SUITE --help` explains each.",
                       epilog=SUITE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    suites = p.add_subparsers(dest="suite", metavar="SUITE", required=True)
    a = add_verb(suites, "agreement", cmd_agreement, epilog=SUITE_EPILOG)
    a.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="language-model runs")
    a.add_argument("--pairs", metavar="FILE", help="score these pairs instead: one a line, "
                   "construction<TAB>grammatical<TAB>ungrammatical (optional header line)")
    a.add_argument("--seed", type=SEED, help="which lexical combinations are drawn (default 0)")
    a.add_argument("--max-per-construction", type=Number(int, at_least=1), metavar="N",
                   help="pairs per construction (default: as many as the original suite)")
    a.add_argument("--batch-size", type=Number(int, at_least=1), default=128,
                   help="sentences per forward pass (default 128)")
    a.add_argument("--format", choices=("table", "json"), default="table",
                   help="print the table (default) or the report as JSON (the table then goes "
                   "to stderr)")
    a.add_argument("-o", "--output", metavar="FILE.json",
                   help="also write the report as JSON to FILE.json")
    add_unk_option(a, "word")
    add_run_options(a)
    return p
