"""A change to the training step that a model attribute switches, timed inside one process: the
same batches stepped with the attribute at one value, then at the other, round after round.

    python benchmarks/step_toggle.py --attr tied [--a false] [--b true] [--rounds 16]
        [--steps 25] [--warmup 150] [--config configs/ptb-onlstm-trees.yaml] [--out PATH]
        [key=value ...]

``--attr``: a dotted attribute path on the trainer's model (``tied``: :class:`treelm.models.lm.
RNNLM`'s switch between one gradient of the tied embedding and autograd's two), or on a module
of treelm (``treelm.kernels.cpu_cache.switch.on``: the caching CPU allocator); ``--a`` and
``--b`` its two values (Python literals, ``true``/``false`` allowed). Each round takes ``--steps``
batches and steps them at ``a`` and then again at ``b`` (the order alternates from round to
round), so both sides run the same batch lengths; the verdict is the median of the rounds'
ratios b / a. Training goes on through both sides: a step's cost does not depend on the values of
the weights.

Why beside ``step_ab.py``: two processes of one code differ by a few percent on a shared VM (the
process that runs second in a ``step_ab`` round was the faster one in most rounds of
``step_ab-zen5-bf16-tied-20261129.json``), more than a change that removes one pass over a
16 MB tensor gains. Here both sides share the process, its heap, its measured GEMM backends and
its threads, so the change is all that differs. It can only time a change that a switch turns
on and off in place; a change of code needs ``step_ab.py``. Run it alone: it is a timing.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from treelm import omp  # noqa: E402

omp.configure()     # set before torch loads libgomp, as treelm train sets it
from common import endless, step_trainer, write_result  # noqa: E402


def literal(text: str) -> Any:
    """A Python literal, with ``true``/``false``/``none`` as YAML would read them."""
    words = {"true": True, "false": False, "none": None}
    return words[text.lower()] if text.lower() in words else ast.literal_eval(text)


def owner(model: Any, attr: str) -> tuple[Any, str]:
    """The object holding the dotted ``attr`` and the attribute's last name: an attribute of
    ``model``, or, where ``attr`` starts with ``treelm.``, of the module it names
    (``treelm.kernels.cpu_cache.switch.on``)."""
    *path, name = attr.split(".")
    obj = model
    if path and path[0] == "treelm":
        for i in range(len(path), 0, -1):         # the longest importable module prefix
            try:
                obj = importlib.import_module(".".join(path[:i]))
            except ImportError:
                continue
            path = path[i:]
            break
    for part in path:
        obj = getattr(obj, part)
    if not hasattr(obj, name):
        raise SystemExit(f"step_toggle: the model has no attribute {attr!r}")
    return obj, name


def toggle(config: str, overrides: list[str], attr: str, values: dict[str, Any], rounds: int,
           steps: int, warmup: int) -> dict[str, Any]:
    """Rounds of the same ``steps`` batches at each value: their tokens/s and ratios."""
    with tempfile.TemporaryDirectory() as tmp:
        tr = step_trainer(config, overrides, tmp)
        obj, name = owner(tr.model, attr)
        batches = endless(tr)
        for i in range(warmup):     # every value warmed up: its products measured, its buffers
            setattr(obj, name, values["a" if i % 2 == 0 else "b"])
            tr.step(next(batches), tr.tc.lr)
        out = []
        for i in range(rounds):
            block = [next(batches) for _ in range(steps)]
            tokens = sum(b.size for b in block)
            order = ("a", "b") if i % 2 == 0 else ("b", "a")
            rate = {}
            for side in order:
                setattr(obj, name, values[side])
                t0 = time.perf_counter()
                for batch in block:
                    tr.step(batch, tr.tc.lr)
                rate[side] = round(tokens / (time.perf_counter() - t0), 1)
            out.append({"order": list(order), "tokens": tokens, **rate,
                        "b_over_a": round(rate["b"] / rate["a"], 4)})
            print(f"round {i + 1}: a {rate['a']:,.0f}  b {rate['b']:,.0f} tokens/s "
                  f"({rate['b'] / rate['a']:.3f})", file=sys.stderr)
        return {"precision": tr.choice.precision, "rounds": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attr", required=True, help="dotted attribute of the model to switch")
    ap.add_argument("--a", default="false", help="its first value (a Python literal)")
    ap.add_argument("--b", default="true", help="its second value")
    ap.add_argument("--config", default="configs/ptb-onlstm-trees.yaml")
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("overrides", nargs="*", help="config overrides (key=value)")
    args = ap.parse_args()
    values = {"a": literal(args.a), "b": literal(args.b)}
    got = toggle(args.config, args.overrides, args.attr, values, args.rounds, args.steps,
                 args.warmup)
    ratios = [r["b_over_a"] for r in got["rounds"]]
    write_result("step_toggle", {
        "config": args.config, "overrides": args.overrides, "attr": args.attr,
        "a": values["a"], "b": values["b"], "warmup": args.warmup, "steps": args.steps,
        **got,
        "median_a_tokens_per_s": statistics.median(r["a"] for r in got["rounds"]),
        "median_b_tokens_per_s": statistics.median(r["b"] for r in got["rounds"]),
        "median_b_over_a": statistics.median(ratios),
        "rounds_b_faster": sum(x > 1 for x in ratios),
    }, path=args.out)


if __name__ == "__main__":
    main()
