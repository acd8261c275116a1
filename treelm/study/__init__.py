"""Studies: one config trained over variants and seeds, scored, chosen on dev, gathered into one
record and one page (``treelm study``). ``spec`` reads the study file, ``job`` trains and scores
one run, ``launch`` reaches submitit's local subprocesses or Slurm, ``driver`` follows the runs,
``record`` keeps the figures and the summary, ``status`` and ``page`` show them."""
