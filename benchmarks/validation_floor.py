"""The least time a validation can take, its multiply-adds at the CPU's peak, against a whole
run's: whether validation with its dev trees can take ≤ 5% of a tree run (issue 56).

    python benchmarks/validation_floor.py --record benchmarks/results/train_time-….json
        [--config configs/ptb-onlstm-trees.yaml] [--out PATH] [key=value ...]

A validation runs the model forward over the validation text (the perplexity: the recurrent
stack and the output layer at every token) and, with ``train.eval_parse``, over the dev
treebank's sentences (the levels of every layer: the stack alone, at every word). Its
multiply-adds:

    macs = valid tokens × (stack + output layer a token) + dev words × stack
           − (valid tokens + dev words − V) × first layer's input part a token

the last term where the first layer reads its input part from a table over the vocabulary of V
words made once a validation (:meth:`treelm.models.lm.RNNLM.fixed`: V rows multiplied instead
of every position's), the stack's from its sizes (``step_profile.onlstm_macs``), the output
layer's from its own count (:meth:`~treelm.nn.output.OutputLayer.loss_macs`) at the validation
text's shares of rare words.
At the peak of the record's threads in its precision (one core's ``vdpbf16ps`` or ``vfmadd``
rate, ``benchmarks/simd_peak.py``, measured here first: run it on the record's machine, alone)
that is the floor of one validation; times the record's validations, against its whole run:
the least share of the run validation can take, every product at 100% of the peak and nothing
else costing anything. Beside it, the record's own validation seconds and the fraction of the
peak they ran at. The dev treebank needs ``NLTK_DATA`` (without it only the perplexity counts,
and the record says so). Record: ``benchmarks/results/validation_floor-DATE.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
from common import repo_path, result_path, step_trainer, write_result  # noqa: E402
from step_profile import onlstm_macs, peaks  # noqa: E402


def validation_macs(cfg: dict[str, Any], tr: Any) -> dict[str, Any]:
    """A validation's multiply-adds, part by part (module docstring)."""
    from treelm.errors import TreelmError
    from treelm.nn.output import OutputLayer
    from treelm.syntax.report import load_golds

    model = cfg["model"]
    if model.get("type") != "lm" or model.get("cell") != "onlstm":
        raise SystemExit("validation_floor: counts ON-LSTM language models only")
    stack = onlstm_macs(model["sizes"], model.get("cell_options", {}).get("chunk_size", 10))
    # the first layer's input part a token (G·I, its W_ih): from a table where the cell makes
    # one (RNNLM.fixed), once for the vocabulary
    cell = tr.model.rnn.layers[0]
    first = cell.weight_ih.numel()
    table = cell.input_part(tr.model.embedding.weight[:1]) is not None
    layer = next(m for m in tr.model.modules() if isinstance(m, OutputLayer))
    valid = tr.task.corpus.valid
    tails = getattr(layer, "tail_fractions", None)
    tokens = int(valid.numel())
    # rows: the tokens that share the work made once per call; an adaptive tail's word matrix
    # is made once for the whole evaluation (AdaptiveSoftmax._word_matrix)
    out = sum(layer.loss_macs(tokens, tails(valid) if tails else ()).values())   # a token's
    parse = cfg["train"].get("eval_parse") or {}
    words, why, positions = 0, None, {}
    if parse.get("treebank"):
        try:
            # the run's own tree scorer holds them; without it, loading says why not
            golds = tr.trees.golds if tr.trees is not None else load_golds(parse["treebank"])
            words = sum(len(g.words) for g in golds)
            positions = dev_positions(tr) if tr.trees is not None else {}
        except TreelmError as e:    # a missing sample: the perplexity alone, said so
            why = f"{parse['treebank']}: {e}"
    return {"valid_tokens": tokens, "dev_tree_words": words, "dev_trees_missing": why,
            **positions,
            "stack_mmac_per_token": round(stack / 1e6, 4),
            "output_mmac_per_token": round(out / 1e6, 4),
            "first_layer_table": table,
            "gmac": round((tokens * (stack + out) + words * stack
                           - (table * (tokens + words - tr.model.vocab_size) * first)) / 1e9, 2)}


def dev_positions(tr: Any) -> dict[str, int]:
    """Positions the stack runs to read the dev trees' levels, counted at the first layer as
    the run's tree scorer reads them (:func:`treelm.syntax.levels.sentence_levels`: its batches
    shrink as their sentences end), beside the padded grid's: each batch of the scorer's
    ``batch_size`` sentences, longest first, padded to its longest."""
    from treelm.syntax.levels import sentence_levels

    sentences, size = [g.words for g in tr.trees.golds], tr.trees.batch_size
    lengths = sorted((len(s) for s in sentences if s), reverse=True)
    padded = sum(len(c) * c[0] for c in (lengths[i:i + size]
                                         for i in range(0, len(lengths), size)))
    runs: list[int] = []
    hook = tr.model.layer_cells()[0].register_forward_hook(
        lambda m, args, out: runs.append(args[0].shape[0] * args[0].shape[1]))
    try:
        sentence_levels(tr.model, tr.task.vocab, sentences, size)
    finally:
        hook.remove()
    return {"dev_tree_positions_read": sum(runs) - 1,      # less the opening <eos>, run once
            "dev_tree_positions_padded": padded}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--record", type=Path, required=True, help="a train_time record")
    ap.add_argument("--config", default="configs/ptb-onlstm-trees.yaml")
    ap.add_argument("--out", type=Path, help="the record (default validation_floor-DATE.json)")
    ap.add_argument("--peak-seconds", type=float, default=0.2,
                    help="each timed run of simd_peak's loops (default 0.2)")
    ap.add_argument("overrides", nargs="*", metavar="key=value")
    args = ap.parse_args(argv)
    if not args.record.is_file():
        ap.error(f"record {args.record} not found")
    run = json.loads(args.record.read_text(encoding="utf-8"))
    if "seconds_by_phase" not in run or not run.get("validations"):
        ap.error(f"{args.record}: not a train_time record with validations")
    with tempfile.TemporaryDirectory() as tmp:
        tr = step_trainer(args.config, list(args.overrides), tmp)
        counts = validation_macs(tr.cfg, tr)
    peak = peaks(args.peak_seconds)
    threads = run["machine"]["torch_threads"]
    key = "bf16" if run["precision"] == "bf16" else "fp32"
    per_core = peak[f"{key}_peak_gmacs_per_s_per_core"]
    floor = counts["gmac"] / (threads * per_core)
    n, seconds = run["validations"], run["seconds"]
    measured = run["seconds_by_phase"]["validation"]
    record = {
        "train_time_record": repo_path(args.record), "run_machine": run["machine"],
        "precision": run["precision"], "threads": threads, **counts,
        "peak_gmacs_per_s": round(threads * per_core, 1), "peak": peak,
        "validations": n, "run_seconds": seconds,
        "floor_seconds_per_validation": round(floor, 3),
        "floor_share_of_run": round(n * floor / seconds, 4),
        "measured_seconds_per_validation": round(measured / n, 3),
        "measured_share_of_run": round(measured / seconds, 4),
        "measured_fraction_of_peak": round(floor * n / measured, 3),
        "torch_threads_here": torch.get_num_threads(),
    }
    return write_result("validation_floor", record,
                        path=args.out or result_path("validation_floor"))


if __name__ == "__main__":
    main()
