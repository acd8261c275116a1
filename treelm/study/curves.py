"""What a study's validation curves say, as numbers the page writes and plots draw.

A run's curve is its validations in order, each ``{tokens, minutes, <score>: value}`` (tree F1
as ``<rule>/L<k>``). The seeds of a variant validate at nearly the same tokens (multiples of
``eval_every_units``, plus each epoch's end): where every seed has as many validations, their mean
is taken point by point (tokens and value); else on one grid, the validations of the seed with
the most within the span every seed covers, each seed's value there linearly interpolated.

Where a curve stands at the end is read over windows of a quarter of the tokens it ends at: the
mean of the validations in the last quarter against the mean of those in the quarter before. Within
:data:`LEVEL` of each other the curve has levelled off, and it did so from the first validation
whose trailing window's mean stays within :data:`LEVEL` of the last quarter's to the end.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

#: A curve whose last quarter's mean is within this of the quarter before has levelled off
#: (sentence F1 as a fraction: one point).
LEVEL = 0.01

Curve = Sequence[dict[str, Any]]
#: How pages and plots name a validation score.
SCORE_NAMES = {"ppl": "perplexity", "bpc": "bits per character",
               "tree_loss": "tree loss (train.tree_teacher)"}
#: Terms of training, not of validation, that a curve carries (the window logged before each
#: validation: :data:`treelm.study.score.EXTRA_TERMS`): named "training ..." where drawn.
TRAINING_TERMS = ("tree_loss",)


def kind(key: str) -> str:
    """"training" for a term of training a curve carries, else "validation"."""
    return "training" if key in TRAINING_TERMS else "validation"


def series(curve: Curve, key: str) -> list[tuple[float, float]]:
    """(tokens, value) of every validation that logged ``key``."""
    return [(float(p["tokens"]), float(p[key])) for p in curve
            if isinstance(p.get(key), int | float)]


def mean_series(curves: Sequence[Curve], key: str) -> list[tuple[float, float]]:
    """The mean over ``curves`` of ``key`` on one grid (see the module's docstring); empty when
    a curve lacks ``key``."""
    each = [series(c, key) for c in curves]
    if not each or any(not s for s in each):
        return []
    if len(each) == 1:
        return each[0]
    if len({len(x) for x in each}) == 1:     # the same validations: point by point
        return [(float(np.mean(ts)), float(np.mean(vs)))
                for ts, vs in (zip(*points) for points in zip(*each))]
    lo = max(s[0][0] for s in each)
    hi = min(s[-1][0] for s in each)
    grid = [t for t, _ in max(each, key=len) if lo <= t <= hi]
    values = [np.interp(grid, [t for t, _ in s], [v for _, v in s]) for s in each]
    mean = np.mean(values, axis=0)
    return [(t, float(v)) for t, v in zip(grid, mean)]


def score_keys(curves: Sequence[Curve]) -> list[str]:
    """The curves' scores other than tree F1, in the order first logged."""
    keys: dict[str, None] = {}
    for c in curves:
        for p in c:
            for k, v in p.items():
                if k not in ("tokens", "minutes") and "/L" not in k and isinstance(v, int | float):
                    keys.setdefault(k)
    return list(keys)


def tree_keys(curves: Sequence[Curve]) -> list[str]:
    """The curves' tree F1 keys, official rule first, then by layer."""
    keys = {k for c in curves for p in c for k in p if "/L" in k}
    return sorted(keys, key=lambda k: (k.split("/")[0] != "official", k.split("/")[0],
                                       int(k.split("/L")[1])))


def first_above(curve: Curve, key: str, level: float) -> float | None:
    """Tokens at the first validation whose ``key`` is above ``level`` (None: never)."""
    return next((t for t, v in series(curve, key) if v > level), None)


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summary(points: Sequence[tuple[float, float]], higher: bool = True) -> dict[str, Any]:
    """One series read as the module's docstring says: its first and last values, its best
    (highest, or lowest with ``higher`` false; the first of equals), the last quarter's mean and
    its change on the quarter before (None when that quarter holds no validation), the trend
    (``levelled off``, ``rising``, ``falling``; None without a change) and, levelled off, from
    which tokens."""
    end = points[-1][0]
    window = end / 4
    best = (max(points, key=lambda p: (p[1], -p[0])) if higher
            else min(points, key=lambda p: (p[1], p[0])))
    last = [v for t, v in points if t > end - window]
    before = [v for t, v in points if end - 2 * window < t <= end - window]
    change = None if not before or not last else _mean(last) - _mean(before)  # type: ignore
    out: dict[str, Any] = {"first": points[0], "best": best, "last": points[-1],
                           "window": window, "last_window": _mean(last), "change": change,
                           "trend": None, "level_from": None}
    if change is None:
        return out
    scale = 1.0 if higher else abs(_mean(before) or 1.0)    # perplexity: relative change
    rel = change / scale
    out["trend"] = ("levelled off" if abs(rel) < LEVEL else
                    ("rising" if change > 0 else "falling"))
    if out["trend"] == "levelled off" and higher:
        target = out["last_window"]

        def near(t: float) -> bool:
            trailing = [v for s, v in points if t - window < s <= t]
            return abs(statistics.fmean(trailing) - target) < LEVEL

        steady = [t for t, _ in points if t >= window]
        out["level_from"] = next((t for i, t in enumerate(steady)
                                  if all(near(s) for s in steady[i:])), None)
    return out
