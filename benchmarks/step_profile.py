"""Where a training step's time goes: each phase of ``Trainer.step`` and the operators inside it,
per token, for two or more configs side by side (issue 37 item 4: batch 20 × BPTT 70 against
batch 64 × BPTT 35).

    python benchmarks/step_profile.py [--configs configs/ptb-onlstm-trees.yaml
        configs/ptb-onlstm-cpu.yaml] [--steps 40] [--warmup 300] [--top 12] [--out PATH]

A step is ``Trainer.step`` taken apart, the same calls in the same order:

    zero_grad → forward + loss (the task's ``loss`` under the precision's autocast)
              → backward → clip_grad_norm_ → optimizer.step + averager.update

each phase timed with ``perf_counter`` (the CPU runs them synchronously), summed over ``--steps``
batches after ``--warmup``; per token = phase time / tokens. Then ``torch.profiler`` over as
many more steps gives each operator's self time per token: the small-batch cost shows as the
operators whose time does not shrink with the batch (per-step launches, the recurrent steps'
small products, the optimiser's per-parameter loops). Tokens/s here are of the step alone (no
validation, no checkpoint): a whole training's rate is ``benchmarks/precision.py``'s.

Beside the rate, the step's multiply-adds per token (:func:`step_macs`: the recurrent stack's
products from its sizes, the output layer's from its own count on the training stream's share
of rare words; forward + backward = 3 × forward) give its GMAC/s and its **fraction of the
FMA peak**: of ``threads`` cores at ``simd_peak``'s float32 rate for the vector width PyTorch
runs here (``benchmarks/simd_peak.py``, measured at the start of this script; 256-bit on the
AVX2 path, the proxy's too), and in bf16 of its ``vdpbf16ps`` rate as well. An AMX CPU's bf16
products run on its tiles (oneDNN's, and treelm's panels where ``panel_amx()``), faster than
``vdpbf16ps``: there the bf16 fraction can pass 1 and is no ceiling, and the record adds the
fraction of ``simd_peak``'s ``tdpbf16ps`` rate (``fraction_of_amx_peak``), the tiles' ceiling.

The step runs as ``treelm train`` runs it, its OpenMP threads waiting as the command line has
them wait (:mod:`treelm.omp`: ``GOMP_SPINCOUNT`` set before torch loads, unless the environment
sets it or ``OMP_WAIT_POLICY``), so that a training's own rate compares with this one (issue
56: within 5%); ``GOMP_SPINCOUNT=300000`` before the command times it under libgomp's default
instead. The record's ``machine.env`` says which. Run it alone on the machine; the record
(``benchmarks/results/step_profile-DATE.json``) holds the machine and the command.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from treelm import omp  # noqa: E402

omp.configure()     # OpenMP's threads wait as under `treelm train`: set before torch loads libgomp
import torch  # noqa: E402
from common import endless, result_path, step_trainer, write_result  # noqa: E402
from torch import nn  # noqa: E402

from treelm.train.optim import set_lr  # noqa: E402
from treelm.train.trainer import Trainer  # noqa: E402

CONFIGS = ["configs/ptb-onlstm-trees.yaml", "configs/ptb-onlstm-cpu.yaml"]
PEAK_SECONDS, PEAK_REPEATS = 0.2, 5     # simd_peak's loops here: a few seconds in all
PHASES = ("zero_grad", "forward+loss", "backward", "clip", "optimizer")


def timed_step(tr: Trainer, batch: Any, lr: float, acc: dict[str, float]) -> None:
    """``Trainer.step`` phase by phase, adding each phase's seconds to ``acc``."""
    t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        acc[name] += now - t
        t = now

    set_lr(tr.optimizer, lr)
    tr.optimizer.zero_grad(set_to_none=True)
    lap("zero_grad")
    with tr.autocast():
        out = tr.task.loss(tr.net, batch)
    out.value.item()            # the logged value, read as the trainer reads it
    lap("forward+loss")
    out.loss.backward()
    lap("backward")
    if tr.tc.clip:
        nn.utils.clip_grad_norm_(tr.model.parameters(), tr.tc.clip)
    lap("clip")
    tr.optimizer.step()
    tr.averager.update()
    lap("optimizer")


