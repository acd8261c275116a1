"""Shared layers: the AWD-LSTM dropouts (declared once for every recurrent model), the embedding
input layer, the multi-layer recurrent stack, and a language model's output layers behind one
interface (:mod:`treelm.nn.output`), by the names of the config's ``model.output.kind``."""

from __future__ import annotations

from treelm.nn.adaptive_softmax import AdaptiveSoftmax
from treelm.nn.output import FullSoftmax, OutputLayer

#: the output layers by ``model.output.kind``
OUTPUT_LAYERS: dict[str, type[OutputLayer]] = {"softmax": FullSoftmax, "adaptive": AdaptiveSoftmax}
