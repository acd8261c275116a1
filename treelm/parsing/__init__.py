"""The verbs of unsupervised syntax: ``treelm parse``, ``eval-parse``, ``plot`` and ``plot-tree``
(:mod:`treelm.parsing.commands`), and ``ensemble``, the tree ensemble of runs and tree files
(:mod:`treelm.parsing.ensemble`); what ``eval-parse`` and ``ensemble`` print of a treebank
(:mod:`treelm.parsing.scoring`) and the options the verbs share (:mod:`treelm.parsing.options`).

They sit above the Python API (:mod:`treelm.api`): ``parse`` opens its run as a
:class:`~treelm.api.model.TreelmModel` and reads its trees through
:meth:`~treelm.api.model.TreelmModel.levels_stream`, so that the command line and Python compute
one thing. The library they print from (trees, levels,
F1, baselines, pictures) is :mod:`treelm.syntax`, below the API.
"""
