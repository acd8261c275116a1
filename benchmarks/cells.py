"""Throughput of the recurrent cells: training (forward + backward with all gradients) and inference
(forward under ``torch.no_grad``) tokens/s, one layer, time-major input.

    .venv/bin/python benchmarks/cells.py [--json] [--sizes paper cpu] [--repeats N]
        [--gemm auto|mkl|onednn|mm] [--device cpu|cuda] [--models NAME ...] [--out PATH]
        [--isa avx2] [--interleave]

Compares ``torch.nn.LSTM`` with treelm's cells: the reference ON-LSTM (``impl="reference"``), the
fused ON-LSTM (``onlstm.fused``: ``impl="auto"``, on the CPU the C++ loops of
:mod:`treelm.kernels.onlstm_cxx`; ``onlstm.fused-python``: ``impl="cpu"``, the pure-PyTorch
Function of :mod:`treelm.kernels.onlstm_torch`) and whatever other cells ``treelm.cells`` provides.
The record's ``cxx`` entry says whether the C++ loop ran (and if not, why). Each measurement:
warm-up runs, then the median of ``--repeats`` timed runs (``--interleave``: the models' runs
take turns, round by round, and each ratio is also given as its median over rounds,
``ratios_paired``: on a VM whose speed drifts, models timed one after the other differed by 20%
or more). Prints a table (or the JSON with
``--json``) and writes ``benchmarks/results/cells-<YYYYMMDD>.json`` (or ``--out``) with the
machine (CPU vendor and model included) and the exact command line. The per-step recurrent
products of the fused ON-LSTM and of the GEMM floor run on the backend :mod:`treelm.kernels.gemm`
measures fastest per shape (``--gemm`` forces one); the record lists, per size and model, which
backend each product used and the times measured.

Run it alone on an otherwise idle machine: the numbers are wall-clock times. The record says how
busy the machine was at the start (``machine.other_busy_cores``: cores other processes kept busy
over 0.2 s, :func:`treelm.omp.other_busy_cores`), lscpu's threads per core (two vCPUs may be one
core's two hyperthreads) and the environment that changes kernels or threads (``env``:
``OMP_*``, ``GOMP_*``, ``MKL_*``, ``ONEDNN_*``, ``ATEN_CPU_CAPABILITY``, ``TREELM_*``, as set).

``--isa avx2`` measures the AVX2 path on a CPU with more (the proxy of issue 49 for an AVX2-only
CPU on an AVX-512 one): PyTorch's kernels (``ATEN_CPU_CAPABILITY=avx2``), MKL
(``MKL_ENABLE_INSTRUCTIONS=AVX2``), oneDNN (``ONEDNN_MAX_CPU_ISA=AVX2``) and treelm's C++ loops
(``TREELM_CXX_ISA=avx2``, :mod:`treelm.kernels.build`) limited to AVX2 and FMA. The libraries read
these once, when they load, so the script starts itself again with them set (run as a script;
:func:`main` called from Python needs them set before torch was imported). The record adds
``"proxy": "avx2"`` where the CPU has AVX-512 (``machine.cpu_simd`` lists what the CPU has,
``machine.torch_cpu_capability`` what PyTorch used), the variables (``isa_env``) and the ISA
oneDNN reported (``onednn_isa``); its default name is ``cells-avx2-proxy-<YYYYMMDD>.json``.
Everything else (the cache of the GEMM backend a shape takes, the C++ loops' folder) is per ISA
already. On a CPU without AVX-512, ``--isa avx2`` changes nothing and is recorded as no proxy.

``--device cuda`` times the same models on the GPU (``impl="auto"`` is then the Triton path):
each run between two CUDA events, after ``torch.cuda.synchronize``, so a time covers the GPU's
work and its idling while Python launches kernels; the median of ``--repeats`` runs counts. The
record, ``benchmarks/results/cells-gpu-<YYYYMMDD>.json``, adds ``"device": "cuda"`` and the GPU's
name (``torch.cuda.get_device_name``); ``benchmarks/report.py`` renders it as a GPU table beside
the CPU ones. ``--device cpu`` (the default) measures and records exactly as before.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import os
import shlex
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    ENV_RECORDED,
    ISA_PROXIES,
    isa_environment,
    isa_record,
    lscpu,
    machine_info,
    time_runs,
)

from treelm import omp  # noqa: E402
from treelm.kernels import gemm  # noqa: E402

# Problem sizes. "paper": Shen et al. 2019 / AWD-LSTM on PTB (batch 20, BPTT 70, embedding 400,
# hidden 1150, chunk 10); "paper-b128": the same at batch 128 (a GPU's usual batch; issue 15);
# "cpu": the CPU training configuration.
SIZES: dict[str, dict[str, int]] = {
    "paper": {"batch": 20, "bptt": 70, "input": 400, "hidden": 1150, "chunk": 10},
    "paper-b128": {"batch": 128, "bptt": 70, "input": 400, "hidden": 1150, "chunk": 10},
    "cpu": {"batch": 64, "bptt": 35, "input": 400, "hidden": 400, "chunk": 10},
}
THREADS = 2
CPU = torch.device("cpu")
RESULTS_DIR = Path(__file__).resolve().parent / "results"
Model = nn.Module
Runner = Callable[[Tensor], Tensor]
Maker = Callable[[dict[str, int], torch.device], tuple[Model, Runner]]


# ------------------------------------------------------------------------------------- models

def _lstm(size: dict[str, int], device: torch.device) -> tuple[Model, Runner]:
    m = nn.LSTM(size["input"], size["hidden"]).to(device)
    return m, lambda x: m(x)[0]


def _treelm_cell(cls: type, size: dict[str, int], device: torch.device, **kwargs: Any
                 ) -> tuple[Model, Runner]:
    m = cls(size["input"], size["hidden"], **kwargs).to(device)
    return m, lambda x: m(x)[0]


def _onlstm(impl: str, **options: Any) -> Maker:
    def make(size: dict[str, int], device: torch.device) -> tuple[Model, Runner]:
        from treelm.cells.onlstm import ONLSTM

        return _treelm_cell(ONLSTM, size, device, chunk_size=size["chunk"], impl=impl,
                            **options)

    return make


def _other_cells() -> dict[str, Maker]:
    """The cells other than ON-LSTM of :data:`treelm.cells.CELLS`, by their names there."""
    from treelm.cells import CELLS

    return {f"treelm.{name}": lambda size, device, cls=cls: _treelm_cell(cls, size, device)
            for name, cls in CELLS.items() if cls.__name__ != "ONLSTM"}


def _official(path: Path) -> Maker:
    """The official ON-LSTM (github.com/yikangshen/Ordered-Neurons, ``ON_LSTM.py``) from a local
    checkout given by ``--official``: one ``ONLSTMStack`` layer, no dropout. Nothing of it is part
    of treelm; it is imported from that path only to be timed beside ours."""

    def make(size: dict[str, int], device: torch.device) -> tuple[Model, Runner]:
        sys.path.insert(0, str(path))
        mod = importlib.import_module("ON_LSTM")
        m = mod.ONLSTMStack([size["input"], size["hidden"]], chunk_size=size["chunk"]).to(device)
        hidden = m.init_hidden(size["batch"])               # on the weights' device
        return m, lambda x: m(x, hidden)[0]

    return make


class _GemmOnly(torch.autograd.Function):
    """Only the matrix products that training a gated RNN layer of gate width G must do, at the
    layer's sizes, and nothing else (no gate math, no state kept): the floor under any exact
    implementation that computes the same numbers with the same GEMMs.

    forward:  X W_ihᵀ for all T·B rows at once, then T recurrent products h W_hhᵀ, (B, H)·(H, G)
    backward: T products dG_t W_hh, (B, G)·(G, H); dW_hh = dGᵀ H, dW_ih = dGᵀ X as one GEMM each
              over all steps; dX = dG W_ih

    Every product runs as the fused ON-LSTM runs it: on the GEMM backend measured fastest for its
    shape (:mod:`treelm.kernels.gemm`, or the one ``--gemm`` forces), the recurrent weight packed
    once per sequence where that backend packs; so the floor is one whichever backend is fastest.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, w_ih: Tensor, w_hh: Tensor, hs: Tensor, dg: Tensor
                ) -> Tensor:
        # hs (T·B, H), dg (T·B, G): stand-in states and gate gradients, made before timing
        T, B, _ = x.shape
        G, H = w_hh.shape
        x2 = x.reshape(T * B, -1)
        xp = gemm.linear(x2, w_ih)                           # (T·B, G), as the fused path
        out = x.new_empty(B, G)
        recurrent = gemm.FixedMatmul(w_hh, B, steps=T)
        for t in range(T):
            recurrent(hs[t * B:(t + 1) * B], out=out)
        ctx.save_for_backward(x2, w_ih, w_hh, hs, dg)
        ctx.shape = (T, B)
        return out[0, 0] * 0 + xp[0, 0] * 0                  # a scalar; the products are done

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        x2, w_ih, w_hh, hs, dg = ctx.saved_tensors
        T, B = ctx.shape
        dh = x2.new_empty(B, w_hh.shape[1])
        recurrent_t = gemm.FixedMatmul(w_hh, B, transpose=True, steps=T)
        for t in range(T):
            recurrent_t(dg[t * B:(t + 1) * B], out=dh)
        d_whh = gemm.matmul(dg.t(), hs)
        d_wih = gemm.matmul(dg.t(), x2)
        dx = gemm.matmul(dg, w_ih)
        return dx.view(T, B, -1), d_wih, d_whh, None, None


