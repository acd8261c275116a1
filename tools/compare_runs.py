"""Do two runs of the same config compute the same thing? Loss curves step by step, validation
scores, speed and (optionally) the final weights.

    .venv/bin/python tools/compare_runs.py --name NAME RUN_A RUN_B [--weights]
        [--note TEXT]

Used for changes that must not change behaviour (two commits trained with the same seed and a
step-deterministic schedule) and for interrupted-and-resumed runs against an uninterrupted one.
Compares the logged training losses at every step both runs logged, the validation scores at
every step both runs validated, tokens/s (tokens over the run's own training clock), and with
``--weights`` the last checkpoint's weights bit for bit (a run must have ended at the same step).

Writes ``benchmarks/results/compare_runs-<YYYYMMDD>.json``, entries merged by ``--name``.

It lives in ``tools/``, not ``benchmarks/``: it checks that two runs compute alike and measures
no speed; its record goes where the benchmarks' go (``benchmarks/common.py``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from common import write_result  # noqa: E402

from treelm.rundir.files import read_metrics  # noqa: E402


def _steps(run: Path, event: str, key: str) -> dict[int, float]:
    return {m["step"]: m[key] for m in read_metrics(run, event) if key in m}


def compare(a: Path, b: Path, weights: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": [str(a), str(b)]}
    ta, tb = _steps(a, "train", "loss"), _steps(b, "train", "loss")
    common = sorted(set(ta) & set(tb))
    out["train_steps_compared"] = len(common)
    out["train_losses_identical"] = bool(common) and all(ta[s] == tb[s] for s in common)
    out["train_max_abs_diff"] = max((abs(ta[s] - tb[s]) for s in common), default=None)
    primary = next((k for k in ("ppl", "bpc", "f1", "accuracy", "loss")
                    if k in (read_metrics(a, "valid") or [{}])[0]), "loss")
    va, vb = _steps(a, "valid", primary), _steps(b, "valid", primary)
    out["valid_metric"] = primary
    out["valid_common"] = [[s, va[s], vb[s]] for s in sorted(set(va) & set(vb))]
    for name, run in (("a", a), ("b", b)):
        done = read_metrics(run, "done")[-1]
        out[f"{name}_steps"], out[f"{name}_tokens"] = done["step"], done["tokens"]
        out[f"{name}_tokens_per_s"] = round(done["tokens"] / done["elapsed"], 1)
    out["speed_ratio_b_over_a"] = round(out["b_tokens_per_s"] / out["a_tokens_per_s"], 4)
    if weights:
        import torch

        from treelm.run import load_run

        sa = load_run(a, "last").model.state_dict()
        sb = load_run(b, "last").model.state_dict()
        out["weights_identical"] = all(torch.equal(sa[k], sb[k]) for k in sa)
        out["weights_max_abs_diff"] = max((sa[k].float() - sb[k].float()).abs().max().item()
                                          for k in sa)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    ap.add_argument("--name", required=True, help="the entry's name in the record")
    ap.add_argument("--weights", action="store_true", help="also compare the last weights")
    ap.add_argument("--note", help="a remark stored with the entry")
    args = ap.parse_args()
    entry = compare(args.run_a, args.run_b, args.weights)
    if args.note:
        entry["note"] = args.note
    write_result("compare_runs", {"entries": {args.name: entry}}, merge_key="entries",
                 folder="tools")


if __name__ == "__main__":
    main()
