"""treelm: sequence models that learn structure (ON-LSTM and the recurrent models around it).

``treelm.load(run_dir)`` opens a trained run for use from Python (:mod:`treelm.api`, documented
in docs/api.md); ``treelm.ensemble_trees(sources)`` makes the ensemble of several sources' trees
per sentence (:func:`treelm.api.ensemble.ensemble_trees`, given as it is, not wrapped).
Importing ``treelm`` loads nothing else: torch and the run come with ``load``, the ensemble's
module with its first use.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from treelm.api.model import TreelmModel

#: Names that were renamed: each access says the new one in one line.
_RENAMED = {"average_trees": "ensemble_trees"}


def load(run_dir: str | Path, checkpoint: str = "best", *,
         precision: str = "run") -> TreelmModel:
    """A trained run with the methods its task supports (:func:`treelm.api.model.load`)."""
    from treelm.api.model import load as _load

    return _load(run_dir, checkpoint, precision=precision)


def __getattr__(name: str) -> Any:
    """``treelm.ensemble_trees`` is :func:`treelm.api.ensemble.ensemble_trees`, imported on first
    use (so that ``import treelm`` stays light); a renamed name is refused, naming the new one."""
    if name == "ensemble_trees":
        from treelm.api.ensemble import ensemble_trees

        return ensemble_trees
    if name in _RENAMED:
        raise AttributeError(f"treelm.{name} is now treelm.{_RENAMED[name]}")
    raise AttributeError(f"module 'treelm' has no attribute {name!r}")


__all__ = ["ensemble_trees", "load"]
