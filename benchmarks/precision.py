"""Whole-training tokens/s in float32 and in bf16 mixed precision, and what ``auto`` picks.

    python benchmarks/precision.py [--configs configs/ptb-onlstm-cpu.yaml configs/ptb-lstm-cpu.yaml]
        [--seconds 90 [--rounds 4]] [--quality-units 3000000 [--quality-jobs 2]] [--out PATH]
    python benchmarks/precision.py --device cuda --configs configs/ptb-onlstm-paper.yaml
        --warmup 150

Speed: for each config, one trainer per precision runs the real training step (``Trainer.step``:
the task's batches, forward and loss under the precision's autocast, backward, clipping, the
optimiser), ``--warmup`` batches, then as many as fit in ``--seconds``, the precisions taking
turns in ``--rounds`` slices (so that a machine whose speed drifts slows both alike); tokens/s =
units / time, with each round's rate beside it. Nothing else runs in the process meanwhile (no
validation). Run it alone on the machine.

Quality (``--quality-units N``): ``treelm train`` of each config in each precision from the same
seed, at a constant learning rate, for the same N training units (``train.max_units``), then the
validation perplexity of each (other tasks: their best validation F1, accuracy or BLEU); bf16
should be within 1.5% of fp32. ``--quality-jobs 2`` trains two at a time, one thread each (units,
not seconds, bound them; the speed figures come from the timed part alone). ``--seconds 0``
measures no speed and keeps the speed figures the day's record has.
Where ``auto`` finds no native bfloat16 (the measurement in the record), the bf16 runs would take
hours of emulated products: they are skipped with the estimate unless ``--force``.

``--device cuda`` trains on the GPU (``train.device=cuda``), with the fused ON-LSTM's CUDA graphs
on in both precisions (each cell's captures, replays and eager calls are in the record), times
the products there, and writes ``benchmarks/results/precision-gpu-DATE.json``.

The record (``benchmarks/results/precision-DATE.json``) holds the machine (CPU model and vector
extensions: ``avx512_bf16`` / ``amx_bf16`` are what native bfloat16 means on x86), ``auto``'s
measurement and choice, the speed-up of bfloat16 on the step's products alone (``products``: the
ceiling for whole training, whose elementwise work stays float32), and per config the tokens/s
of each precision and the ratio.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
from common import endless, result_path, sync, time_runs, write_result  # noqa: E402

from treelm.config import apply_overrides, load_config  # noqa: E402
from treelm.kernels import precision  # noqa: E402
from treelm.rundir.files import RunFiles, read_metrics  # noqa: E402
from treelm.train import step_probe  # noqa: E402
from treelm.train.trainer import Trainer  # noqa: E402

CONFIGS = ["configs/ptb-onlstm-cpu.yaml", "configs/ptb-lstm-cpu.yaml"]


def graph_stats(net: torch.nn.Module) -> dict[str, int] | None:
    """The CUDA-graph counts of every fused ON-LSTM cell of ``net`` summed (``None``: none used)."""
    caches = [m._graphs for m in net.modules() if getattr(m, "_graphs", None) is not None]
    if not caches:
        return None
    return {k: sum(c.stats[k] for c in caches) for k in caches[0].stats}


def speeds(config: str, precs: list[str], seconds: float, rounds: int, warmup: int,
           max_batches: int, overrides: list[str], device: str = "cpu"
           ) -> tuple[dict[str, dict], precision.Choice]:
    """Training steps of ``config`` in each of ``precs`` for about ``seconds`` each: units/s.

    One trainer per precision, built side by side in this process; the timed part takes turns,
    ``rounds`` slices of ``seconds / rounds`` per precision, the order reversed every other round
    (fp32 bf16 bf16 fp32 ...). On a shared machine whose speed drifts by several percent from
    one minute to the next, taking turns lets the drift fall on both precisions alike rather than
    on whichever ran second. Also returned: what ``train.precision: auto`` takes for this
    config, the machine's measurement confirmed by the config's own step
    (:mod:`treelm.train.step_probe`)."""
    tmp = tempfile.TemporaryDirectory()
    try:
        trainers, batches = {}, {}
        for prec in precs:
            cfg = apply_overrides(load_config(config), [f"train.precision={prec}",
                                                        "train.lr_schedule=constant", *overrides])
            tr = Trainer(cfg, RunFiles(Path(tmp.name) / prec), quiet=True)
            tr.net.train()
            trainers[prec], batches[prec] = tr, endless(tr)
            for _ in range(warmup):
                tr.step(next(batches[prec]), tr.tc.lr)
        warm = {p: graph_stats(trainers[p].net) for p in precs}
        # what `auto` would take for this config: the machine's choice, confirmed by the step
        tr0 = trainers[precs[0]]
        auto = step_probe.confirm(precision.measure(device), tr0.model, tr0.task, tr0.device)
        done = {p: {"units": 0, "batches": 0, "seconds": 0.0, "rounds": []} for p in precs}
        for r in range(rounds):
            for prec in (precs if r % 2 == 0 else precs[::-1]):
                tr, d = trainers[prec], done[prec]
                sync(device)
                units, n, t0 = 0, 0, time.perf_counter()
                while (d["batches"] + n < max_batches
                       and time.perf_counter() - t0 < seconds / rounds):
                    batch = next(batches[prec])
                    tr.step(batch, tr.tc.lr)
                    units += batch.size
                    n += 1
                sync(device)
                dt = time.perf_counter() - t0
                d["units"] += units
                d["batches"] += n
                d["seconds"] += dt
                d["rounds"].append(round(units / dt, 1) if n else None)
        graphs = {p: graph_stats(trainers[p].net) for p in precs}
    finally:
        tmp.cleanup()
    out = {p: {"tokens_per_s": round(d["units"] / d["seconds"], 1), "batches": d["batches"],
               "tokens": d["units"], "seconds": round(d["seconds"], 2),
               "per_round": d["rounds"]} for p, d in done.items()}
    for p in precs:
        if graphs[p] is not None:   # CUDA graphs in the timed part: counts after the warm-up
            out[p]["cuda_graphs"] = {k: v - (warm[p] or {}).get(k, 0)
                                     for k, v in graphs[p].items()}
            out[p]["cuda_graphs_warmup"] = warm[p]
    return out, auto


#: The products of a PTB CPU config's training step (rows M = 64 × 35 tokens): the output
#: layer's forward, input gradient and weight gradient, a layer's input projection and one step;
#: and the machine's peak.
PRODUCTS = {"output layer": (2240, 400, 10000), "output input-gradient": (2240, 10000, 400),
            "output weight-gradient": (10000, 2240, 400), "layer input projection":
            (2240, 400, 1680), "one recurrent step": (64, 400, 1680),
            # not the step's: a large square product, bound by the multiply units alone, is
            # how much faster this CPU multiplies in bfloat16 at best
            "peak (square)": (2048, 2048, 2048)}


#: On a GPU: the paper config's output layer (rows 20 × 70) and a layer's step, and a large square.
PRODUCTS_CUDA = {"output layer": (1400, 400, 10000), "layer input projection":
                 (1400, 1150, 4830), "one recurrent step": (20, 1150, 4830),
                 "peak (square)": (8192, 8192, 8192)}


def products(repeats: int = 10, device: str = "cpu") -> dict[str, dict]:
    """Each of :data:`PRODUCTS` (:data:`PRODUCTS_CUDA` on a GPU) in float32 and bfloat16
    (``torch.mm`` on this process's threads, the fastest of ``repeats``): how much faster bfloat16
    makes the products themselves, the ceiling of what it can do for a whole training step.
    (On CUDA float32 products are full float32, not TF32: ``torch.backends.cuda.matmul`` as the
    trainer leaves it.)"""
    out = {}
    for name, (m, k, n) in (PRODUCTS_CUDA if device == "cuda" else PRODUCTS).items():
        ms = {}
        for dtype in (torch.float32, torch.bfloat16):
            a = torch.randn(m, k, dtype=dtype, device=device)
            b = torch.randn(k, n, dtype=dtype, device=device)
            best = min(time_runs(lambda a=a, b=b: torch.mm(a, b), 1, repeats, device))
            ms[str(dtype).removeprefix("torch.")] = round(1e3 * best, 3)
        out[name] = {"shape": [m, k, n], "ms": ms,
                     "bf16_over_fp32": round(ms["float32"] / ms["bfloat16"], 2)}
    return out


def quality_command(config: str, prec: str, units: int, runs: Path, overrides: list[str]
                    ) -> tuple[Path, list[str]]:
    """The run directory and the ``treelm train`` command of one quality run."""
    out = runs / f"{Path(config).stem}-{prec}"
    return out, [sys.executable, "-m", "treelm.cli", "train", "--config", config, "--out",
                 str(out), "--force", f"train.precision={prec}", f"train.max_units={units}",
                 "train.lr_schedule=constant", "train.max_minutes=null",
                 "train.eval_every_minutes=null", "train.epochs=1000", *overrides]


def run_quality(jobs: list[tuple[str, str]], units: int, runs: Path, overrides: list[str],
                parallel: int) -> dict[tuple[str, str], dict]:
    """Train every (config, precision) of ``jobs``, ``parallel`` at a time with the threads
    shared among them (the runs count units, not seconds, so sharing the machine changes their
    wall time only), and read each one's validation figure."""
    threads = max(1, torch.get_num_threads() // parallel)
    extra = [f"train.threads={threads}"] if parallel > 1 else []
    outs = {job: quality_command(*job, units, runs, [*overrides, *extra]) for job in jobs}
    pending, running = list(jobs), []
    while pending or running:
        while pending and len(running) < parallel:
            out, cmd = outs[pending.pop(0)]
            print("+", " ".join(["treelm", *cmd[3:]]), file=sys.stderr, flush=True)
            running.append((subprocess.Popen(cmd), out))
        time.sleep(2)
        for proc, out in [r for r in running if r[0].poll() is not None]:
            running.remove((proc, out))
            if proc.returncode != 0:
                raise SystemExit(f"precision: quality run {out} failed (exit {proc.returncode})")
    return {job: quality(out) for job, (out, _) in outs.items()}


#: The figure each task is compared by, in order of preference, and whether higher is better
#: (translation also logs a perplexity: its figure is BLEU; a word model's is perplexity).
FIGURES = (("bpc", False), ("bleu", True), ("f1", True), ("accuracy", True), ("ppl", False))


def quality(out: Path) -> dict:
    """Validation figure, units and minutes of the finished run ``out``: a language model's
    perplexity (or bits per character) at the end, another task's best F1 / accuracy / BLEU over
    its validations (the checkpoint it keeps)."""
    valid = [m for m in read_metrics(out) if m["event"] == "valid"]
    done = next(m for m in reversed(read_metrics(out)) if m["event"] == "done")
    key, higher = next((k, h) for k, h in FIGURES if k in valid[-1])
    value = max(m[key] for m in valid) if higher else valid[-1][key]
    return {"units": done["tokens"], f"valid_{key}": value,
            "elapsed_min": round(done["elapsed"] / 60, 2), "run": str(out)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", nargs="+", default=CONFIGS)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="train there (cuda: record precision-gpu-DATE.json)")
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16"],
                    choices=["fp32", "bf16"])
    ap.add_argument("--seconds", type=float, default=90.0,
                    help="timed training per config and precision")
    ap.add_argument("--rounds", type=int, default=4,
                    help="turns the precisions take within those seconds (drift falls on both)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed batches first")
    ap.add_argument("--max-batches", type=int, default=10_000)
    ap.add_argument("--quality-units", type=int, default=0,
                    help="also train each precision for this many units and compare perplexity")
    ap.add_argument("--quality-jobs", type=int, default=1,
                    help="quality runs at a time, the threads shared among them")
    ap.add_argument("--runs", type=Path, default=Path("runs/precision"))
    ap.add_argument("--force", action="store_true",
                    help="run the bf16 quality runs even without native bfloat16")
    ap.add_argument("--out", type=Path, default=None, help="record (default: results/)")
    ap.add_argument("overrides", nargs="*", help="key=value overrides for every config")
    args = ap.parse_args()

    if args.device == "cuda":
        args.overrides = [*args.overrides, "train.device=cuda"]
    script = "precision-gpu" if args.device == "cuda" else "precision"
    auto = precision.measure(args.device)
    print(f"auto: {auto.precision} ({auto.reason})", file=sys.stderr, flush=True)
    path = args.out or result_path(script)
    day = json.loads(path.read_text()) if path.exists() else {}
    # a config's entry keeps what the day's record has and this run does not measure
    entries = {c: {"speed": {}, **day.get("configs", {}).get(c, {})} for c in args.configs}
    top = {"device": args.device, "auto": auto.as_dict(), "threads": torch.get_num_threads(),
           "seconds": args.seconds, "rounds": args.rounds}
    if args.seconds:
        top["products"] = products(device=args.device)
    for config in args.configs:
        entry = entries[config]
        if not args.seconds:
            continue
        measured, auto_takes = speeds(config, args.precisions, args.seconds, args.rounds,
                                      args.warmup, args.max_batches, args.overrides, args.device)
        entry["auto"] = auto_takes.as_dict()
        print(f"{config} auto: {entry['auto']['precision']} ({entry['auto']['reason']})",
              file=sys.stderr, flush=True)
        for prec, r in measured.items():
            entry["speed"][prec] = r
            print(f"{config} {prec}: {r['tokens_per_s']:,.0f} tokens/s ({r['batches']} batches; "
                  f"by round {r['per_round']})", file=sys.stderr, flush=True)
        sp = entry["speed"]
        if "fp32" in sp and "bf16" in sp:
            entry["bf16_over_fp32"] = round(sp["bf16"]["tokens_per_s"] /
                                            sp["fp32"]["tokens_per_s"], 3)
    if args.quality_units:
        jobs = []
        for config in args.configs:
            q = entries[config].setdefault("quality", {})  # precisions not run keep theirs
            for prec in args.precisions:
                if prec == "bf16" and auto.precision != "bf16" and not args.force:
                    rate = entries[config]["speed"].get("bf16", {}).get("tokens_per_s")
                    hours = args.quality_units / rate / 3600 if rate else None
                    q[prec] = {"skipped": "no native bfloat16 on this machine (auto: fp32)" +
                               (f"; {args.quality_units:,} units at {rate:,.0f} tokens/s would "
                                f"take {hours:.1f} h" if hours else "")}
                else:
                    jobs.append((config, prec))
        done = run_quality(jobs, args.quality_units, args.runs, args.overrides,
                           args.quality_jobs)
        for (config, prec), r in done.items():
            entries[config]["quality"][prec] = r
        for entry in entries.values():
            q = entry["quality"]
            key = next((k for k in q.get("fp32", {}) if k.startswith("valid_")), None)
            if key and key in q.get("bf16", {}):
                entry["quality_bf16_vs_fp32"] = round(q["bf16"][key] / q["fp32"][key] - 1, 4)
    if not args.seconds and path.exists():  # quality only: the day's speed measurement stands
        day = json.loads(path.read_text())      # (as it is now: quality runs take long)
        top.update({k: day[k] for k in ("auto", "threads", "seconds", "rounds", "products")
                    if k in day})
    write_result("precision", {**top, "configs": entries}, merge_key="configs", path=path)


if __name__ == "__main__":
    main()
