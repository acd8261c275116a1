"""The Python API: ``treelm.load(run_dir)`` and the object it returns (:mod:`treelm.api.model`).

It sits at the top of the package stack, next to the command line: a method calls the same
library function the matching verb calls (``syntax.sources.level_source`` for ``parse``/``levels``,
``decode.score`` for ``score``, the decoders for ``generate``/``probe``, the task's ``tag``,
``translate`` and ``attention_map``), so that Python and the command line compute one thing.
``import treelm`` stays light: torch and the run are loaded by ``treelm.load`` only.
"""

from treelm.api.model import TreelmModel, UnsupportedMethodError, load

__all__ = ["TreelmModel", "UnsupportedMethodError", "load"]
