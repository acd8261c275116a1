"""Character-level PTB: train six recurrent cells of equal size for the same wall time.

    python benchmarks/charlm.py --minutes 20                 # the ~1M-parameter family
    python benchmarks/charlm.py --minutes 20 --size 5m       # the ~5M-parameter family
    python benchmarks/charlm.py --minutes 20 --configs configs/ptb-char-elman-1m.yaml \
        --name-suffix=-lr5e-4 train.lr=0.0005                # a variant, kept beside the original
    python benchmarks/charlm.py --minutes 20 --probe-only    # re-sample and re-probe the runs
    python benchmarks/charlm.py --minutes 0.1 --configs configs/ptb-char-lstm-1m.yaml \
        configs/ptb-char-tensor-1m.yaml --runs /tmp/charlm          # smoke test

For each config (default: ``configs/ptb-char-{lstm,gru,elman,onlstm,mrnn,tensor}-SIZE.yaml``,
equal parameter counts within 5%), one after the other and never side by side (two jobs on two cores
halve each other):

1. ``treelm train --config C --out RUNS/<name> --force train.max_minutes=M ...``;
2. ``treelm eval`` of the best checkpoint on valid and on test (bits per character);
3. ``treelm generate`` of a ``--sample-length`` (500) character sample with a fixed seed and
   prompt, at temperature 1 by default (samples as in Sutskever, Martens & Hinton 2011).

The JSON record goes to ``benchmarks/results/charlm-<YYYYMMDD>.json`` (entries of the same day are
merged by config, so configs may be run by separate invocations) with the machine (platform, CPU
model, torch version, threads) and the exact commands; the markdown table with the samples goes to
``docs/charlm.md``, rebuilt from the whole record.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
from common import RESULTS, today, write_result  # noqa: E402
from lm_budget import summarize  # noqa: E402

CELLS = ["lstm", "gru", "elman", "onlstm", "mrnn", "tensor"]
SIZES = {"1m": "~1M", "5m": "~5M"}


def default_configs(size: str) -> list[str]:
    return [f"configs/ptb-char-{c}-{size}.yaml" for c in CELLS]


def family(config_name: str) -> str:
    """'1m' for ptb-char-lstm-1m (and a variant ptb-char-elman-1m-lr5e-4), '5m' for ...-5m,
    'other' for anything else."""
    return next((p for p in config_name.split("-") if p in SIZES), "other")


TREELM = [sys.executable, "-m", "treelm.cli"]
PREFIXES = ["fixi", "breaki"]     # Sutskever, Martens & Hinton (2011): "fixi" -> "n"


def _run(cmd: list[str], capture: bool = False) -> str:
    print("+", shlex.join(cmd), file=sys.stderr, flush=True)
    res = subprocess.run(cmd, check=True, text=True, cwd=ROOT,
                         stdout=subprocess.PIPE if capture else None)
    return res.stdout if capture else ""


def _last_json(text: str) -> dict[str, Any]:
    return json.loads(text.strip().splitlines()[-1])


def _parameters(run: Path) -> tuple[int, str, int]:
    from treelm.run import load_run

    r = load_run(run)
    return (sum(p.numel() for p in r.model.parameters()), r.task.config.model.get("cell", "lstm"),
            len(r.vocab))


def bench_one(cfg: str, args: argparse.Namespace, prev: dict[str, Any] | None) -> dict[str, Any]:
    """Train (unless --skip-train), evaluate, sample and probe one config; ``prev`` is its entry
    in an existing record, whose training figures --skip-train keeps."""
    name = Path(cfg).stem + args.name_suffix
    run = Path(args.runs) / name
    threads = ["--threads", str(args.threads)]
    every = args.eval_every or max(0.5, args.minutes / 6)
    train_cmd = [*TREELM, "train", "--config", cfg, "--out", str(run), "--force",
                 f"train.max_minutes={args.minutes}", f"train.eval_every_minutes={every}",
                 f"train.threads={args.threads}", *args.overrides]
    res: dict[str, Any] = {"config": cfg, "run_dir": str(run), "overrides": args.overrides}
    reuse = bool(prev) and (args.skip_train or args.probe_only)   # keep how the run was trained
    if reuse:
        redo = {"sample", "probe", "commands"}
        if not args.probe_only:
            redo |= {"valid_bpc", "valid_loss", "test_bpc", "test_loss"}
        res.update({k: v for k, v in prev.items() if k not in redo})
        kept = (" train ", " eval ") if args.probe_only else (" train ",)
        commands: list[Any] = [c for c in prev.get("commands", [])
                               if any(k in f" {c} " for k in kept)]
    else:
        t0 = time.perf_counter()
        if not args.skip_train:
            _run(train_cmd)
        res.update(summarize(run, args.minutes))
        res["train_wall_s"] = None if args.skip_train else round(time.perf_counter() - t0, 1)
        commands = [] if args.skip_train else [train_cmd]
    res["parameters"], res["cell"], res["vocab"] = _parameters(run)
    for split in () if reuse and args.probe_only else ("valid", "test"):
        cmd = [*TREELM, "eval", str(run), "--split", split, *threads]
        commands.append(cmd)
        ev = _last_json(_run(cmd, capture=True))
        res[f"{split}_bpc"] = ev["bpc"]
        res[f"{split}_loss"] = ev["loss"]
    gen = [*TREELM, "generate", str(run), "--prompt", args.prompt, "--length",
           str(args.sample_length), "--seed", str(args.seed), "--temperature",
           str(args.temperature), *threads]
    commands.append(gen)
    res["sample"] = _run(gen, capture=True)
    probe = [*TREELM, "probe", str(run), *[a for p in PREFIXES for a in ("--prompt", p)],
             "--top-k", "5", "--format", "json", *threads]
    commands.append(probe)
    res["probe"] = _last_json(_run(probe, capture=True))["prefixes"]
    res["commands"] = [c if isinstance(c, str) else
                       shlex.join(["treelm", *c[3:]] if c[:3] == TREELM else c)
                       for c in commands]
    return res


def _fmt(v: Any, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def _overrides(r: dict[str, Any]) -> str:
    return "".join(f" `{o}`" for o in r.get("overrides") or [])


def _table(cfgs: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "| config | cell | parameters | minutes | characters seen | chars/s | epochs | "
        "valid bpc | test bpc |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, r in sorted(cfgs.items(), key=lambda kv: kv[1].get("test_bpc") or 1e9):
        lines.append(
            f"| `{name}`{_overrides(r)} | {r['cell']} | {r['parameters']:,} | "
            f"{_fmt(r.get('minutes'), 'g')} | "
            f"{_fmt(r.get('tokens_seen'), ',')} | {_fmt(r.get('tokens_per_s'), ',.0f')} | "
            f"{r.get('epochs_completed', 0)} | {_fmt(r.get('valid_bpc'), '.3f')} | "
            f"{_fmt(r.get('test_bpc'), '.3f')} |")
    return lines


def markdown(record: dict[str, Any]) -> str:
    cfgs = record["configs"]
    m = record["machine"]
    lines = [
        "# Character-level Penn Treebank: six recurrent cells at equal size and equal time",
        "",
        f"Generated by `benchmarks/charlm.py` on {record['date']} (record: "
        f"`{record['record']}`). Every model is trained alone for the same wall time with Adam "
        "and gradient-norm clipping (configs `configs/ptb-char-*-1m.yaml` and `-5m.yaml`, "
        "parameter counts within 5% of each other inside a family), then its best checkpoint is "
        "evaluated in bits per character (lower is better).",
        "",
        f"Machine: {m.get('cpu')} ({m.get('cpu_count')} logical CPUs), {m.get('platform')}, "
        f"torch {m.get('torch')}, {record.get('train_threads')} torch threads per job.",
        "",
        "Command: `" + "`, `".join(record.get("commands", [record["command"]])) + "`",
    ]
    groups: dict[str, dict[str, Any]] = {}
    for name, r in cfgs.items():
        groups.setdefault(family(name), {})[name] = r
    for fam in [*SIZES, "other"]:
        if fam in groups:
            title = f"{SIZES[fam]} parameters" if fam in SIZES else "Other configs"
            lines += ["", f"## {title}", "", *_table(groups[fam])]
    probed = {n: r["probe"] for n, r in cfgs.items() if r.get("probe")}
    if probed:
        lines += ["", "## Next character after a prefix (`treelm probe`)", "",
                  "Sutskever, Martens & Hinton (2011) show their MRNN predicting \"n\" after "
                  "\"fixi\". Each prefix is read as the start of a line; the three most likely "
                  "next characters with their probabilities:", "",
                  "| config | " + " | ".join(f"after \"{p}\"" for p in PREFIXES) + " |",
                  "|---|" + "---|" * len(PREFIXES)]
        for name, rows in probed.items():
            cells = []
            for p in PREFIXES:
                nxt = next((r["next"] for r in rows if r["prefix"] == p), [])
                cells.append(", ".join(f"{json.dumps(n['symbol'])} {n['prob']:.2f}"
                                       for n in nxt[:3]))
            lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    s = record["sample_settings"]
    lines += [
        "",
        "The MRNN is the factored multiplicative RNN of Sutskever, Martens & Hinton (2011), "
        "their Eqs. 4-5 with one-hot input and F = H factors, trained here with Adam instead of "
        "Hessian-free optimisation; the Tensor RNN is their Eq. 2 (one H x H matrix per input "
        "character).",
        "",
        "## Samples",
        "",
        f"{s['length']} characters from each model, prompt {json.dumps(s['prompt'])}, "
        f"temperature {s['temperature']}, seed {s['seed']} (`treelm generate`); a line break is "
        "`<eos>`.",
    ]
    for name, r in cfgs.items():
        lines += ["", f"### {name} ({r['cell']}, test {_fmt(r.get('test_bpc'), '.3f')} bpc)", "",
                  "```text", r["sample"].rstrip("\n"), "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, required=True, help="training wall time per config")
    ap.add_argument("--size", choices=list(SIZES), default="1m",
                    help="equal-size family to run when --configs is not given (1m)")
    ap.add_argument("--configs", nargs="+", default=None,
                    help="default: configs/ptb-char-{lstm,gru,elman,onlstm,mrnn,tensor}-SIZE.yaml")
    ap.add_argument("--runs", default="runs/charlm", help="where the run directories go")
    ap.add_argument("--out", type=Path, default=None,
                    help="JSON record (default benchmarks/results/charlm-<YYYYMMDD>.json)")
    ap.add_argument("--doc", type=Path, default=ROOT / "docs/charlm.md",
                    help="markdown table (default docs/charlm.md)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads per job (2)")
    ap.add_argument("--eval-every", type=float, default=None,
                    help="minutes between validations (default: max(0.5, minutes / 6))")
    ap.add_argument("--sample-length", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1234, help="sampling seed")
    ap.add_argument("--prompt", default="the ", help="sample prompt")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--skip-train", action="store_true",
                    help="only evaluate, sample and probe existing run directories (their "
                    "training figures are kept from the record when it has them)")
    ap.add_argument("--probe-only", action="store_true",
                    help="only sample and probe the runs of record entries; keep the rest")
    ap.add_argument("--name-suffix", default="",
                    help="appended to each config's name in the record and run directory, to "
                    "keep a variant (e.g. '-lr5e-4' with train.lr=0.0005) beside the original")
    ap.add_argument("overrides", nargs="*", help="key=value overrides for every config")
    args = ap.parse_args(argv)
    out = args.out or RESULTS / f"charlm-{today()}.json"
    old = json.loads(out.read_text())["configs"] if out.exists() else {}
    results = {}
    for cfg in args.configs or default_configs(args.size):   # one after another, never in parallel
        name = Path(cfg).stem + args.name_suffix
        results[name] = bench_one(cfg, args, old.get(name))
    data = {"record": str(out.relative_to(ROOT) if out.is_relative_to(ROOT) else out),
            "train_threads": args.threads, "minutes": args.minutes,
            "sample_settings": {"length": args.sample_length, "seed": args.seed,
                                "prompt": args.prompt, "temperature": args.temperature},
            "configs": results}
    record = write_result("charlm", data, merge_key="configs", path=out, echo=False)
    args.doc.parent.mkdir(parents=True, exist_ok=True)
    args.doc.write_text(markdown(record), encoding="utf-8")
    print(f"wrote {out} and {args.doc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
