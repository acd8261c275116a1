"""Studies: one config trained over variants and seeds, scored, chosen on dev, gathered into one
record and one page (``treelm study``). ``spec`` holds the study file's sections and ``load``
reads and checks it, ``checks`` refuses a run before it is submitted, ``job`` trains and scores
one run (``score``, on the treebank ``parts``), ``launch`` reaches submitit's local subprocesses
or Slurm, ``driver`` follows the runs, ``record`` keeps the figures and the summary, ``status``
and ``page`` show them."""
