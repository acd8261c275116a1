"""The output layer's cost per token, full softmax against adaptive softmax (issue 49 item 1): FLOPs
counted from the shapes, tokens/s of the layer alone, and tokens/s of the whole training step.

    python benchmarks/output_layer.py [--full configs/ptb-onlstm-trees-softmax.yaml]
        [--adaptive configs/ptb-onlstm-trees.yaml] [--repeats 30] [--steps 40]
        [--warmup 10] [--no-timing | --quick] [--out PATH] [key=value ...]

* **FLOPs** (``flops``): products only, 2 per multiply-add, forward and forward + backward (3 ×
  forward: each product's two operand gradients), per token of a training batch of
  ``batch_size × bptt`` rows, at the adaptive config's cutoffs and at each ``--cutoffs`` variant;
  the fraction of targets in each tail cluster is counted on the task's training stream, and
  each layer counts its own (:meth:`treelm.nn.output.OutputLayer.loss_macs`, held to
  ``torch.utils.flop_counter`` by ``tests/test_output_layer.py``). The ON-LSTM stack's FLOPs
  beside them (G = 4H + 2L gate rows per layer) give the whole step's.
* **The layer alone** (``layer``): forward + backward of the loss on random hidden states of the
  full config's batch (``batch_size × bptt`` rows, width of its last layer), the targets a window
  of the training stream (its real share of rare words), in the precision the run would take
  (``train.precision``, ``auto`` measured) on ``train.threads`` threads; the median of
  ``--repeats`` timed calls after a few untimed ones. Full: the tied
  :func:`~treelm.nn.linear_ce.linear_cross_entropy`; adaptive: ``AdaptiveSoftmax.loss``.
* **The training step** (``steps``): ``benchmarks/step_profile.py``'s :func:`profile` for each
  config (phases timed, then the operators under ``torch.profiler``).

``--no-timing`` writes the FLOPs alone (seconds, any load). ``--quick`` runs every part with two
repeats and one step, to check the script works: its figures are marked ``quick`` and are not for
the record. Run the timed parts alone on the machine (``DEVELOPERS.md``); the record
(``benchmarks/results/output_layer-DATE.json``) holds the machine and the command.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
from common import result_path, time_runs, write_result  # noqa: E402
from step_profile import onlstm_macs, profile  # noqa: E402

from treelm.config import apply_overrides, load_config  # noqa: E402
from treelm.kernels import precision  # noqa: E402
from treelm.models.lm import OutputOptions  # noqa: E402
from treelm.nn.adaptive_softmax import AdaptiveSoftmax  # noqa: E402
from treelm.nn.linear_ce import linear_cross_entropy  # noqa: E402
from treelm.nn.output import FullSoftmax  # noqa: E402
from treelm.train.builders import build_task, pick_device, read_config  # noqa: E402

FULL = "configs/ptb-onlstm-trees-softmax.yaml"
ADAPTIVE = "configs/ptb-onlstm-trees.yaml"


# ---------------------------------------------------------------------------- FLOPs, analytic

def flops(cfg: dict[str, Any], spec: OutputOptions, vocab: int, stream: torch.Tensor,
          variants: list[list[int]]) -> dict[str, Any]:
    """The FLOPs section of the record (see the module docstring): each layer's own count
    (:meth:`treelm.nn.output.OutputLayer.loss_macs`)."""
    model, train = cfg["model"], cfg["train"]
    dim = model["sizes"][-1]
    rows = train.get("batch_size", 20) * train.get("bptt", 70)
    stack = None
    if model.get("cell") == "onlstm":
        stack = onlstm_macs(model["sizes"], model.get("cell_options", {}).get("chunk_size", 10))
    with torch.random.fork_rng(devices=[]):     # the layers' initial draws leave no trace
        full = sum(FullSoftmax(vocab, dim).loss_macs(rows).values())
        layers = [AdaptiveSoftmax(vocab, dim, cutoffs, spec.div_value) for cutoffs
                  in [spec.cutoffs, *[v for v in variants if v != spec.cutoffs]]]
    out: dict[str, Any] = {
        "rows_per_batch": rows, "dim": dim, "vocab": vocab, "div_value": spec.div_value,
        "full": {"forward_mflop": _m(2 * full), "train_mflop": _m(6 * full)},
        "stack_train_mflop": None if stack is None else _m(6 * stack), "adaptive": []}
    for layer in layers:
        fractions = layer.tail_fractions(stream)
        parts = layer.loss_macs(rows, fractions)
        macs = sum(parts.values())
        row: dict[str, Any] = {
            "cutoffs": layer.cutoffs, "tail_sizes": layer.sizes,
            "tail_fractions": [round(f, 4) for f in fractions],
            "head_fraction": round(1 - sum(fractions), 4),
            "forward_mflop": _m(2 * macs), "train_mflop": _m(6 * macs),
            "train_mflop_by_part": {k: _m(6 * v) for k, v in parts.items()},
            "log_probs_forward_mflop": _m(2 * layer.log_probs_macs(rows)),
            "output_layer_ratio": round(full / macs, 3)}
        if stack is not None:
            row["step_train_mflop"] = _m(6 * (stack + macs))
            row["step_ratio"] = round((stack + full) / (stack + macs), 3)
        out["adaptive"].append(row)
    if stack is not None:
        out["full"]["step_train_mflop"] = _m(6 * (stack + full))
    return out


def _m(flop: float) -> float:
    """FLOPs as MFLOP, rounded for the record."""
    return round(flop / 1e6, 4)


# -------------------------------------------------------------------------- the layer, timed

def layer(cfg: dict[str, Any], spec: OutputOptions, vocab: int, stream: torch.Tensor,
          repeats: int, warmup: int) -> dict[str, Any]:
    """Forward + backward of each output layer's loss on one batch's rows (module docstring)."""
    tc, config = read_config(cfg)
    if tc.threads:
        torch.set_num_threads(tc.threads)
    device = pick_device(tc.device)
    choice = precision.resolve(tc.precision, device)
    model, train = cfg["model"], cfg["train"]
    dim = model["sizes"][-1]
    rows = train.get("batch_size", 20) * train.get("bptt", 70)
    g = torch.Generator().manual_seed(config.seed)
    start = int(torch.randint(0, stream.numel() - rows, (1,), generator=g))
    target = stream[start:start + rows].to(device)
    h = torch.randn(rows, dim, generator=g).to(device).requires_grad_()
    emb = torch.nn.Parameter((torch.rand(vocab, dim, generator=g) * 0.2 - 0.1).to(device))
    bias = torch.nn.Parameter(torch.zeros(vocab, device=device))
    adaptive = AdaptiveSoftmax(vocab, dim, spec.cutoffs, spec.div_value, emb).to(device)

    leaves = [h, emb, bias, *adaptive.parameters()]

    def run(loss_fn: Any) -> Any:
        def step() -> None:
            for t in leaves:
                t.grad = None       # as the trainer's zero_grad(set_to_none=True)
            with precision.autocast(choice.precision, device):
                loss = loss_fn()
            loss.backward()
        return step

    results: dict[str, Any] = {"rows": rows, "device": str(device),
                               "precision": choice.precision,
                               "threads": torch.get_num_threads()}
    for name, fn in (("full", lambda: linear_cross_entropy(h, emb, bias, target)),
                     ("adaptive", lambda: adaptive.loss(h, target))):
        times = time_runs(run(fn), warmup, repeats, device)
        med = statistics.median(times)
        results[name] = {"ms_median": round(1e3 * med, 3), "ms_min": round(1e3 * min(times), 3),
                         "tokens_per_s": round(rows / med, 1), "repeats": repeats}
    results["speedup"] = round(results["full"]["ms_median"] / results["adaptive"]["ms_median"], 3)
    return results


# ------------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", default=FULL, help=f"the full-softmax config (default {FULL})")
    ap.add_argument("--adaptive", default=ADAPTIVE,
                    help=f"the adaptive config (default {ADAPTIVE})")
    ap.add_argument("--cutoffs", nargs="*", default=["1000,4000"],
                    help="more cutoffs to count FLOPs for, each comma-separated "
                         "(default 1000,4000)")
    ap.add_argument("--repeats", type=int, default=30, help="timed calls of the layer (30)")
    ap.add_argument("--steps", type=int, default=40, help="timed steps per config (40)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps first (10)")
    ap.add_argument("--top", type=int, default=12, help="operators listed per config (12)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--no-timing", action="store_true", help="the FLOPs alone")
    mode.add_argument("--quick", action="store_true",
                      help="every part once or twice: checks the script, not for the record")
    ap.add_argument("--out", type=Path, help="the record (default output_layer-DATE.json)")
    ap.add_argument("overrides", nargs="*", metavar="key=value",
                    help="config overrides for both configs (e.g. train.threads=2)")
    args = ap.parse_args(argv)
    for c in (args.full, args.adaptive):
        if not Path(c).is_file():
            ap.error(f"config {c} not found")
    if min(args.repeats, args.steps, args.top) < 1 or args.warmup < 0:
        ap.error("--repeats, --steps and --top must be >= 1, --warmup >= 0")
    try:
        variants = [[int(x) for x in v.split(",")] for v in args.cutoffs]
    except ValueError:
        ap.error("--cutoffs: comma-separated integers, e.g. 1000,4000")
    if args.quick and args.out is None:
        ap.error("--quick needs --out: its figures are not for benchmarks/results")
    if args.quick:
        args.repeats, args.steps, args.warmup = 2, 1, 1
    overrides = list(args.overrides)
    full_cfg = apply_overrides(load_config(args.full), overrides)
    cfg = apply_overrides(load_config(args.adaptive), overrides)
    spec = OutputOptions.parse(cfg["model"].get("output"))
    if spec.kind != "adaptive":
        ap.error(f"{args.adaptive}: model.output.kind is not adaptive")
    _, config = read_config(cfg)
    task = build_task(config, torch.device("cpu"))
    stream, vocab = task.corpus.train, task.model_dims()["vocab_size"]
    torch.set_flush_denormal(True)
    record: dict[str, Any] = {"full_config": args.full, "adaptive_config": args.adaptive,
                              "overrides": overrides, "quick": args.quick,
                              "flops": flops(full_cfg, spec, vocab, stream, variants)}
    if not args.no_timing:
        record["layer"] = layer(full_cfg, spec, vocab, stream, args.repeats, 2 if args.quick else 5)
        steps = [profile(c, args.steps, args.warmup, args.top, overrides)
                 for c in (args.full, args.adaptive)]
        steps[1]["tokens_per_s_over_full"] = round(
            steps[1]["tokens_per_s"] / steps[0]["tokens_per_s"], 3)
        record["steps"] = steps
    record["torch_threads"] = torch.get_num_threads()
    return write_result("output_layer", record, path=args.out or result_path("output_layer"))


if __name__ == "__main__":
    main()
