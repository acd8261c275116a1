"""Render ``docs/benchmarks.md`` from the newest records in ``benchmarks/results/``, so that every
figure in the docs is a copy of a measured one. (The studies' pages, the tree pages among them,
are ``treelm study studies/X.yaml --page``'s.)

    python benchmarks/report.py

Cell throughput records of ``benchmarks/cells.py --device cuda`` (``"device": "cuda"``) are
rendered as GPU tables, after the CPU ones, headed by the GPU's name.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import repo_path  # noqa: E402

RESULTS = HERE / "results"
DOC = HERE.parent / "docs" / "benchmarks.md"


def newest(script: str, results: Path = RESULTS) -> tuple[Path, dict] | None:
    files = sorted(results.glob(f"{script}-*.json"))
    return (files[-1], json.loads(files[-1].read_text())) if files else None


def every(script: str, results: Path = RESULTS) -> list[tuple[Path, dict]]:
    """All records of a script, newest first (machines and budgets differ between them)."""
    return [(f, json.loads(f.read_text())) for f in sorted(results.glob(f"{script}-*.json"),
                                                             reverse=True)]


def on_gpu(rec: dict) -> bool:
    return rec.get("device") == "cuda"


def machine_line(rec: dict) -> str:
    m = rec.get("machine", {})
    vendor = f" ({m['cpu_vendor']})" if m.get("cpu_vendor") else ""
    return (f"{m.get('cpu', m.get('cpu_model', '?'))}{vendor}, {m.get('torch_threads', '?')} "
            f"torch threads, torch {m.get('torch', '?')}")


def _machine_short(rec: dict) -> str:
    return rec.get("machine", {}).get("cpu", "?").replace("(R)", "")


def cells_section(path: Path, rec: dict) -> list[str]:
    if on_gpu(rec):
        m: dict[str, Any] = rec.get("machine", {})
        out = [f"## Cell throughput on the GPU (`benchmarks/cells.py --device cuda`), "
               f"{rec.get('gpu', '?')}, {str(rec['date'])[:10]}", "",
               f"Record `{repo_path(path)}`, command `{rec['command']}`; {rec.get('gpu', '?')}, "
               f"torch {m.get('torch', '?')}, host CPU {m.get('cpu', '?')}. One layer, tokens/s, "
               f"each run timed by CUDA events, median of {rec['repeats']} runs after "
               f"{rec['warmup']} warm-up runs. Training = forward + backward with every "
               f"gradient.", ""]
    else:
        fms = rec.get("machine", {}).get("cpu_family_model_stepping")
        cpu = _machine_short(rec) + (f" ({fms})" if fms else "")    # a hypervisor may name
        out = [f"## Cell throughput (`benchmarks/cells.py`), {cpu}, "  # two CPUs alike
               f"{str(rec['date'])[:10]}, `{path.name}`", "",
               f"Record `{repo_path(path)}`, command `{rec['command']}`; "
               f"{machine_line(rec)}. One layer, tokens/s, median of {rec['repeats']} runs after "
               f"{rec['warmup']} warm-up runs. Training = forward + backward with every "
               f"gradient." + _proxy_note(rec), ""]
    for size, dims in rec["sizes"].items():
        out += [f"### {size} size: batch {dims['batch']}, bptt {dims['bptt']}, input "
                f"{dims['input']}, hidden {dims['hidden']}, chunk {dims['chunk']}", "",
                "| model | training tok/s | inference tok/s |", "| --- | ---: | ---: |"]
        for r in rec["results"]:
            if r["size"] != size:
                continue
            if "error" in r:
                reason = r["error"].split(";")[0]   # the clause that says why, whole
                out.append(f"| {r['model']} | – | – ({reason}) |")
            else:
                out.append(f"| {r['model']} | {r['train']['tokens_per_s']:,.0f} | "
                           f"{r['inference']['tokens_per_s']:,.0f} |")
        out.append("")
        for model, modes in rec.get("gemm", {}).get("used", {}).get(size, {}).items():
            if "train" in modes:    # the training run covers the forward and backward products
                out.append(f"- GEMM backends of {model}: {modes['train']}")
        for mode in ("train", "inference"):
            ratios = rec.get("ratios", {}).get(f"{size}.{mode}")
            if ratios:
                out.append(f"- {mode}: " + ", ".join(f"{k.replace('_', ' ')} **{v:.2f}×**"
                                                     for k, v in ratios.items()))
            paired = rec.get("ratios_paired", {}).get(size, {}).get(mode)
            if paired:      # --interleave: the models' runs took turns
                out.append(f"- {mode}, the median over the interleaved rounds of each round's "
                           "ratio: " + ", ".join(f"{k.replace('_', ' ')} **{v:.2f}×**"
                                                  for k, v in paired.items()))
        out.append("")
    return out


def _proxy_note(rec: dict, spin: bool = True) -> str:
    """What a record run on the AVX2 proxy is: a CPU with AVX-512 limited to AVX2 and FMA."""
    if not rec.get("proxy"):
        return ""
    env = rec.get("env") or {}
    spin_text = (f" `GOMP_SPINCOUNT`={env['GOMP_SPINCOUNT']} (what `treelm train` sets)."
                 if env.get("GOMP_SPINCOUNT") else
                 " libgomp's default spin count (cells.py imports torch itself).")
    return (f" **A proxy, not an {rec['proxy'].upper()} CPU:** this CPU's AVX-512 is switched "
            f"off for PyTorch, MKL, oneDNN and treelm's C++ loops (`--isa {rec['proxy']}`: "
            + ", ".join(f"`{k}`={v}" for k, v in (rec.get("isa_env") or {}).items())
            + ")" + (";" + spin_text if spin else "."))


def output_layer_section(path: Path, rec: dict) -> list[str]:
    """The output layer's FLOPs and tokens/s, full softmax against adaptive, and the step."""
    f = rec["flops"]
    out = [f"## The output layer: full softmax against adaptive (`benchmarks/output_layer.py`), "
           f"`{path.name}`", "",
           f"Record `{repo_path(path)}`, command `{rec['command']}`; {machine_line(rec)}, "
           f"CPU capability {rec.get('machine', {}).get('torch_cpu_capability', '?')}. FLOPs "
           f"per token from the shapes (products, forward + backward; vocabulary {f['vocab']:,}"
           f", dimension {f['dim']}); the layer alone on {f['rows_per_batch']:,} rows in "
           f"{rec['layer']['precision']}; the whole training step of each config."
           + _proxy_note(rec, spin=False), "",
           "| output layer | layer MFLOP/token | step MFLOP/token | layer tok/s | step tok/s |",
           "| --- | ---: | ---: | ---: | ---: |"]
    steps = {s["config"]: s for s in rec.get("steps", [])}
    full = steps.get(rec.get("full_config"), {})
    out.append(f"| full softmax | {f['full']['train_mflop']:.2f} | "
               f"{f['full']['step_train_mflop']:.2f} | "
               f"{rec['layer']['full']['tokens_per_s']:,.0f} | "
               f"{full.get('tokens_per_s', 0):,.0f} |")
    for i, a in enumerate(f["adaptive"]):
        timed = i == 0                  # the adaptive config's own cutoffs: the ones timed
        ad = steps.get(rec.get("adaptive_config"), {}) if timed else {}
        layer = rec["layer"]["adaptive"]["tokens_per_s"] if timed else None
        out.append(f"| adaptive, cutoffs {a['cutoffs']} | {a['train_mflop']:.2f} | "
                   f"{a['step_train_mflop']:.2f} | "
                   + (f"{layer:,.0f}" if layer else "–") + " | "
                   + (f"{ad['tokens_per_s']:,.0f}" if ad else "–") + " |")
    return out + [""]


