"""The AWD-LSTM regularisers (Merity, Keskar & Socher, ICLR 2018, Sec. 4).

* :func:`locked_dropout` — variational dropout (Gal & Ghahramani 2016): one mask per sequence,
  shared over all time steps. x: (T, B, D).
* :func:`embedding_dropout` — drops whole rows (word types) of the embedding matrix, so that a word
  is dropped everywhere in the batch. weight: (V, E); the looked-up rows are returned.
* :func:`weight_drop` — DropConnect (Wan et al. 2013) on hidden-to-hidden weights: one mask per
  sequence, the same at every step.
All are the identity when ``p == 0`` or not training; surviving values are scaled by 1/(1−p).

A recurrent model takes the five probabilities as keywords typed by :class:`Dropouts` (so they are
declared once, here, and ``model:`` sections are checked against them), fills the missing ones
with :func:`dropouts`, and embeds its input through :class:`DroppedEmbedding` (E[w] with
``dropoute`` and ``dropouti``).

Masks are drawn as ``U(0, 1) ≥ p`` rather than by ``bernoulli_`` or ``F.dropout``: the same
distribution, 2.5× faster on CPU (2.3 vs 5.9 ms for a (1680, 400) weight, 2 threads), which is a
few percent of a PTB training step. Weight drop on the CPU goes further: its U is a hash of one
seed and the weight's index (:mod:`treelm.kernels.hash_dropout`), the mask one vectorised pass.

Embedding dropout is applied to the rows looked up, not to the matrix: (E ∘ m)[w] = E[w] ∘ m[w]
with one mask m (V, 1) drawn per batch, the same numbers and the same random draws as AWD-LSTM's
masked matrix, but a pass over the batch's B·T rows instead of two over all V (forward and
backward, 4M floats each for PTB's 10,000 × 400 embedding).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from treelm.kernels.hash_dropout import hash_dropout
from treelm.nn.lookup import RowLookup, TiedGradient


class Dropouts(TypedDict, total=False):
    """AWD-LSTM's dropout probabilities, each in [0, 1) and 0 (off) when not given: the keywords
    (and ``model:`` keys) of every model with an embedding and a recurrent stack."""

    dropout: float      # locked (or plain) dropout on the last layer's output, before the head
    dropouth: float     # locked dropout between recurrent layers
    dropouti: float     # locked dropout on the embedded input
    dropoute: float     # embedding dropout: whole rows (word types) of E
    wdrop: float        # DropConnect on the hidden-to-hidden weights


# the config rule of every Dropouts key, for a model's RULES
DROPOUT_RULES: dict[str, Any] = dict.fromkeys(Dropouts.__annotations__, "[0, 1)")


def dropouts(given: Dropouts) -> dict[str, float]:
    """Every :class:`Dropouts` probability: those ``given``, 0 for the others. A key that is not
    one is a TypeError, as an unknown keyword argument is."""
    unknown = sorted(set(given) - set(Dropouts.__annotations__))
    if unknown:
        raise TypeError(f"unexpected keyword arguments {unknown}")
    return {k: float(given.get(k, 0.0)) for k in Dropouts.__annotations__}


def keep_mask(like: Tensor, shape: tuple[int, ...], p: float) -> Tensor:
    """Bernoulli(1 − p) / (1 − p) of ``shape``, in ``like``'s dtype and device."""
    keep = torch.rand(shape, device=like.device) >= p
    return keep.to(like.dtype).mul_(1.0 / (1.0 - p))


def locked_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    if not training or p == 0.0:
        return x
    return x * keep_mask(x, (1, *x.shape[1:]), p)


def embedding_dropout(weight: Tensor, tokens: Tensor, p: float, training: bool,
                      rows: Callable[[Tensor, Tensor], Tensor] | None = None) -> Tensor:
    """``F.embedding(tokens, weight ∘ m)`` with m (V, 1) ~ Bernoulli(1 − p) / (1 − p): whole word
    types dropped, each everywhere in the batch (computed on the looked-up rows, see above).
    ``rows(weight, tokens)``: the lookup of E's rows (``F.embedding``'s by default)."""
    looked_up = rows(weight, tokens) if rows is not None else F.embedding(tokens, weight)
    if not training or p == 0.0:
        return looked_up
    mask = keep_mask(weight, (weight.size(0), 1), p)
    return looked_up * F.embedding(tokens, mask)


def weight_drop(weight: Tensor, p: float, training: bool) -> Tensor:
    if not training or p == 0.0:
        return weight
    dropped = hash_dropout(weight, p)       # CPU: the mask hashed in C++, one seed drawn
    return weight * keep_mask(weight, tuple(weight.shape), p) if dropped is None else dropped


class DroppedEmbedding(nn.Embedding):
    """The input layer of AWD-LSTM: ``E`` (V, E) ~ U(−0.1, 0.1) (after ``nn.Embedding``'s own
    initialisation, so that the random stream and the state dict, ``weight``, are an
    ``nn.Embedding``'s), rows dropped by ``dropoute``, the looked-up vectors by ``dropouti``.

    tokens (…) int64 -> (…, E): :meth:`forward` is ``locked(lookup(tokens))``; a model that
    combines the vectors first (the tagger's context windows) calls the two itself.
    """

    def __init__(self, vocab_size: int, size: int, dropoute: float = 0.0,
                 dropouti: float = 0.0) -> None:
        super().__init__(vocab_size, size)
        nn.init.uniform_(self.weight, -0.1, 0.1)
        self.dropoute, self.dropouti = dropoute, dropouti
        # E's gradient written into one kept buffer (treelm.nn.lookup): the same numbers
        self.rows = RowLookup()

    def lookup(self, tokens: Tensor) -> Tensor:
        """E[w] with embedding dropout (one mask over E's rows for the whole batch)."""
        return embedding_dropout(self.weight, tokens, self.dropoute, self.training, self.rows)

    def tied(self, tokens: Tensor) -> tuple[Tensor, TiedGradient | None]:
        """:meth:`forward`, and where E's gradient meets the tied output layer's: give it to
        :meth:`pieces` after the recurrent layers (:mod:`treelm.nn.lookup`, "Tied")."""
        rows, meet = self.rows.tied_rows(self.weight, tokens)
        looked_up = embedding_dropout(self.weight, tokens, self.dropoute, self.training,
                                      lambda weight, tokens: rows)
        return self.locked(looked_up), meet

    def pieces(self, widths: list[int], meet: TiedGradient | None) -> tuple[Tensor, ...]:
        """E cut at ``widths`` for the tied output layer (``torch.split``), its gradient
        meeting the lookup's at ``meet``."""
        return self.rows.tied_pieces(self.weight, widths, meet)

    def locked(self, x: Tensor) -> Tensor:
        """Locked dropout ``dropouti`` on embedded input x (T, B, ·)."""
        return locked_dropout(x, self.dropouti, self.training)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.locked(self.lookup(tokens))
