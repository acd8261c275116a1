"""``treelm serve``: a local web page over trained runs (:mod:`treelm.serve.server`, the HTTP side;
:mod:`treelm.serve.endpoints`, what each request computes; the page in ``static/``). It reaches
the runs through the Python API (:mod:`treelm.api`) only."""