def train_time_section(records: list[tuple[Path, dict]]) -> list[str]:
    """One whole training per row (start-up, validations and dev trees included): the figures
    behind the README's time per CPU class."""
    out = ["## A whole training per CPU class (`benchmarks/train_time.py`)", "",
           "Each row one training alone on the machine, start-up, validations and dev tree scores "
           "included (the run's own clock, as `train.max_minutes` counts it); newest first. "
           "`benchmarks/train_time_classes.sh` makes a day's three records. Machines of one "
           "model differ from day to day (cloud VMs): compare rows of one day.", "",
           "| record | config | CPU | path | precision | minutes | tokens | tokens/s | "
           "validations | best valid ppl |",
           "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    notes = []
    for path, rec in records:
        m = rec.get("machine", {})
        simd = m.get("cpu_simd") or []
        native = "AVX-512" if "avx512f" in simd else "AVX2" if "avx2" in simd else "?"
        where = (f"{rec['proxy'].upper()} proxy" if rec.get("proxy")
                 else m.get("torch_cpu_capability") or native)
        config = f"`{rec['config']}`" + (" (then the full softmax)" if _before_adaptive(rec)
                                          else "")
        out.append(f"| `{path.name}` | {config} | {_machine_short(rec)} "
                   f"({m.get('cpu_family_model_stepping', '?')}, {native}) | {where} | "
                   f"{rec.get('precision')} | {rec['minutes']:.2f} | {rec['tokens']:,} | "
                   f"{rec['tokens_per_s']:,} | {rec['validations']} | "
                   f"{rec['best_valid_ppl']:.1f} |")
        if rec.get("proxy"):
            notes.append(f"`{path.name}`:" + _proxy_note(rec, spin=False))
        if rec.get("seconds_by_phase"):
            notes.append(f"`{path.name}`: its time by phase, seconds (share): " + ", ".join(
                f"{k} {v:.1f} ({100 * rec['share_by_phase'][k]:.1f}%)"
                for k, v in rec["seconds_by_phase"].items())
                + f"; the steps alone at {rec['step_tokens_per_s']:,} tokens/s, the whole run "
                f"at {100 * rec['whole_over_steps']:.1f}% of that.")
    return out + [""] + notes + ([""] if notes else []) + [
        "The commands:", "", "```"] + [f"{p.name}: {r['command']}" for p, r in records] + [
        "```", ""]


def _before_adaptive(rec: dict) -> bool:
    """A record of the tree config made before it took the adaptive softmax (2026-11-28)."""
    return (rec.get("config") == "configs/ptb-onlstm-trees.yaml"
            and str(rec.get("date", ""))[:8] < "20261128")


def study_throughput_section(path: Path, rec: dict) -> list[str]:
    """Runs at once × threads each: the machine's tokens/s under each plan."""
    out = [f"## Runs at once on one machine (`benchmarks/study_throughput.py`), "
           f"{_machine_short(rec)}, `{path.name}`", "",
           f"Record `{repo_path(path)}`, command `{rec['command']}`; {machine_line(rec)}; "
           f"`{rec['config']}`, {rec['tokens']:,} training tokens per run, every plan "
           f"{len(next(iter(rec['plans'].values()))['rounds'])} times in turn."
           + _proxy_note(rec, spin=False), "",
           "| plan (runs × threads) | each run, tok/s | the machine, tok/s | against the first |",
           "| --- | ---: | ---: | ---: |"]
    for name, e in rec["plans"].items():
        out.append(f"| {name} | {e['each_tok_s']:,.0f} | {e['total_tok_s']:,.0f} | "
                   f"{e['vs_first']:.2f}× |")
    la = rec["launcher"]
    vs = f"{la['vs_alone']:.2f}×" if la.get("vs_alone") else "not measured"
    return out + ["", f"`treelm study`'s local launcher takes {la['plan_for_10_runs']} for a "
                  f"study of 10 runs on this machine: {vs} one run alone on every core "
                  f"(its target: >= {la['target']}×).", ""]


def budget_section(path: Path, rec: dict) -> list[str]:
    cmds = rec.get("commands", [rec["command"]])
    on_gpu = all("train.device=cuda" in c for c in cmds) and rec["machine"].get("gpu")
    where = f"{rec['machine']['gpu']} (GPU)" if on_gpu else _machine_short(rec)
    # the records of benchmarks/lm_budget.py, since replaced by studies/lm-budget.yaml (a
    # study's record renders as its page: treelm study --page)
    out = [f"## Language models at equal wall time (recorded by `benchmarks/lm_budget.py`, since "
           f"replaced by `studies/lm-budget.yaml`), {where}, {str(rec['date'])[:10]}", "",
           f"Record `{repo_path(path)}`; {machine_line(rec)}. Commands: "
           + "; ".join(f"`{c}`" for c in rec.get("commands", [rec["command"]])), "",
           "| config | parameters | minutes | tokens seen | tokens/s | epochs | best valid | "
           "test (best ckpt) |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, r in rec["configs"].items():
        key = r["metric"]
        test = r.get("test", {}).get(key)
        out.append(f"| {name} | {r['parameters']:,} | {r['minutes']:g} | {r['tokens_seen']:,} | "
                   f"{r['tokens_per_s']:,.0f} | {r['epochs_completed']} | "
                   f"{key} {r[f'best_valid_{key}']:.2f} | "
                   + (f"{key} {test:.2f}" if test is not None else "–") + " |")
    out += ["", "Validation curves (minutes, figure):", ""]
    for name, r in rec["configs"].items():
        out.append(f"- {name}: " + ", ".join(f"{m:g}: {v:.1f}" for m, v in r["valid_curve"]))
    return out + [""]


def simple_section(title: str, path: Path, rec: dict, keys: list[str]) -> list[str]:
    out = [f"## {title}", "", f"Record `{repo_path(path)}`, command "
           f"`{rec['command']}`; {machine_line(rec)}.", ""]
    for k in keys:
        if k in rec:
            out.append(f"- {k.replace('_', ' ')}: **{rec[k]}**")
    return out + [""]


def precision_section(path: Path, rec: dict) -> list[str]:
    """fp32 against bf16 mixed precision: training tokens/s per config, and auto's choice."""
    m = rec.get("machine", {})
    simd = ", ".join(m.get("cpu_simd", [])) or "?"
    auto = rec.get("auto", {})
    where = (f"{m.get('gpu', '?')} (GPU), torch {m.get('torch', '?')}, host CPU "
             f"{m.get('cpu', '?')}" if on_gpu(rec) else
             f"{machine_line(rec)}; vector extensions {simd}")
    out = [f"## Training precision (`benchmarks/precision.py`), "
           f"{m.get('gpu', '?') if on_gpu(rec) else _machine_short(rec)}, "
           f"{str(rec['date'])[:10]}, `{path.name}`", "",
           f"Record `{repo_path(path)}`, command `{rec['command']}`; {where}. "
           f"`train.precision: auto`'s measurement of the machine chose "
           f"**{auto.get('precision', '?')}**: {auto.get('reason', '?')}." +
           (" Where it says bf16, `auto` confirms it by the config's own training step (fp32 "
            "unless bf16 makes the step at least 1.1× faster): the column `auto` takes."
            if any("auto" in e for e in rec.get("configs", {}).values()) else ""), "",
           "| config | fp32 tokens/s | bf16 tokens/s | bf16 / fp32 | `auto` takes | valid, fp32 | "
           "valid, bf16 | bf16 vs fp32 | units |",
           "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    for config, e in rec.get("configs", {}).items():
        sp, q = e.get("speed", {}), e.get("quality", {})

        def rate(p: str, sp: dict = sp) -> str:
            return f"{sp[p]['tokens_per_s']:,.0f}" if p in sp else "—"

        def valid(p: str, q: dict = q) -> str:
            v = next((f"{k[6:]} {x:.2f}" for k, x in q.get(p, {}).items()
                      if k.startswith("valid_")), None)
            return v or ("skipped" if "skipped" in q.get(p, {}) else "—")

        sp = e.get("speed", {})
        if "fp32" in sp and "bf16" in sp:      # from the speeds: the record's ratio is rounded
            ratio = f"{sp['bf16']['tokens_per_s'] / sp['fp32']['tokens_per_s']:.2f}×"
        else:
            ratio = f"{e['bf16_over_fp32']:.2f}×" if "bf16_over_fp32" in e else "—"
        diff = (f"{100 * e['quality_bf16_vs_fp32']:+.2f}%" if "quality_bf16_vs_fp32" in e
                else "—")
        units = next((f"{x['units']:,}" for x in q.values() if "units" in x), "—")
        # what auto takes for the config (its own step confirming the machine's choice)
        step = e.get("auto", {})
        gain = re.search(r"training step ([\d.]+)×", step.get("reason", ""))
        takes = (f"{step['precision']} (step {gain[1]}×)" if gain else
                 step.get("precision", "—"))
        out.append(f"| `{config}` | {rate('fp32')} | {rate('bf16')} | {ratio} | {takes} | "
                   f"{valid('fp32')} | {valid('bf16')} | {diff} | {units} |")
    skipped = {q["skipped"] for e in rec.get("configs", {}).values()
               for q in e.get("quality", {}).values() if "skipped" in q}
    out += [""] + [f"Quality runs not made: {s}." for s in sorted(skipped)]
    graphs = [f"`{config}` {p}: {g['replayed']:,} replayed, {g['eager']:,} eager"
              for config, e in rec.get("configs", {}).items()
              for p, r in e.get("speed", {}).items() if (g := r.get("cuda_graphs"))]
    if graphs:
        out += ["", "CUDA graphs in the timed steps (each fused ON-LSTM layer's sequence calls, "
                "after the warm-up's captures): " + "; ".join(graphs) + "."]
    if rec.get("products"):
        peak = ("; `peak (square)` is not the step's but the machine's best case"
                if "peak (square)" in rec["products"] else "")
        each = "; ".join(f"{name} {'×'.join(map(str, x['shape']))}: "
                         f"{x['ms']['float32']:g} → {x['ms']['bfloat16']:g} "
                         f"(**{x['bf16_over_fp32']:.2f}×**)" for name, x in rec["products"].items())
        out += ["", "The products alone (`torch.mm`, ms, fastest of 10), the ceiling for a whole "
                f"step (its other work stays float32{peak}): {each}."]
    if len(rec.get("commands", [])) > 1:
        out += ["", "Commands merged into this record: " +
                "; ".join(f"`{c}`" for c in rec["commands"]) + "."]
    return out + [""]


def _cpu_head(title: str, path: Path, rec: dict) -> list[str]:
    """A CPU record's heading and the start of its first line: record, command, machine, CPU
    family/model/stepping (the caller goes on with ``; ...`` or ``. ...``)."""
    m = rec.get("machine", {})
    return [f"## {title}, {_machine_short(rec)}, {str(rec['date'])[:10]}, `{path.name}`", "",
            f"Record `{repo_path(path)}`, command `{rec['command']}`; {machine_line(rec)}; CPU "
            f"family/model/stepping {m.get('cpu_family_model_stepping', '?')}"]


def simd_section(path: Path, rec: dict) -> list[str]:
    """One core's multiply-adds per second in float32 and in bfloat16 (bf16 / fp32's ceiling)."""
    m = rec.get("machine", {})
    out = _cpu_head("Vector multiply-add peak, one core (`benchmarks/simd_peak.py`)", path, rec)
    out[-1] += (f", vector extensions {', '.join(m.get('cpu_simd', [])) or '?'}. "
                f"{rec['accumulators']} independent accumulators, best of {rec['repeats']} runs.")
    out += ["",
           "| instruction | per ns | multiply-adds each | G multiply-adds/s |",
           "| --- | ---: | ---: | ---: |"]
    for name, row in rec["one_core"].items():
        out.append(f"| {name} | {row['instructions_per_ns']:.2f} | "
                   f"{row['macs_per_instruction']} | {row['gmacs_per_s']:.1f} |")
    if rec.get("bf16_over_fp32_peak"):
        out += ["", f"bfloat16 over float32 at peak: **{rec['bf16_over_fp32_peak']:.2f}×**, "
                "the most bfloat16 can do for a product on this CPU (a whole training step, "
                "whose other work stays float32, gets less)."]
    return out + [""]


def gemm_backends_section(path: Path, rec: dict) -> list[str]:
    """One product on each backend the record timed (the libraries' in float32, bfloat16 beside;
    treelm's panels packed at every call, where recorded), against the FMA peak."""
    out = _cpu_head("One float32 product per backend (`benchmarks/gemm_backends.py`)", path, rec)
    out[-1] += (f". G multiply-adds/s a core, best of {rec['repeats']} turns; float32 peak a "
                f"core {rec['peak']['fp32_peak_gmacs_per_s_per_core']} at "
                f"{rec['peak']['fp32_vector_bits']} bits.")
    names = {"torch.mm fp32": "`torch.mm` fp32", "onednn fp32": "oneDNN fp32",
             "torch.mm bf16": "`torch.mm` bf16", "onednn bf16": "oneDNN bf16",
             "panel fp32 (packing included)": "panels fp32, packed each call",
             "panel bf16 (packing included)": "panels bf16, packed each call"}
    cols = [k for k in names if any(k in r for r in rec["results"])]
    out += ["", "| product | threads | " + " | ".join(names[k] for k in cols[:2]) +
            " | oneDNN / `torch.mm` | " + " | ".join(names[k] for k in cols[2:]) + " |",
            "| --- | ---: |" + " ---: |" * (len(cols) + 1)]

    def rate(r: dict, k: str) -> str:
        return f"{r[k]['gmacs_per_s_per_core']:.1f}" if k in r else "–"

    for r in rec["results"]:
        out.append(f"| {r['product']} | {r['threads']} | "
                   + " | ".join(rate(r, k) for k in cols[:2])
                   + f" | {r['onednn_over_mm_fp32']:.2f}× | "
                   + " | ".join(rate(r, k) for k in cols[2:]) + " |")
    return out + [""]


def loop_backends_section(path: Path, rec: dict) -> list[str]:
    """The fused ON-LSTM's training pass with its loop products forced onto each backend."""
    out = [f"## A time loop's products forced per backend (`benchmarks/loop_backends.py`), "
           f"{_machine_short(rec)}, {str(rec['date'])[:10]}, `{path.name}`", "",
           f"Record `{repo_path(path)}`, command `{rec['command']}`; {machine_line(rec)}. "
           f"`onlstm.fused` at the {rec['size']} size, ms a training pass (median of "
           f"{rec['repeats']}) in {rec['rounds']} rounds, the backends taking turns.", "",
           "| loop products on | ms a pass, by round | median |", "| --- | --- | ---: |"]
    for b, runs in rec["ms_per_pass"].items():
        out.append(f"| {b} | {', '.join(f'{x:.1f}' for x in runs)} | "
                   f"{rec['median_ms'][b]:.1f} |")
    return out + [""]


def panel_tiles_section(path: Path, rec: dict) -> list[str]:
    """A time loop's per-step products on every backend, treelm's panels among them."""
    dtype = rec.get("dtype", "float32")
    out = _cpu_head(f"A loop's per-step products in {dtype} per backend "
                    "(`benchmarks/panel_tiles.py`)", path, rec)
    peak = rec["peak"]
    out[-1] += (f". µs a call, best of {rec['repeats']} rounds, the backends taking turns; in "
                f"brackets the fraction of the peak ({peak['one_core_gmacs_per_s']} GMAC/s a "
                f"core × threads); `chosen`: the GEMM choice's rule on these figures for "
                f"{rec['steps']} steps a packing.")
    if rec["peak"].get("amx_one_core_gmacs_per_s"):
        out[-1] += (f" The bfloat16 panels ran on AMX's tiles (`panel_amx()`), whose peak is "
                    f"{rec['peak']['amx_one_core_gmacs_per_s']} GMAC/s a core (`tdpbf16ps`).")
    labels = list(dict.fromkeys(b for r in rec["results"] for b in r["us_per_call"]))
    out += ["", "| product | m×k×n | threads | " + " | ".join(labels) + " | chosen |",
            "| --- | --- | ---: |" + " ---: |" * len(labels) + " --- |"]
    for r in rec["results"]:
        cells = [f"{r['us_per_call'][b]:.1f} ({100 * r['fraction_of_peak'][b]:.0f}%)"
                 if b in r["us_per_call"] else "" for b in labels]
        out.append(f"| {r['shape']} | {r['m']}×{r['k']}×{r['n']} | {r['threads']} | "
                   + " | ".join(cells) + f" | {r['chosen']} |")
    return out + [""]


def loop_schedules_section(path: Path, rec: dict) -> list[str]:
    """The C++ ON-LSTM loops with threads owning rows against a region per step."""
    out = _cpu_head("The ON-LSTM loops' two schedules (`benchmarks/loop_schedules.py`)", path,
                    rec)
    out[-1] += (f". ms a loop on the panels, median of {rec['pairs']} alternating pairs of "
                f"{rec['calls']} calls each, {rec['threads']} threads: a region per step's "
                "product and gate pass → threads owning rows for the whole sequence; the ratio "
                "(below 1: owning rows is faster) and the pairs it won. The loops own rows by "
                "default where the panels are at most 4 MiB.")
    out += ["", "| size | dtype | panels MiB | forward | backward |",
            "| --- | --- | ---: | --- | --- |"]
    for r in rec["results"]:
        cells = [f"{r[k]['ms_steps']:.2f} → {r[k]['ms_rows']:.2f} (×{r[k]['rows_over_steps']}, "
                 f"{r[k]['pairs_rows_faster']}/{rec['pairs']})" for k in ("forward", "backward")]
        out.append(f"| {r['size']} | {r['dtype']} | {r['panel_mib']['forward']:.2f} | "
                   + " | ".join(cells) + " |")
    return out + [""]


def loops_ab_section(path: Path, rec: dict) -> list[str]:
    """Two builds of the C++ ON-LSTM loops taking turns: the change's effect on the loops."""
    out = _cpu_head("A change to the ON-LSTM loops (`benchmarks/loops_ab.py`)", path, rec)
    out[-1] += (f". The old build `{rec['old_build']}` (`{rec['old']}`) → the new "
                f"`{rec['new_build']}`: ms a loop on the panels, median of {rec['rounds']} "
                f"alternating rounds of {rec['calls']} calls each, {rec['threads']} threads; the "
                "ratio new / old (below 1: the new is faster) and the rounds the new won.")
    out += ["", "| size | dtype | same bits | forward | backward |",
            "| --- | --- | --- | --- | --- |"]
    for r in rec["results"]:
        cells = [f"{r[k]['ms_old']:.2f} → {r[k]['ms_new']:.2f} (×{r[k]['new_over_old']}, "
                 f"{r[k]['rounds_new_faster']}/{rec['rounds']})" for k in ("forward", "backward")]
        out.append(f"| {r['size']} | {r['dtype']} | {r['same_bits']} | " + " | ".join(cells)
                   + " |")
    return out + [""]


def product_cache_section(path: Path, rec: dict) -> list[str]:
    """The step's large products alone, hot and cold, against their rate inside the step."""
    out = _cpu_head("The step's products hot, cold and in the step (`benchmarks/product_cache.py`)",
                    path, rec)
    out[-1] += (f". Fraction of the peak of {rec['machine'].get('torch_threads', '?')} cores "
                f"(bf16: `vdpbf16ps`, fp32: `vfmadd`), T·B = {rec['rows']} rows, median of "
                f"{rec['repeats']} calls; cold: after reading (clean) or writing (dirty) "
                f"{rec['flush_bytes'] / 2**20:.0f} MiB; in the step: {rec['steps']} profiled "
                f"training steps of `{rec['config']}` after {rec['warmup']}, every shape.")
    out += ["", "| precision | product | m×k×n | backend | hot | cold, clean | cold, dirty | "
            "in the step |", "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for prec, rows in rec["results"].items():
        for r in rows:
            cells = [f"{100 * r[k]['fraction_of_peak']:.0f}%" if k in r else ""
                     for k in ("hot", "cold, clean", "cold, dirty", "in the step")]
            out.append(f"| {prec} | {r['product']} | {r['m']}×{r['k']}×{r['n']} | "
                       f"{r.get('backend', '?')} | " + " | ".join(cells) + " |")
    if rec.get("step_split"):
        out += ["", "The profiled step's time per token in three parts: µs, share of the step, "
                "fraction of the peak they ran at, and µs above their time at the peak.", "",
                "| precision | part | µs a token | share | MMAC a token | of the peak | "
                "µs above the peak |", "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for prec, parts in rec["step_split"].items():
            for part, r in parts.items():
                frac = f"{100 * r['fraction_of_peak']:.0f}%" if "fraction_of_peak" in r else ""
                out.append(f"| {prec} | {part} | {r['us_per_token']:.2f} | "
                           f"{100 * r['share']:.0f}% | {r.get('mmac_per_token', '')} | {frac} | "
                           f"{r['above_peak_us_per_token']:.2f} |")
        for prec, parts in rec["step_split"].items():
            top = parts["everything else"].get("top_ops_us_per_token", {})
            if top:
                out += ["", f"{prec}, everything else, the costliest operators (µs a token): "
                        + ", ".join(f"`{k}` {v}" for k, v in top.items()) + "."]
    return out + [""]


def run_vs_step_section(path: Path, rec: dict) -> list[str]:
    """A short training's own steps rate against step_profile's, alternating."""
    out = _cpu_head("A training's steps against the step alone (`benchmarks/run_vs_step.py`)",
                    path, rec)
    out[-1] += (f". `{rec['config']}` for {rec['units']:,} tokens (its steps' own account, the "
                "first steps included) and `step_profile.py` (after 300 warm-up steps), "
                f"alternating; median run / step **{rec['median_run_over_step']}**.")
    out += ["", "| pair | order | run tokens/s | step tokens/s | run / step |",
            "| ---: | --- | ---: | ---: | ---: |"]
    for i, p in enumerate(rec["pairs"], 1):
        out.append(f"| {i} | {', '.join(p['order'])} | {p['run']['tokens_per_s']:,.0f} | "
                   f"{p['step']['tokens_per_s']:,.0f} | {p['run_over_step']} |")
    return out + [""]


def step_profile_section(path: Path, rec: dict) -> list[str]:
    """Where a training step's time goes, per config: its phases and top operators per token."""
    res = rec["results"]
    last = res[-1]["config"]
    out = [f"## Where a training step's time goes (`benchmarks/step_profile.py`), "
           f"{_machine_short(rec)}, {str(rec['date'])[:10]}, `{path.name}`", "",
           f"Record `{repo_path(path)}`, command `{rec['command']}`; {machine_line(rec)}. "
           f"Tokens/s of the training step alone (no validation, no checkpoint), "
           f"{res[0]['steps']} timed steps per config; the last column is against `{last}`.", "",
           "| config | batch × BPTT | optimizer | precision | ms per step | tokens/s | "
           "against the last |", "| --- | --- | --- | --- | ---: | ---: | ---: |"]
    for r in res:
        out.append(f"| `{r['config']}` | {r['batch_size']} × {r['bptt']} | {r['optimizer']} | "
                   f"{r['precision']} | {r['ms_per_step']:.1f} | {r['tokens_per_s']:,.0f} | "
                   f"{r['tokens_per_s_over_last']:.2f}× |")
    if (peak := rec.get("peak")):
        out += ["", f"Against the FMA peak (`simd_peak`'s loops, measured by the script: "
                f"{peak['fp32_peak_gmacs_per_s_per_core']} GMAC/s a core in fp32 at "
                f"{peak['fp32_vector_bits']} bits, {peak['bf16_peak_gmacs_per_s_per_core']} in "
                f"bf16 `vdpbf16ps`" + (f", {peak['amx_bf16_peak_gmacs_per_s_per_core']} on AMX "
                                       f"tiles (`tdpbf16ps`)"
                                       if peak.get("amx_bf16_peak_gmacs_per_s_per_core") else "")
                + f"; × {rec['torch_threads']} threads): " + "; ".join(
                    f"`{r['config']}` {r['precision']} {r['train_mmac_per_token']} MMAC a token,"
                    f" {r['gmacs_per_s']} GMAC/s, {100 * r['fraction_of_fp32_peak']:.0f}% of "
                    f"the fp32 peak" + (f", {100 * r['fraction_of_bf16_peak']:.0f}% of the bf16 "
                                        f"peak" if "fraction_of_bf16_peak" in r else "")
                    + (f", {100 * r['fraction_of_amx_peak']:.0f}% of the AMX peak"
                       if "fraction_of_amx_peak" in r else "")
                    for r in res if "gmacs_per_s" in r) + "."]
    out += ["", "Each phase, µs per token (share of the step):", "",
            "| config | " + " | ".join(res[0]["phases"]) + " |",
            "| --- |" + " ---: |" * len(res[0]["phases"])]
    for r in res:
        out.append(f"| `{r['config']}` | " + " | ".join(
            f"{x['us_per_token']:.1f} ({100 * x['share']:.0f}%)" for x in r["phases"].values())
            + " |")
    for r in res:
        out += ["", f"Top operators of `{r['config']}` by self time (µs per token, calls per "
                "step, share): " + "; ".join(
                    f"`{o['op']}` {o['us_per_token']:.1f} ({o['calls_per_step']:g}, "
                    f"{100 * o['share']:.0f}%)" for o in r["top_ops"]) + "."]
        if r.get("products_by_shape"):
            out += ["", "Its matrix products by operand shapes (µs per token, calls per step, "
                    "share of the step): " + "; ".join(
                        f"`{o['op']}` {' · '.join('×'.join(map(str, sh)) for sh in o['shapes'])}"
                        f" {o['us_per_token']:.1f} ({o['calls_per_step']:g}, "
                        f"{100 * o['share']:.0f}%)" for o in r["products_by_shape"]) + "."]
    return out + [""]


def step_ab_section(path: Path, rec: dict) -> list[str]:
    """A change to the step (or, with ``validations``, to the validation) against the code
    before it, interleaved rounds."""
    over = " ".join(rec["overrides"]) or "no overrides"
    n = rec.get("validations", 0)
    what = "validation" if n else "step"
    out = _cpu_head(f"A {what} change against the code before it (`benchmarks/step_ab.py`)",
                    path, rec)
    timed = (f"{n} validations after {rec['warmup']} steps" if n else
             f"{rec['steps']} steps after {rec['warmup']}")
    out[-1] += (f". `{rec['config']}` ({over}): {rec['old']['commit']} against "
                f"{rec['new']['commit']}, {timed} in each of "
                f"{len(rec['rounds'])} rounds, the order alternating; median new / old "
                f"**{rec['median_new_over_old']:.3f}**, new faster in {rec['rounds_new_faster']} "
                f"of {len(rec['rounds'])}.")
    if n:
        out[-1] += (" Tokens/s: the valid split's tokens and the dev trees' words a second of "
                    "validation; seconds per validation, the perplexity then the trees.")
        out += ["", "| round | old tokens/s | new tokens/s | new / old | old s (ppl, trees) | "
                "new s (ppl, trees) |", "| ---: | ---: | ---: | ---: | --- | --- |"]
        for i, r in enumerate(rec["rounds"], 1):
            o, w = r["old"], r["new"]
            out.append(f"| {i} | {o['tokens_per_s']:,.0f} | {w['tokens_per_s']:,.0f} | "
                       f"{r['new_over_old']:.3f} | {o['ppl_seconds']}, {o['trees_seconds']} | "
                       f"{w['ppl_seconds']}, {w['trees_seconds']} |")
        return out + [""]
    out += ["", "| round | old tokens/s | new tokens/s | new / old | page faults a step "
            "(old, new) |", "| ---: | ---: | ---: | ---: | --- |"]
    for i, r in enumerate(rec["rounds"], 1):
        out.append(f"| {i} | {r['old']['tokens_per_s']:,.0f} | {r['new']['tokens_per_s']:,.0f} | "
                   f"{r['new_over_old']:.3f} | {r['old']['page_faults_per_step']:,}, "
                   f"{r['new']['page_faults_per_step']:,} |")
    return out + [""]


def step_toggle_section(path: Path, rec: dict) -> list[str]:
    """A switch of the model timed inside one process, the same batches at both values."""
    over = " ".join(rec["overrides"]) or "no overrides"
    n = len(rec["rounds"])
    out = _cpu_head("A step switch timed in one process (`benchmarks/step_toggle.py`)",
                    path, rec)
    out[-1] += (f". `{rec['config']}` ({over}): `{rec['attr']}` = {rec['a']} (a) against "
                f"{rec['b']} (b), the same {rec['steps']} batches at each in each of {n} "
                f"rounds after {rec['warmup']} steps, the order alternating; median b / a "
                f"**{rec['median_b_over_a']:.3f}**, b faster in {rec['rounds_b_faster']} of {n}.")
    out += ["", "| round | a tokens/s | b tokens/s | b / a |", "| ---: | ---: | ---: | ---: |"]
    out += [f"| {i} | {r['a']:,.0f} | {r['b']:,.0f} | {r['b_over_a']:.3f} |"
            for i, r in enumerate(rec["rounds"], 1)]
    return out + [""]


def main(results: Path = RESULTS, doc: Path = DOC) -> None:
    lines = ["# Benchmarks", "", "Generated by `python benchmarks/report.py` from the records in "
             "`benchmarks/results/` (newest first where a benchmark has several); each record "
             "holds the command that produced it and the machine it ran on. Every benchmark ran "
             "alone on the machine. Records name configs as they were: in every record made "
             "before 2026-11-28's adoption of the adaptive softmax (issue 49), "
             "`configs/ptb-onlstm-trees.yaml` had the full softmax, today's "
             "`configs/ptb-onlstm-trees-softmax.yaml`.", ""]
    cells = every("cells", results)     # one section per machine / date: Intel and AMD side by
    for c in [c for c in cells if not on_gpu(c[1])] + [c for c in cells if on_gpu(c[1])]:
        lines += cells_section(*c)      # side, then the GPUs'
    for b in every("lm_budget", results):
        lines += budget_section(*b)
    for r in every("precision", results):
        lines += precision_section(*r)
    for r in every("simd_peak", results):
        lines += simd_section(*r)
    for r in every("gemm_backends", results):
        lines += gemm_backends_section(*r)
    for r in every("loop_backends", results):
        lines += loop_backends_section(*r)
    for r in every("panel_tiles", results):
        lines += panel_tiles_section(*r)
    for r in every("loop_schedules", results):
        lines += loop_schedules_section(*r)
    for r in every("loops_ab", results):
        lines += loops_ab_section(*r)
    for r in every("step_profile", results):
        lines += step_profile_section(*r)
    for r in every("product_cache", results):
        lines += product_cache_section(*r)
    for path, rec in every("run_vs_step", results):
        lines += run_vs_step_section(path, rec)
    for path, rec in every("validation_floor", results):
        lines += simple_section(
            f"A validation's floor (`benchmarks/validation_floor.py`), {_machine_short(rec)}, "
            f"{rec['precision']}, `{path.name}`", path, rec,
            ["train_time_record", "valid_tokens", "dev_tree_words", "dev_tree_positions_read",
             "dev_tree_positions_padded", "gmac", "peak_gmacs_per_s",
             "floor_seconds_per_validation", "validations", "run_seconds", "floor_share_of_run",
             "measured_seconds_per_validation", "measured_share_of_run",
             "measured_fraction_of_peak"])
    for r in every("step_ab", results):
        lines += step_ab_section(*r)
    for r in every("step_toggle", results):
        lines += step_toggle_section(*r)
    for r in every("output_layer", results):
        lines += output_layer_section(*r)
    if (times := every("train_time", results)):
        lines += train_time_section(times)
    for r in every("study_throughput", results):
        lines += study_throughput_section(*r)
    if (p := newest("serve_latency", results)):
        lines += simple_section("`treelm serve` parse latency (`benchmarks/serve_latency.py`)", *p,
                                ["median_ms", "p95_ms", "words", "requests", "target_median_ms"])
    if (p := newest("parse_speed", results)):
        lines += simple_section("Parsing speed (`benchmarks/parse_speed.py`)", *p,
                                ["sentences_per_second", "levels_only_sentences_per_second",
                                 "mean_words", "n_sentences", "batch_size"])
    if (r := newest("kill_resume", results)):
        lines += simple_section("SIGKILL at random moments, then resume "
                                "(`tools/kill_resume.py`)", *r,
                                ["config", "trials", "loadable", "identical",
                                 "kills_in_checkpoint_writes", "kills_in_cleanup",
                                 "kills_in_log_writes"])
    if (r := newest("side_by_side", results)):
        lines += side_by_side_section(*r)
    doc.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    print(f"wrote {doc}")


def side_by_side_section(path: Path, rec: dict) -> list[str]:
    """A training alone and two started together, per OpenMP setting."""
    out = ["## Two trainings side by side (`benchmarks/side_by_side.py`)", "",
           f"Record `{repo_path(path)}`, command `{rec['command']}`; {machine_line(rec)}. "
           f"`{rec['config']}`, {rec['tokens']:,} training tokens per run; tokens/s of the "
           f"training steps (validation left out).", "",
           "| setting | what | alone tokens/s | two at once, each | each / alone |",
           "| --- | --- | --- | --- | --- |"]
    for name, e in rec["settings"].items():
        each = " + ".join(f"{x:,.0f}" for x in e["pair_tok_s_each"])
        out.append(f"| `{name}` | {e['what']} | {e['alone_tok_s']:,.0f} | {each} | "
                   f"{e['pair_min_ratio']:.2f} (lower) |")
    return out + [""]


if __name__ == "__main__":
    main()
