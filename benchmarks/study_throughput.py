"""How many runs at once, on how many threads each, make the most of a machine (issue 43): the
measure behind ``treelm study``'s local launcher (``treelm/study/launch.py:local_plan``).

    python benchmarks/study_throughput.py [--config configs/ptb-onlstm-trees.yaml]
        [--tokens 200000] [--plans 1x2 2x1] [--rounds 2] [--isa avx2] [--out FILE.json]
        [key=value ...]

A plan ``NxT`` trains ``N`` copies of ``--config`` at once, each with ``train.threads=T`` and
``OMP_NUM_THREADS=T`` (as the launcher pins a run's threads), for ``--tokens`` training tokens
each; a run's speed is read from its metrics log (:func:`side_by_side.speed`: its ``train``
events' tokens/s, the first, with start-up, left out). The machine's throughput under a plan is
the sum of its runs' speeds; the record gives each plan's total against the first plan's (one run
alone on every core), over ``--rounds`` alternations, and the plan ``local_plan`` picks for a
study of many runs on this machine with its ratio: the launcher's target is >= 0.9x. Run it alone
on the machine (anything else at ``chrt --idle 0``): it is a timing. ``--isa avx2``: every run on
the AVX2 path (on an AVX-512 CPU the proxy of ``benchmarks/train_time.py --isa``, said so in the
record).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import ISA_PROXIES, isa_environment, isa_record, machine_info, write_result  # noqa: E402
from side_by_side import trial  # noqa: E402


def parse_plan(text: str) -> tuple[int, int]:
    n, _, t = text.partition("x")
    if not (n.isdigit() and t.isdigit() and int(n) >= 1 and int(t) >= 1):
        raise argparse.ArgumentTypeError(f"a plan is NxT (runs x threads), got {text!r}")
    return int(n), int(t)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from treelm.study.launch import local_plan
    from treelm.study.spec import Launcher

    cores = len(os.sched_getaffinity(0))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="configs/ptb-onlstm-trees.yaml")
    ap.add_argument("--tokens", type=int, default=200_000, help="training tokens per run")
    ap.add_argument("--plans", nargs="+", type=parse_plan,
                    default=[(1, cores), (cores, 1)] if cores > 1 else [(1, 1), (2, 1)],
                    help="NxT: N runs at once on T threads each; the first is the reference")
    ap.add_argument("--rounds", type=int, default=2, help="alternations of the plans")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--isa", choices=sorted(ISA_PROXIES),
                    help="every run on this instruction set's path (the AVX2 proxy on AVX-512)")
    ap.add_argument("overrides", nargs="*", metavar="key=value")
    args = ap.parse_args(argv)
    if args.isa:
        isa_environment(ap, args.isa, from_python=argv is not None)
    plans: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="study_throughput-") as d:
        for rnd in range(args.rounds):
            for n, t in args.plans:
                runs = trial(args, Path(d), {"OMP_NUM_THREADS": str(t)},
                             (f"train.threads={t}",), n)
                entry = plans.setdefault(f"{n}x{t}", {"runs_at_once": n, "threads": t,
                                                      "rounds": []})
                entry["rounds"].append([r["tok_s"] for r in runs])
                print(f"round {rnd + 1} {n}x{t}: " + " + ".join(f"{r['tok_s']:.0f}" for r in runs)
                      + " tok/s", file=sys.stderr, flush=True)
    ref = None
    for entry in plans.values():
        entry["total_tok_s"] = statistics.fmean(sum(r) for r in entry["rounds"])
        entry["each_tok_s"] = statistics.fmean(x for r in entry["rounds"] for x in r)
        ref = ref or entry["total_tok_s"]
        entry["vs_first"] = entry["total_tok_s"] / ref
    jobs, threads = local_plan(Launcher(), runs=10)
    chosen = f"{jobs}x{threads}"
    record = {"config": args.config, "tokens": args.tokens, "overrides": args.overrides,
              "cores": cores, "plans": plans,
              "launcher": {"plan_for_10_runs": chosen,
                           "vs_alone": plans[chosen]["vs_first"] if chosen in plans else None,
                           "target": 0.9},
              **(isa_record(args.isa) if args.isa else {}),
              "machine": machine_info()}
    out = write_result("study_throughput", record, path=args.out, echo=False)
    print(json.dumps({k: out[k] for k in ("plans", "launcher")}, indent=2))
    return out


if __name__ == "__main__":
    main()
