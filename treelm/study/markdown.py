"""The pieces every part of a study's page (:mod:`treelm.study.page`) writes with: figures as
the page prints them (sentence F1 in percent, mean ± std, tokens in millions), the baselines'
names, a treebank part's title, a path from the checkout's root."""

from __future__ import annotations

from pathlib import Path
from typing import Any

BASELINES = {"right_branching": "right-branching", "left_branching": "left-branching",
             "balanced": "balanced trees", "random": "random trees",
             "random_levels_official": "rule control: random levels, official rule",
             "random_levels_split": "rule control: random levels, split rule"}
TRIVIAL = ("right_branching", "left_branching", "balanced", "random")
NLTK_DATA = "NLTK_DATA=../shared/data/nltk_data "


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def ms(m: dict[str, Any], scale: float = 100.0, seeds: bool = False) -> str:
    """``mean ± std`` (the mean alone for one run), with each run's figure in brackets."""
    s = f"{scale * m['mean']:.1f}" + (f" ± {scale * m['std']:.1f}" if m["n"] > 1 else "")
    if seeds and m["n"] > 1:
        s += " (" + " ".join(f"{scale * x:.1f}" for x in m["runs"]) + ")"
    return s


def mtok(t: float) -> str:
    return f"{t / 1e6:.2f}M"


def f1(b: dict[str, Any], key: str = "sentence_f1") -> float:
    x = b[key]
    return x["mean"] if isinstance(x, dict) else x


def bf1(b: dict[str, Any], key: str = "sentence_f1") -> str:
    x = b.get(key)
    if x is None:
        return "–"
    return f"{pct(x['mean'])} ± {pct(x['std'])}" if isinstance(x, dict) else pct(x)


def part_title(part: str, trees: dict[str, Any]) -> str:
    if part == "dev":
        return f"`{trees['dev']}`"
    n = part.removeprefix("test").lstrip("_")
    return f"`{trees['test']}`" + (f" ≤ {n} words" if n else "")


def rel(path: Path | str) -> str:
    """``path`` from the directory the command runs in (the checkout's root), as given else."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve())) if p.is_absolute() else str(p)
    except ValueError:
        return str(p)


def runs_of(record: dict[str, Any], v: str) -> list[dict[str, Any]]:
    return sorted((r for r in record["runs"].values() if r["variant"] == v),
                  key=lambda r: r["seed"])


def s_(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def test_parts(trees: dict[str, Any]) -> list[str]:
    """The names of the test parts of ``score.trees`` (:func:`treelm.study.parts.tree_parts`)."""
    from treelm.study.parts import tree_parts

    return [name for name, _, _ in tree_parts(trees)[1:]]
