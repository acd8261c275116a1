"""The Python API: ``treelm.load(run_dir)`` and the object it returns (:mod:`treelm.api.model`).

It sits on the library (``syntax.sources.level_source`` for ``parse``/``levels``, ``decode.score``
for ``score``, the decoders for ``generate``/``probe``, the task's ``tag``, ``translate`` and
``attention_map``), and the inference verbs sit on it: ``treelm parse``, ``generate``, ``probe``,
``tag``, ``translate`` and ``suite agreement`` open their run as a :class:`TreelmModel` and call
its methods, so that Python and the command line take one path. The object's plumbing is
:mod:`treelm.api.base`, its methods :mod:`treelm.api.model` (trees), :mod:`treelm.api.lm` and
:mod:`treelm.api.inference`, what they take and return :mod:`treelm.api.values`.
Beside the runs, :func:`~treelm.api.ensemble.ensemble_trees` (``treelm.ensemble_trees``) makes
the ensemble of several sources' trees per sentence (:mod:`treelm.syntax.ensemble`; what
``treelm ensemble`` prints). ``import treelm`` stays light: torch and the run are loaded by
``treelm.load`` only.
"""

from treelm.api.ensemble import ensemble_trees
from treelm.api.model import TreelmModel, UnsupportedMethodError, load

__all__ = ["TreelmModel", "UnsupportedMethodError", "ensemble_trees", "load"]
