"""treelm: sequence models that learn structure (ON-LSTM and the recurrent models around it).

``treelm.load(run_dir)`` opens a trained run for use from Python (:mod:`treelm.api`, documented
in docs/api.md); ``treelm.average_trees(sources)`` averages several sources' trees per sentence.
Importing ``treelm`` loads nothing else: torch and the run come with ``load``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from treelm.api.model import TreelmModel


def load(run_dir: str | Path, checkpoint: str = "best", *,
         precision: str = "run") -> TreelmModel:
    """A trained run with the methods its task supports (:func:`treelm.api.model.load`)."""
    from treelm.api.model import load as _load

    return _load(run_dir, checkpoint, precision=precision)


def average_trees(sources: Sequence[Sequence[Any]],
                  weights: Sequence[float] | None = None) -> list[Any]:
    """Per sentence, the binary tree sharing the most spans with the sources' trees
    (:func:`treelm.api.average.average_trees`)."""
    from treelm.api.average import average_trees as _average

    return _average(sources, weights)


__all__ = ["average_trees", "load"]
