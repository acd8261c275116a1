"""Count the parameters of the character-level configs (``configs/ptb-char-*-{1m,5m}.yaml``), or
of any configs given.

    .venv/bin/python benchmarks/count_params.py [--vocab 50] [--size 1m|5m] [CONFIG ...]
        [--dims KEY=VALUE ...]

Builds each config's model for a vocabulary of ``--vocab`` symbols (50 by default: PTB's 49
characters and ``<eos>``; the ptb-char vocabulary also holds an unused ``<unk>``, so 51 ids) and
the other sizes its task gives the model (``--dims``, e.g. ``n_classes=10 pad_id=0`` for ListOps'
classifier, whose vocabulary is 16), and prints the counts and their spread around the mean.
Exit status 1 if one is more than 5% off.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOLERANCE = 0.05


def count(config: str | Path, vocab: int = 50, dims: dict[str, int] | None = None) -> int:
    from treelm.config import load_config
    from treelm.models import build_model

    model = build_model(load_config(config).get("model", {}), vocab_size=vocab, **(dims or {}))
    return sum(p.numel() for p in model.parameters())


def default_configs(size: str = "1m") -> list[Path]:
    return sorted((ROOT / "configs").glob(f"ptb-char-*-{size}.yaml"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="*", help="default: configs/ptb-char-*-SIZE.yaml")
    ap.add_argument("--size", choices=["1m", "5m"], default="1m",
                    help="which equal-size family to count when no config is given (1m)")
    ap.add_argument("--vocab", type=int, default=50, help="vocabulary size (50)")
    ap.add_argument("--dims", nargs="+", default=[], metavar="KEY=VALUE",
                    help="other sizes the model takes from its task, e.g. n_classes=10 pad_id=0")
    args = ap.parse_args(argv)
    if any("=" not in d for d in args.dims):
        ap.error("--dims takes KEY=VALUE pairs, e.g. n_classes=10")
    dims = {k: int(v) for k, v in (d.split("=", 1) for d in args.dims)}
    paths = [Path(c) for c in args.configs] or default_configs(args.size)
    counts = {p.stem: count(p, args.vocab, dims) for p in paths}
    mean = sum(counts.values()) / len(counts)
    print(f"{'config':<24} {'parameters':>11}  vs mean")
    for name, n in counts.items():
        print(f"{name:<24} {n:>11,}  {100 * (n / mean - 1):+5.1f}%")
    worst = max(abs(n / mean - 1) for n in counts.values())
    print(f"vocabulary {args.vocab}; largest deviation from the mean {100 * worst:.1f}% "
          f"(tolerance {100 * TOLERANCE:.0f}%)")
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
