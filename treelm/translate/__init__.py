"""Translation at inference time: ``treelm translate`` (verb in :mod:`treelm.translate.commands`;
reading and streaming in :mod:`treelm.translate.stream`, the attention figure in
:mod:`treelm.translate.plot`)."""
