"""Text from a trained language model: ``treelm generate`` and ``treelm probe`` (verbs in
:mod:`treelm.generate.commands`), on the decoders of :mod:`treelm.decode`."""
