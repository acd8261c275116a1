"""Evaluation suites for language-model runs: ``treelm suite agreement`` (targeted syntactic
evaluation, Marvin & Linzen 2018).

* :mod:`treelm.suite.agreement` -- the minimal pairs, generated from templates and a lexicon;
* :mod:`treelm.suite.lexicon` -- that lexicon: Penn Treebank words for each slot;
* :mod:`treelm.suite.pairs` -- :class:`~treelm.suite.pairs.Pair` and ``--pairs`` files;
* :mod:`treelm.suite.report` -- scoring pairs with runs (through the Python API,
  :meth:`treelm.api.model.TreelmModel.score`), accuracy per construction, the table;
* :mod:`treelm.suite.commands` -- the verb.
"""
