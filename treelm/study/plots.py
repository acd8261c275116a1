"""The pictures of a study's page, drawn from its record (matplotlib's Agg canvas, no display).

- tree F1 against training tokens: one panel per variant, a colour per layer, the official rule
  solid and the split rule dashed; the mean over seeds bold (:func:`curves.mean_series`), each
  seed faint; right-branching and the official rule's control on the dev sentences across;
- a validation score (perplexity, loss, ...) against training tokens: one panel per score, a
  colour per variant, mean bold and seeds faint; perplexity on a log scale;
- a tree (a sentence's, or its gold one) through :func:`treelm.syntax.render.plot_tree`. A tree
  with words outside Latin script is drawn only where a CJK font is installed (without one
  matplotlib draws empty boxes); the page links it either way, so its text does not depend on
  the machine's fonts.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from treelm.study.curves import SCORE_NAMES, kind, mean_series, series, tree_keys

RULE_STYLE = {"official": "-", "split": "--"}


def _f1(b: dict[str, Any]) -> float:
    f = b["sentence_f1"]
    return f["mean"] if isinstance(f, dict) else f


def _runs_of(record: dict[str, Any], variant: str) -> list[dict[str, Any]]:
    return sorted((r for r in record["runs"].values() if r["variant"] == variant),
                  key=lambda r: r["seed"])


def _variants(record: dict[str, Any]) -> list[str]:
    return [v for v in record["study"]["variants"] if _runs_of(record, v)]


def _save(fig: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight", facecolor="white")


def plot_tree_f1(record: dict[str, Any], path: Path) -> None:
    """Dev sentence F1 of every layer and rule against tokens, a panel per variant."""
    from matplotlib.figure import Figure

    variants = _variants(record)
    keys = tree_keys([r["curve"] for r in record["runs"].values()])
    layers = sorted({k.split("/L")[1] for k in keys}, key=int)
    colours = {k: f"C{i}" for i, k in enumerate(layers)}
    dev = (record.get("baselines") or {}).get("dev", {}).get("baselines", {})
    cols = min(3, len(variants))          # (the screen's nine recipes: three rows of three)
    rows = -(-len(variants) // cols)
    fig = Figure(figsize=(5.0 * cols + 2.0, 3.8 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=True).ravel()
    for ax, v in zip(axes, variants):
        runs = _runs_of(record, v)
        for key in keys:
            rule, layer = key.split("/L")
            style = RULE_STYLE.get(rule, ":")
            for r in runs if len(runs) > 1 else []:
                pts = series(r["curve"], key)
                if pts:
                    ax.plot([t / 1e6 for t, _ in pts], [100 * x for _, x in pts], style,
                            color=colours[layer], lw=0.7, alpha=0.3)
            mean = mean_series([r["curve"] for r in runs], key)
            if mean:
                ax.plot([t / 1e6 for t, _ in mean], [100 * x for _, x in mean], style,
                        color=colours[layer], lw=1.8, marker="." if rule == "official" else None,
                        ms=4, label=f"layer {layer}, {rule}")
        if "right_branching" in dev:
            rb = 100 * _f1(dev["right_branching"])
            ax.axhline(rb, color="black", lw=1.0, ls=":", label=f"right-branching {rb:.1f}")
        if "random_levels_official" in dev:
            c = 100 * _f1(dev["random_levels_official"])
            ax.axhline(c, color="grey", lw=1.0, ls="-.", label=f"rule control, official {c:.1f}")
        ax.set_title(f"{v} ({len(runs)} seed{'s' * (len(runs) != 1)})")
        ax.grid(alpha=0.3)
    for ax in axes[len(variants):]:
        ax.set_visible(False)
    for ax in axes[::cols]:
        ax.set_ylabel(f"sentence F1 on {record['study']['score']['trees']['dev']} (%)")
    for ax in axes[len(variants) - cols:len(variants)]:
        ax.set_xlabel("training tokens (millions)")
    _legend(fig, axes)
    _save(fig, path)


def _legend(fig: Any, axes: Sequence[Any]) -> None:
    """One legend for every panel (a layer only some variants have included), right of them."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    fig.legend(list(seen.values()), list(seen), fontsize=7, loc="outside right upper")


def plot_scores(record: dict[str, Any], path: Path, keys: Sequence[str]) -> None:
    """Validation ``keys`` against tokens: a panel per key, a colour per variant."""
    from matplotlib.figure import Figure

    variants = _variants(record)
    fig = Figure(figsize=(6.0 * len(keys) + 1.5, 4.0), layout="constrained")
    axes = fig.subplots(1, len(keys), squeeze=False)[0]
    for ax, key in zip(axes, keys):
        for i, v in enumerate(variants):
            runs = _runs_of(record, v)
            for r in runs if len(runs) > 1 else []:
                pts = series(r["curve"], key)
                if pts:
                    ax.plot([t / 1e6 for t, _ in pts], [x for _, x in pts], color=f"C{i}",
                            lw=0.7, alpha=0.3)
            mean = mean_series([r["curve"] for r in runs], key)
            if mean:
                ax.plot([t / 1e6 for t, _ in mean], [x for _, x in mean], color=f"C{i}",
                        lw=1.8, marker=".", ms=4, label=v)
        if key in ("ppl", "bpc") or key.endswith("ppl"):
            from matplotlib.ticker import FormatStrFormatter

            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FormatStrFormatter("%.0f"))
            ax.yaxis.set_minor_formatter(FormatStrFormatter("%.0f"))
        ax.set_xlabel("training tokens (millions)")
        ax.set_ylabel(f"{kind(key)} {SCORE_NAMES.get(key, key)}")
        ax.grid(alpha=0.3)
    _legend(fig, axes)
    _save(fig, path)


def needs_cjk(tree: Any) -> bool:
    """Whether ``tree``'s words hold characters the default font lacks (CJK and the like)."""
    from treelm.syntax.trees import tree_leaves

    return any(ord(ch) > 0x2FFF for w in tree_leaves(tree) for ch in str(w))


def cjk_font() -> str | None:
    """An installed font with Chinese glyphs (:data:`treelm.syntax.render.CJK_FONTS`), if any."""
    from matplotlib import font_manager

    from treelm.syntax.render import CJK_FONTS

    installed = {f.name for f in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FONTS if name in installed), None)


def draw_tree(tree: Any, path: Path, title: str) -> bool:
    """Draw ``tree`` to ``path``; False (and a line on stderr) where its words need a CJK font
    and none is installed: the picture already there, if any, is left as it is."""
    from treelm.syntax.render import plot_tree

    if needs_cjk(tree) and cjk_font() is None:
        print(f"treelm study: {path}: not drawn: no CJK font installed (Debian: "
              f"fonts-noto-cjk; then clear matplotlib's font cache)", file=sys.stderr)
        return False
    plot_tree(tree, path, title=title)
    return True
