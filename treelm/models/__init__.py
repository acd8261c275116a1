"""Models, built from the ``model:`` section of a config by :func:`build_model`."""

from __future__ import annotations

from typing import Any

from torch import nn

from treelm.config import check_kwargs
from treelm.errors import ConfigError
from treelm.models.classifier import SequenceClassifier
from treelm.models.convs2s import ConvS2S
from treelm.models.lm import RNNLM
from treelm.models.pair import PairClassifier
from treelm.models.rnn_attn import RNNAttention
from treelm.models.tagger import Tagger

MODELS: dict[str, type[nn.Module]] = {"lm": RNNLM, "tagger": Tagger, "convs2s": ConvS2S,
                                      "classifier": SequenceClassifier,
                                      "pair": PairClassifier, "rnn_attn": RNNAttention}


def build_model(spec: dict[str, Any], **dims: Any) -> nn.Module:
    """The model a ``model:`` section names, with the sizes its task provides (``dims``, e.g.
    ``vocab_size``; see :meth:`treelm.tasks.base.Task.model_dims`)."""
    spec = dict(spec)
    kind = spec.pop("type", "lm")
    if kind not in MODELS:
        raise ConfigError(f"unknown model type {kind!r}; choose one of {', '.join(MODELS)}")
    cls = MODELS[kind]
    spec = check_kwargs(cls.__init__, spec, "model", getattr(cls, "RULES", None))
    try:
        return cls(**dims, **spec)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"bad model options for {kind!r}: {e}") from None