def _gemm_floor(gates: Callable[[dict[str, int]], int]) -> Maker:
    def make(size: dict[str, int], device: torch.device) -> tuple[Model, Runner]:
        G, H = gates(size), size["hidden"]
        m = nn.Module()
        m.w_ih = nn.Parameter(torch.randn(G, size["input"]) * 0.05)
        m.w_hh = nn.Parameter(torch.randn(G, H) * 0.05)
        m.to(device)
        rows = size["bptt"] * size["batch"]
        hs, dg = torch.randn(rows, H).to(device), torch.randn(rows, G).to(device)
        return m, lambda x: _GemmOnly.apply(x, m.w_ih, m.w_hh, hs, dg)

    return make


#: the record's ratios (per size and mode, where ``onlstm.fused``, ``onlstm.reference`` and
#: ``nn.LSTM`` all ran): name -> (model, model it is over), kept where both ran; the floor's
#: is the most any exact rewrite could gain, the graphs' are ``--device cuda``'s
RATIOS = {
    "fused_over_reference": ("onlstm.fused", "onlstm.reference"),
    "fused_over_nn_lstm": ("onlstm.fused", "nn.LSTM"),
    "fused_over_fused_python": ("onlstm.fused", "onlstm.fused-python"),
    "fused_python_over_nn_lstm": ("onlstm.fused-python", "nn.LSTM"),
    "floor_over_reference": ("gemm-floor.onlstm", "onlstm.reference"),
    "fused_over_floor": ("onlstm.fused", "gemm-floor.onlstm"),
    "graphs_over_nn_lstm": ("onlstm.fused-graphs", "nn.LSTM"),
    "graphs_over_fused": ("onlstm.fused-graphs", "onlstm.fused"),
    "fused_over_official": ("onlstm.fused", "onlstm.official"),
    "official_over_nn_lstm": ("onlstm.official", "nn.LSTM"),
}