def profile(config: str, steps: int, warmup: int, top: int, overrides: list[str],
            peak: dict[str, Any] | None = None) -> dict[str, Any]:
    """One config: its step's phases and top operators, per token; with ``peak``
    (:func:`peaks`), its GMAC/s and fractions of the peaks too (:func:`fractions`)."""
    with tempfile.TemporaryDirectory() as tmp:
        tr = step_trainer(config, overrides, tmp)
        cfg = tr.cfg
        tr.net.train()

        it = endless(tr)
        for _ in range(warmup):
            tr.step(next(it), tr.tc.lr)
        acc: dict[str, float] = defaultdict(float)
        tokens = 0
        for _ in range(steps):
            batch = next(it)
            timed_step(tr, batch, tr.tc.lr, acc)
            tokens += batch.size
        total = sum(acc.values())
        prof, ptoks = profiled(tr, it, steps)
        ops = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
        prof_total = sum(e.self_cpu_time_total for e in ops)
        result = {
            "config": config, "overrides": overrides,
            "batch_size": cfg["train"].get("batch_size"), "bptt": cfg["train"].get("bptt"),
            "optimizer": tr.tc.optimizer, "precision": tr.choice.precision,
            "steps": steps, "warmup": warmup, "tokens": tokens, "tokens_per_step": tokens / steps,
            "tokens_per_s": round(tokens / total, 1), "ms_per_step": round(1e3 * total / steps, 2),
            "phases": {p: {"ms_per_step": round(1e3 * acc[p] / steps, 3),
                           "us_per_token": round(1e6 * acc[p] / tokens, 2),
                           "share": round(acc[p] / total, 4)} for p in PHASES},
            "top_ops": [{"op": e.key, "calls_per_step": round(e.count / steps, 1),
                         "us_per_token": round(e.self_cpu_time_total / ptoks, 2),
                         "share": round(e.self_cpu_time_total / prof_total, 4)}
                        for e in ops[:top]],
            "products_by_shape": _products(prof, steps, ptoks, prof_total, top),
        }
        if peak is not None:
            fractions(result, step_macs(cfg, tr), peak)
        return result


def profiled(tr: Trainer, it: Any, steps: int) -> tuple[Any, int]:
    """``steps`` training steps under ``torch.profiler``, operand shapes recorded: the profile
    and the tokens the steps covered."""
    tokens = 0
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True) as prof:
        for _ in range(steps):
            batch = next(it)
            tr.step(batch, tr.tc.lr)
            tokens += batch.size
    return prof, tokens


