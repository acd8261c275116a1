"""A scope in which a model's weights stay as they are (an evaluation's passes), and the
modules that keep what they make from the weights inside it.

    with fixed_weights(model):      every module of ``model`` that keeps something opens its
        …passes…                    scope (:meth:`KeepsWhileFixed.fixed`); nested scopes share
                                    the outer's, so a validation's perplexity and its trees'
                                    levels read the same kept products

Why a scope and not a check of the weights: nothing else says that they have not changed.
PyTorch's fused SGD and writes through ``.data`` leave a tensor's version counter as it was, and
the averaged weights of NT-ASGD are swapped in and out under the same Parameters, so a module
may keep a product of its weights only while a caller says that nothing steps them. The kept
products are the ones the module would have made, so the same bits. Kept today: the adaptive
softmax's tail word matrices (:mod:`treelm.nn.adaptive_softmax`) and a language model's first
layer's input part for every word of its vocabulary (:mod:`treelm.models.lm`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch import nn


class KeepsWhileFixed:
    """A module that may keep what it makes from its weights inside :func:`fixed_weights`."""

    def fixed(self) -> contextlib.AbstractContextManager[None]:
        """A scope in which the weights do not change (one evaluation): the module may keep
        what it makes from them inside it until it ends. Nothing to keep by default."""
        return contextlib.nullcontext()


@contextlib.contextmanager
def fixed_weights(model: nn.Module) -> Iterator[None]:
    """The scope of :meth:`KeepsWhileFixed.fixed` for every such module of ``model`` (itself
    included): open it around an evaluation's passes, inside which nothing steps the weights."""
    with contextlib.ExitStack() as scopes:
        for m in model.modules():
            if isinstance(m, KeepsWhileFixed):
                scopes.enter_context(m.fixed())
        yield
