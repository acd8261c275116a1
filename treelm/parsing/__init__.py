"""The verbs of unsupervised syntax: ``treelm parse``, ``eval-parse``, ``plot`` and ``plot-tree``
(:mod:`treelm.parsing.commands`), and ``ensemble``, the tree average of runs and tree files
(:mod:`treelm.parsing.ensemble`).

They sit above the Python API (:mod:`treelm.api`): ``parse`` opens its run as a
:class:`~treelm.api.model.TreelmModel` and reads its trees through
:meth:`~treelm.api.model.TreelmModel.levels_stream`, so that the command line and Python compute
one thing. The library they print from (trees, levels,
F1, baselines, pictures) is :mod:`treelm.syntax`, below the API.
"""
