"""``treelm gradflow``: gradient flow through time for trained runs or fresh cells."""

from __future__ import annotations

import argparse
from typing import Any

from treelm.errors import IMAGE_SUFFIXES, TreelmError, check_output
from treelm.run import add_run_options
from treelm.verb import SEED, Number, add_verb

GRADFLOW_EPILOG = """examples:
  treelm gradflow --cells elman lstm gru --hidden 64 --length 50        # the table only
  treelm gradflow --cells elman lstm gru onlstm mrnn tensor -o gradflow.png --csv gradflow.csv
  treelm gradflow --runs runs/ptb-char-elman-1m runs/ptb-char-lstm-1m --data ptb-char -o flow.png
"""


def cmd_gradflow(args: argparse.Namespace) -> int:
    """how far gradients reach back in time, per cell

    Measure the mean norm of dL_T/dh_t against the lag T - t, where L_T is the cross-entropy loss of
    the last step only, for trained runs (--runs) or freshly initialised cells (--cells, one layer
    with one-hot input and a random decoder), all on the same batch. Prints the norms at a few lags;
    writes every lag as CSV (lag,cell,mean_grad_norm) with --csv and a log-scale plot with -o; for
    the Elman SRN also reports the largest singular value of W_hh against the 1/gamma bound of
    Pascanu, Mikolov & Bengio (2013): vanishing is guaranteed when sigma_max < 1/gamma (gamma = 1
    for tanh).
    """
    import torch

    from treelm.analysis.gradflow import flow_study, plot, study_title, write_csv

    if bool(args.runs) == bool(args.cells):
        raise TreelmError("gradflow needs either --runs RUN_DIR ... or --cells CELL ...")
    if args.output:
        check_output(args.output, IMAGE_SUFFIXES, "plot")
    if args.csv:
        check_output(args.csv, (".csv",), "table")
    if args.threads:
        torch.set_num_threads(args.threads)
    results = flow_study(cells=args.cells, runs=args.runs, hidden=args.hidden,
                         length=args.length, batch=args.batch_size, seed=args.seed,
                         data=args.data,
                         vocab_size=args.vocab, wrt=args.wrt, checkpoint=args.checkpoint)
    for res in results:
        picks = sorted({k for k in (0, 1, 10, 50, args.length) if k <= args.length})
        print(f"{res.label:<12} " + "  ".join(f"lag {k}: {float(res.norms[k]):.3e}"
                                             for k in picks))
        for b in res.elman:
            print(f"{'':<12} Pascanu et al. 2013 bound, {b.describe()}")
    written = []
    if args.csv:
        write_csv(results, args.csv)
        written.append(args.csv)
    if args.output:
        plot(results, args.output, study_title(bool(args.cells), args.length, args.batch_size,
                                               args.hidden, args.data))
        written.append(args.output)
    if written:
        print(f"wrote {' and '.join(written)}")
    return 0


def add_gradflow(sub: Any) -> argparse.ArgumentParser:
    g = add_verb(sub, "gradflow", cmd_gradflow, epilog=GRADFLOW_EPILOG)
    src = g.add_mutually_exclusive_group()
    src.add_argument("--runs", nargs="+", metavar="RUN_DIR", help="trained run directories")
    src.add_argument("--cells", nargs="+", metavar="CELL",
                     help="fresh cells: elman lstm gru onlstm mrnn tensor jordan")
    g.add_argument("--hidden", type=Number(int, at_least=1), default=128,
                   help="fresh cells: hidden size (128)")
    # one symbol leaves nothing to predict: its loss, and every gradient, would be 0
    g.add_argument("--vocab", type=Number(int, at_least=2), default=50,
                   help="fresh cells with random data: alphabet size (50, as PTB chars)")
    g.add_argument("--length", type=Number(int, at_least=1), default=100,
                   help="sequence length T (100)")
    g.add_argument("--batch-size", type=Number(int, at_least=1), default=32,
                   help="batch size B (32)")
    g.add_argument("--seed", type=SEED, default=0, help="seed of the weights and random data")
    g.add_argument("--data", choices=["random", "ptb-char"], default="random",
                   help="uniformly random symbols (default) or the start of the PTB "
                   "character training text")
    g.add_argument("--wrt", choices=["h", "state"], default="h",
                   help="differentiate w.r.t. the hidden vector h_t (default) or the whole "
                   "state, e.g. (h_t, c_t)")
    g.add_argument("-o", "--output", metavar="FILE.png", help="write the plot (.png, .pdf, "
                   ".svg, .jpg) to FILE; nothing is written unless asked")
    g.add_argument("--csv", metavar="FILE.csv", help="write the norms at every lag to FILE.csv")
    add_run_options(g)
    return g