def models(official: Path | None = None, device: torch.device = CPU) -> dict[str, Maker]:
    found = {
        "nn.LSTM": _lstm,
        "onlstm.reference": _onlstm("reference"),
        "onlstm.fused": _onlstm("auto", cuda_graphs=False),   # eager: each step launched
        # the Python fused path (impl="cpu"), which "auto" was on the CPU before the C++ loop
        "onlstm.fused-python": _onlstm("cpu", cuda_graphs=False),
        # floors: the GEMMs alone, gate width 4H + 2H/chunk (ON-LSTM) and 4H (LSTM)
        "gemm-floor.onlstm": _gemm_floor(lambda s: 4 * s["hidden"] + 2 * s["hidden"] // s["chunk"]),
        "gemm-floor.lstm": _gemm_floor(lambda s: 4 * s["hidden"]),
    }
    if device.type == "cuda":       # training steps replayed from CUDA graphs (the default)
        found["onlstm.fused-graphs"] = _onlstm("auto", cuda_graphs=True)
    if official is not None:
        found["onlstm.official"] = _official(official)
    return {**found, **_other_cells()}


# --------------------------------------------------------------------------------- measuring

def _runs(make: Maker, size: dict[str, int], device: torch.device
          ) -> dict[str, Callable[[], None]]:
    """One model built at ``size``, as its two timed calls: ``train`` (forward + backward with
    every gradient) and ``inference`` (forward under ``torch.no_grad``)."""
    torch.manual_seed(0)
    model, run = make(size, device)
    x = torch.randn(size["bptt"], size["batch"], size["input"]).to(device).requires_grad_()
    params = list(model.parameters())

    def train() -> None:
        for p in params:
            p.grad = None
        x.grad = None
        run(x).sum().backward()

    def infer() -> None:
        with torch.no_grad():
            run(x)

    return {"train": train, "inference": infer}


def _timed(size: dict[str, int], ts: list[float]) -> dict[str, Any]:
    """One mode's figures from its runs' seconds: the median's tokens/s, and every run."""
    med = statistics.median(ts)
    return {"tokens_per_s": size["bptt"] * size["batch"] / med, "ms_median": med * 1e3,
            "ms_runs": [t * 1e3 for t in ts]}


def measure(
    make: Maker,
    size: dict[str, int],
    warmup: int,
    repeats: int,
    device: torch.device = CPU,
) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for mode, fn in _runs(make, size, device).items():
        gemm.clear_decisions()
        result[mode] = _timed(size, time_runs(fn, warmup, repeats, device, events=True))
        # the GEMM backend of each recurrent product this model ran through treelm.kernels.gemm
        # (fused ON-LSTM, GEMM floor), chosen on the first (warm-up) run, not timed
        if gemm.decisions():
            result[mode]["gemm"] = gemm.decisions()
    return result


def measure_interleaved(makers: dict[str, Maker], size: dict[str, int], warmup: int,
                        repeats: int, device: torch.device = CPU) -> dict[str, dict[str, Any]]:
    """:func:`measure` of several models at one size, their timed runs taking turns (round r
    runs each model once, in order): a machine whose speed drifts (a cloud VM's neighbours, its
    clock) slows every model of a round alike, so the ratios of one round's times hold where
    models timed one after the other can differ by 20%. Each model's result adds its
    ``ms_runs`` in round order; a model that cannot run at this size gets ``error``."""
    runs: dict[str, dict[str, Callable[[], None]]] = {}
    out: dict[str, dict[str, Any]] = {}
    for name, make in makers.items():
        try:
            runs[name], out[name] = _runs(make, size, device), {}
        except Exception as e:  # reported, not fatal, as measure's callers do
            out[name] = {"error": f"{type(e).__name__}: {e}"}
    for mode in ("train", "inference"):
        for name in runs:       # warm-ups (and each model's GEMM choices) first, untimed
            gemm.clear_decisions()
            time_runs(runs[name][mode], warmup, 0, device)
            out[name][mode] = {"gemm": gemm.decisions()} if gemm.decisions() else {}
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(repeats):
            for name in runs:
                times[name] += time_runs(runs[name][mode], 0, 1, device, events=True)
        for name, ts in times.items():
            out[name][mode].update(_timed(size, ts))
    return out


def paired_ratios(by: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per mode, each of :data:`RATIOS` present as the median over rounds of one round's ratio
    of tokens/s (the runs of ``--interleave``: round r of each model ran together)."""
    out: dict[str, dict[str, float]] = {}
    for mode in ("train", "inference"):
        out[mode] = {name: statistics.median(tb / ta for ta, tb in zip(
            by[a][mode]["ms_runs"], by[b][mode]["ms_runs"]))
            for name, (a, b) in RATIOS.items() if a in by and b in by}
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the JSON instead of a table")
    ap.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=["paper", "cpu"])
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per measurement")
    ap.add_argument("--warmup", type=int, default=2, help="untimed runs first")
    ap.add_argument("--threads", type=int, default=THREADS)
    ap.add_argument("--models", nargs="+", default=None, help="only these (names as printed)")
    ap.add_argument("--interleave", action="store_true",
                    help="the models' timed runs take turns, round by round, and the record adds "
                    "each ratio's median over rounds (ratios_paired): for a machine whose speed "
                    "drifts")
    ap.add_argument("--out", type=Path, default=None, help="result file (default: dated)")
    ap.add_argument("--gemm", choices=gemm.CHOICES, default=None,
                    help="GEMM backend of the fused ON-LSTM and the floor's per-step products: "
                    "auto (measured per shape, the default) or one forced; default: "
                    f"${gemm.ENV_VAR} or auto")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="where the models run (cuda: timed with CUDA events)")
    ap.add_argument("--official", type=Path, default=None, metavar="CHECKOUT",
                    help="also time the official ON-LSTM from this checkout of "
                    "yikangshen/Ordered-Neurons (not shipped with treelm)")
    ap.add_argument("--isa", choices=sorted(ISA_PROXIES), default=None,
                    help="limit PyTorch, MKL, oneDNN and the C++ loops to this instruction set "
                    "(the script restarts itself with their variables set; a proxy where the "
                    "CPU has more)")
    args = ap.parse_args(argv)
    if args.isa is not None:
        isa_environment(ap, args.isa, from_python=argv is not None)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device here")

    isa = isa_record(args.isa)
    busy = _machine_load()              # before anything of ours runs
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # as the trainer and the CLI do
    if args.gemm is not None:
        gemm.set_backend(args.gemm)
    available = models(args.official, device)
    chosen = args.models or list(available)
    unknown = [m for m in chosen if m not in available]
    if unknown:
        ap.error(f"unknown models {unknown}; available: {', '.join(available)}")
    results = []
    paired: dict[str, dict[str, dict[str, float]]] = {}
    for size_name in args.sizes:
        size = SIZES[size_name]
        if args.interleave:
            got = measure_interleaved({n: available[n] for n in chosen}, size, args.warmup,
                                      args.repeats, device)
            entries = [{"size": size_name, "model": n, **got[n]} for n in chosen]
            paired[size_name] = paired_ratios({e["model"]: e for e in entries
                                               if "error" not in e})
        else:
            entries = []
            for name in chosen:
                entry: dict[str, Any] = {"size": size_name, "model": name}
                try:
                    entry.update(measure(available[name], size, args.warmup, args.repeats,
                                         device))
                except Exception as e:  # a cell that cannot run at this size is reported
                    entry["error"] = f"{type(e).__name__}: {e}"
                entries.append(entry)
        for entry in entries:
            results.append(entry)
            if not args.json:
                _print_row(entry)

    ratios: dict[str, dict[str, float]] = {}
    for size_name in args.sizes:
        by = {r["model"]: r for r in results if r["size"] == size_name and "error" not in r}
        for mode in ("train", "inference"):
            found = {name: by[a][mode]["tokens_per_s"] / by[b][mode]["tokens_per_s"]
                     for name, (a, b) in RATIOS.items() if a in by and b in by}
            if found:
                ratios[f"{size_name}.{mode}"] = found
    report = {
        "command": shlex.join([sys.executable, *sys.argv] if argv is None else ["cells.py", *argv]),
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "machine": {**machine_info(), "mkl": torch.backends.mkl.is_available(),
                    "mkldnn": torch.backends.mkldnn.is_available(), **busy},
        "env": {k: v for k, v in sorted(os.environ.items()) if ENV_RECORDED.match(k)},
        **isa,
        "gemm": {"requested": gemm.requested_backend(),
                 "available": list(gemm.available_backends()),
                 "used": _gemm_summary(results)},
        "cxx": _cxx_info(),
        **({"device": "cuda", "gpu": torch.cuda.get_device_name(device)}
           if device.type == "cuda" else {}),
        "threads": args.threads,
        "warmup": args.warmup,
        "repeats": args.repeats,
        "sizes": {k: SIZES[k] for k in args.sizes},
        "results": results,
        "ratios": ratios,
        **({"interleaved": True, "ratios_paired": paired} if args.interleave else {}),
    }
    kind = ("cells-gpu" if device.type == "cuda"
            else f"cells-{args.isa}-proxy" if isa.get("proxy") else "cells")
    out = args.out or RESULTS_DIR / f"{kind}-{_dt.date.today():%Y%m%d}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for key, r in ratios.items():
            print(f"{key}: " + ", ".join(f"{k} {v:.2f}x" for k, v in r.items()))
        for size_name, modes in paired.items():
            for mode, r in modes.items():
                print(f"{size_name}.{mode}, median of rounds: "
                      + ", ".join(f"{k} {v:.2f}x" for k, v in r.items()))
        print(f"wrote {out}")
    return report


def _machine_load() -> dict[str, Any]:
    """How busy the machine is as the benchmark starts, and whether its CPUs share cores."""
    busy = omp.other_busy_cores()
    out: dict[str, Any] = {"other_busy_cores": None if busy is None else round(busy, 2)}
    tpc = lscpu().get("Thread(s) per core")
    if tpc:
        out["threads_per_core"] = int(tpc) if tpc.isdigit() else tpc
    return out


def _cxx_info() -> dict[str, Any]:
    """Whether ``onlstm.fused`` ran the C++ loop on the CPU (:mod:`treelm.kernels.onlstm_cxx`):
    the extension's name and flags, or why not."""
    from treelm.kernels import build

    if build.load() is None:
        return {"used": False, "reason": build.unavailable_reason()}
    return {"used": True, "extension": build.name(), "flags": build.flags()}


def _gemm_summary(results: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, str]]]:
    """``{size: {model: {"train"|"inference": "product backend, …"}}}`` for the models whose
    recurrent products went through :mod:`treelm.kernels.gemm`."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    for r in results:
        for mode in ("train", "inference"):
            rows = r.get(mode, {}).get("gemm")
            if rows:
                out.setdefault(r["size"], {}).setdefault(r["model"], {})[mode] = _gemm_line(rows)
    return out


def _gemm_line(rows: list[dict[str, Any]]) -> str:
    return ", ".join(f"{d['product']} {d['backend']} ({d['how']})" for d in rows)


def _print_row(entry: dict[str, Any]) -> None:
    head = f"{entry['size']:>6} {entry['model']:<20}"
    if "error" in entry:
        print(f"{head} error: {entry['error']}")
        return
    tr, inf = entry["train"], entry["inference"]
    print(f"{head} train {tr['tokens_per_s']:9.0f} tok/s ({tr['ms_median']:7.1f} ms)   "
          f"inference {inf['tokens_per_s']:9.0f} tok/s ({inf['ms_median']:7.1f} ms)", flush=True)
    if "gemm" in tr:
        print(f"{'':>6} {'':<20} GEMM: {_gemm_line(tr['gemm'])}", flush=True)


if __name__ == "__main__":
    main()
