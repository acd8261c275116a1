"""Analyses of trained or freshly initialised models.

* :mod:`treelm.analysis.gradflow` -- how the gradient of the last step's loss reaches back in time
  (vanishing / exploding gradients, Pascanu, Mikolov & Bengio 2013); verb ``treelm gradflow``.
"""