def onlstm_macs(sizes: list[int], chunk_size: int) -> float:
    """Multiply-adds per token of an ON-LSTM stack's forward: per layer G (I + H), G = 4H + 2L."""
    total = 0
    for n_in, h in zip(sizes[:-1], sizes[1:]):
        total += (4 * h + 2 * (h // chunk_size)) * (n_in + h)
    return float(total)


def step_macs(cfg: dict[str, Any], tr: Trainer) -> float | None:
    """Multiply-adds per token of a training step (forward + backward: 3 × the forward's
    products): the ON-LSTM or LSTM stack's and the output layer's
    (:meth:`~treelm.nn.output.OutputLayer.loss_macs`, its tails at the training stream's
    shares); None for other models (nothing counted is better than a wrong count)."""
    from treelm.nn.output import OutputLayer

    model = cfg["model"]
    sizes, cell = model.get("sizes"), model.get("cell")
    if model.get("type") != "lm" or cell not in ("onlstm", "lstm") or not sizes:
        return None
    if cell == "onlstm":
        stack = onlstm_macs(sizes, model.get("cell_options", {}).get("chunk_size", 10))
    else:
        stack = float(sum(4 * h * (n_in + h) for n_in, h in zip(sizes[:-1], sizes[1:])))
    layer = next((m for m in tr.model.modules() if isinstance(m, OutputLayer)), None)
    if layer is None:
        return None
    stream = tr.task.corpus.train  # type: ignore[attr-defined]
    tails = getattr(layer, "tail_fractions", None)
    rows = cfg["train"].get("batch_size", 20) * cfg["train"].get("bptt", 70)
    out = sum(layer.loss_macs(rows, tails(stream) if tails else ()).values())
    return 3.0 * (stack + out)


def peaks(seconds: float = PEAK_SECONDS) -> dict[str, Any]:
    """This CPU's one-core multiply-add rates (``simd_peak.record``) and the float32 one for
    the vector width PyTorch runs at here (``AVX512`` or not)."""
    from simd_peak import record

    m = record(seconds, PEAK_REPEATS)
    width = "512" if torch.backends.cpu.get_cpu_capability() == "AVX512" else "256"
    rows = m["one_core"]
    fp32 = rows.get(f"fp32 fma {width}-bit", {}).get("gmacs_per_s")
    bf16 = max((r["gmacs_per_s"] for k, r in rows.items() if k.startswith("bf16 dot")),
               default=None)
    return {"simd_peak_one_core": rows, "fp32_vector_bits": int(width),
            "fp32_peak_gmacs_per_s_per_core": fp32, "bf16_peak_gmacs_per_s_per_core": bf16,
            "amx_bf16_peak_gmacs_per_s_per_core": m.get("amx_bf16_peak_gmacs_per_s")}


def fractions(result: dict[str, Any], macs: float | None, peak: dict[str, Any]) -> None:
    """The step's GMAC/s and its fractions of the peaks (module docstring), into ``result``."""
    if macs is None:
        return
    cores = torch.get_num_threads()
    rate = result["tokens_per_s"] * macs / 1e9
    result["train_mmac_per_token"] = round(macs / 1e6, 3)
    # significant digits, not decimals: a tiny config's step on one thread is a small fraction,
    # which four decimals would round by more than a percent
    result["gmacs_per_s"] = _digits(rate, 6)
    if peak["fp32_peak_gmacs_per_s_per_core"]:
        result["fraction_of_fp32_peak"] = _digits(
            rate / (cores * peak["fp32_peak_gmacs_per_s_per_core"]), 4)
    if result["precision"] == "bf16" and peak["bf16_peak_gmacs_per_s_per_core"]:
        result["fraction_of_bf16_peak"] = _digits(
            rate / (cores * peak["bf16_peak_gmacs_per_s_per_core"]), 4)
    if result["precision"] == "bf16" and peak.get("amx_bf16_peak_gmacs_per_s_per_core"):
        result["fraction_of_amx_peak"] = _digits(
            rate / (cores * peak["amx_bf16_peak_gmacs_per_s_per_core"]), 4)


def _digits(x: float, n: int) -> float:
    """``x`` to ``n`` significant digits."""
    return float(f"{x:.{n}g}")


#: the operators that are matrix products (PyTorch's, MKL's and oneDNN's linear layers)
PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm", "mkl::_mkl_linear",
            "mkldnn::_linear_pointwise", "aten::linear")


def _products(prof: Any, steps: int, tokens: int, total: float, top: int
              ) -> list[dict[str, Any]]:
    """The products' self time by operand shapes: a product over every position of the batch at
    once (T·B rows: the hoisted input projections, the output layer) tells itself from one made
    at each recurrent step (B rows) by its shapes."""
    rows = [e for e in prof.key_averages(group_by_input_shape=True) if e.key in PRODUCTS]
    rows.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    return [{"op": e.key, "shapes": [list(s) for s in e.input_shapes if s],
             "calls_per_step": round(e.count / steps, 1),
             "us_per_token": round(e.self_cpu_time_total / tokens, 2),
             "share": round(e.self_cpu_time_total / total, 4)} for e in rows[:top]]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", nargs="+", default=CONFIGS)
    ap.add_argument("--steps", type=int, default=40, help="timed steps per config (default 40)")
    # 300: with variable BPTT each new batch length is a new shape for the products (oneDNN's
    # primitives, the GEMM choice's measurements): after 10 steps the tree config's bf16 step
    # read 6,884 tokens/s, after 300 7,783, with fixed lengths 7,814 (Intel Xeon 6/167)
    ap.add_argument("--warmup", type=int, default=300, help="untimed steps first (default 300)")
    ap.add_argument("--top", type=int, default=12, help="operators listed (default 12)")
    ap.add_argument("--out", type=Path, help="the record (default step_profile-DATE.json)")
    ap.add_argument("--peak-seconds", type=float, default=PEAK_SECONDS,
                    help=f"each timed run of simd_peak's loops (default {PEAK_SECONDS})")
    ap.add_argument("overrides", nargs="*", metavar="key=value",
                    help="config overrides for every config (e.g. train.threads=2)")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.top < 1:
        ap.error("--steps and --top must be >= 1, --warmup >= 0")
    for c in args.configs:
        if not Path(c).is_file():
            ap.error(f"config {c} not found")
    torch.set_flush_denormal(True)
    peak = peaks(args.peak_seconds)     # before the configs: the loops alone on the machine
    results = [profile(c, args.steps, args.warmup, args.top, list(args.overrides), peak)
               for c in args.configs]
    base = results[-1]["tokens_per_s"]
    for r in results:
        r["tokens_per_s_over_last"] = round(r["tokens_per_s"] / base, 3)
    record = {"torch_threads": torch.get_num_threads(), "peak": peak, "results": results}
    return write_result("step_profile", record, path=args.out or result_path("step_profile"))


if __name__ == "__main__":
    main()
