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
from treelm.nn import output

MODELS: dict[str, type[nn.Module]] = {"lm": RNNLM, "tagger": Tagger, "convs2s": ConvS2S,
                                      "classifier": SequenceClassifier,
                                      "pair": PairClassifier, "rnn_attn": RNNAttention}


def model_options(spec: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The model type a ``model:`` section names and its options, checked against that model's
    signature and rules (unknown keys, types, ranges) without building anything: the sizes that
    come from the data are not needed to find a typo. Nested sections come back parsed (RNNLM's
    ``output``: :class:`~treelm.models.lm.OutputOptions`), so building reads them no more."""
    spec = dict(spec)
    kind = spec.pop("type", "lm")
    if kind not in MODELS:
        raise ConfigError(f"unknown model type {kind!r}; choose one of {', '.join(MODELS)}")
    cls = MODELS[kind]
    options = check_kwargs(cls.__init__, spec, "model", getattr(cls, "RULES", None))
    check = getattr(cls, "check_options", None)     # nested sections (RNNLM's output)
    if check is not None:
        options = check(options)
    return kind, options


def build_model(spec: dict[str, Any], **dims: Any) -> nn.Module:
    """The model a ``model:`` section names, with the sizes its task provides (``dims``, e.g.
    ``vocab_size``; see :meth:`treelm.tasks.base.Task.model_dims`)."""
    kind, options = model_options(spec)
    try:
        return MODELS[kind](**dims, **options)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"bad model options for {kind!r}: {e}") from None


def optimizer_groups(model: nn.Module) -> list[tuple[list[nn.Parameter], float]]:
    """The parameters that ``model``'s layers declare a learning rate of their own for, as
    ``[(parameters, scale)]``: stepped at the run's rate × scale (the adaptive softmax's cluster
    logits; :meth:`treelm.nn.output.OutputLayer.optimizer_groups`). Empty for most models."""
    return output.optimizer_groups(model)
