"""The recurrent language model of AWD-LSTM / ON-LSTM (Merity et al. 2018; Shen et al. 2019).

    e_t = E[w_t]                       embedding, E with embedding dropout (row-wise), (V, E)
    x_t = LockedDropout_i(e_t)
    h_t = Stack(x_t)                   any cell, per-layer sizes, locked dropout between layers,
                                       DropConnect on hidden-to-hidden weights
    p(w_{t+1} | w_≤t) = softmax(W_o LockedDropout_o(h_t) + b_o)     W_o = E when tied

or, with ``output: {kind: adaptive, cutoffs: [...], div_value: 4}``, the adaptive softmax of
:mod:`treelm.nn.adaptive_softmax` (an exact distribution whose rare words cost less; tied to E
the same way). The default, ``kind: softmax``, is the full softmax above. Either is an
:class:`~treelm.nn.output.OutputLayer`, built from the section (:class:`OutputOptions`) and used
through that interface alone.

tokens: (T, B) int64 -> logits (T, B, V). ``embedding: onehot`` feeds one-hot vectors (fixed
identity embedding) as in Sutskever et al.'s character models; then ``sizes[0]`` must be V.

What other packages use (no one reaches into the attributes):

* ``forward(tokens, states)`` -> :class:`LMOutput` (training: logits plus what AR/TAR need);
  ``forward(tokens, states, targets)`` computes the mean cross-entropy against ``targets`` with
  the output layer's ``loss`` instead of the logits (no (T, B, V) tensor);
* ``features(tokens, states)`` -> :class:`~treelm.nn.stack.StackOutput`: embedding and recurrent
  stack only, per-layer outputs and cell ``aux`` (ON-LSTM levels ``df``/``di``), no output layer;
* ``logits(h)`` -> the output layer ``W_o h + b_o`` applied to last-layer features (with the
  adaptive softmax: the log-probabilities ``log p(w)``, logits whose softmax is the model's
  distribution, so every consumer of logits reads them unchanged);
* ``target_nll(h, targets)`` -> Σ −log p(target) over rows of last-layer features (evaluation:
  the output layer's own sum, e.g. the adaptive softmax's without the full log-probabilities);
* ``start(batch)`` / ``step(tokens, state)`` -> incremental decoding (:mod:`treelm.decode`);
* ``layer_cells()`` -> the cells of the stack, in order (layer 1 first);
* ``fixed()`` -> the scope of :func:`treelm.nn.fixed.fixed_weights` (an evaluation's passes):
  inside it, without autograd and out of training, the first layer's input part
  ``E W_ihᵀ + b`` is made once for the whole vocabulary (where the cell takes one,
  :meth:`~treelm.cells.base.Cell.input_part`: the fused ON-LSTM) and each pass reads its rows
  instead of multiplying its inputs again: at the tree config a validation reads about 120,000
  positions (the valid text and the dev trees) over a vocabulary of 10,000. The table is made
  only once the scope has read as many positions as it has rows, so a short evaluation (one
  sentence) never pays for it. Its rows are the rows the product would have made (in bfloat16
  the same bits at any row count; in float32 where the backend measured for the two shapes is
  the same, ``tests/test_input_table.py``).

The output projection is ``head`` (called ``decoder`` before; such checkpoints still load).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Unpack

import torch
from torch import Tensor, nn

from treelm.cells import State
from treelm.config import parse_section
from treelm.errors import ConfigError
from treelm.kernels.precision import autocast_dtype
from treelm.nn import OUTPUT_LAYERS
from treelm.nn.dropout import DROPOUT_RULES, Dropouts, DroppedEmbedding, dropouts, locked_dropout
from treelm.nn.fixed import KeepsWhileFixed
from treelm.nn.output import OutputLayer
from treelm.nn.stack import RNNStack, StackOutput

LEGACY_NAMES = {"decoder.": "head."}    # checkpoint key prefixes renamed since


@dataclass
class LMOutput:
    logits: Tensor | None           # (T, B, V); None when forward was given targets
    states: list[State]             # per layer, to carry into the next batch
    raw: list[Tensor]               # per layer output before dropout, (T, B, ·): TAR
    dropped: Tensor                 # last layer output after output dropout, (T, B, ·): AR
    aux: list[dict[str, Tensor]]    # per layer diagnostics, e.g. ON-LSTM levels "df", "di"
    nll: Tensor | None = None       # mean cross-entropy against the targets, when given


@dataclass
class OutputOptions:
    """The ``model.output`` section, read once (:meth:`parse`): the full softmax (default) or an
    adaptive one (:mod:`treelm.nn.output`)."""

    kind: str = "softmax"            # softmax | adaptive (treelm.nn.adaptive_softmax)
    cutoffs: list[int] = field(default_factory=list)    # adaptive: head words, cluster bounds
    div_value: float = 4.0           # adaptive: tail c projects to d / div_value^c (>= 1: never
    #                                  wider than d)
    cluster_lr_scale: float = 1.0    # adaptive: the cluster logits' learning rate, × train.lr

    RULES: ClassVar[dict[str, Any]] = {"kind": tuple(OUTPUT_LAYERS), "cutoffs": ">= 1",
                                       "div_value": ">= 1", "cluster_lr_scale": "> 0"}

    @classmethod
    def parse(cls, d: OutputOptions | dict[str, Any] | None) -> OutputOptions:
        """The section checked (unknown keys, types, the rules, which keys go with which kind),
        one-line errors; a section parsed already is returned as it is."""
        if isinstance(d, OutputOptions):
            return d
        spec: OutputOptions = parse_section(cls, d, "model.output")
        if spec.kind == "softmax" and spec.cutoffs:
            raise ConfigError("model.output.cutoffs are for kind: adaptive")
        if spec.kind == "adaptive" and not spec.cutoffs:
            raise ConfigError("model.output.cutoffs: an adaptive softmax needs cutoffs, "
                              "e.g. [2000]")
        if spec.kind == "softmax" and spec.cluster_lr_scale != 1.0:
            raise ConfigError("model.output.cluster_lr_scale is for kind: adaptive")
        return spec

    def build(self, vocab_size: int, dim: int, weight: nn.Parameter | None) -> OutputLayer:
        """The layer of this kind over ``vocab_size`` words for features of size ``dim``, tied to
        ``weight`` where given, with the kind's options."""
        layer = OUTPUT_LAYERS[self.kind]
        return layer(vocab_size, dim, weight=weight,
                     **{k: getattr(self, k) for k in layer.OPTIONS})


class RNNLM(KeepsWhileFixed, nn.Module):
    RULES: ClassVar[dict[str, Any]] = {
        "sizes": ">= 1", "embedding": ("learned", "onehot"), **DROPOUT_RULES}

    def __init__(
        self,
        vocab_size: int,
        cell: str = "lstm",
        sizes: list[int] | None = None,
        tie_weights: bool = True,
        embedding: str = "learned",
        cell_options: dict[str, Any] | None = None,
        output: OutputOptions | dict[str, Any] | None = None,
        **drop: Unpack[Dropouts],
    ) -> None:
        super().__init__()
        spec = OutputOptions.parse(output)
        sizes = list(sizes or [400, 1150, 1150, 400])
        p = dropouts(drop)
        self.vocab_size = vocab_size
        self.dropout = p["dropout"]
        if embedding not in ("learned", "onehot"):
            raise ValueError(f"unknown embedding {embedding!r}: learned or onehot")
        self.onehot = embedding == "onehot"
        if self.onehot:
            if sizes[0] != vocab_size:
                sizes[0] = vocab_size        # one-hot input: the input size is the vocabulary
            self.register_buffer("eye", torch.eye(vocab_size), persistent=False)
        else:
            self.embedding = DroppedEmbedding(vocab_size, sizes[0], p["dropoute"], p["dropouti"])
        self.rnn = RNNStack(cell, sizes, p["dropouth"], p["wdrop"], cell_options)
        if tie_weights and (self.onehot or self.rnn.output_size != sizes[0]):
            raise ValueError(
                "tie_weights needs a learned embedding whose size equals the last layer's "
                f"output size (got embedding {sizes[0]}, output {self.rnn.output_size})"
            )
        self.head: OutputLayer = spec.build(vocab_size, self.rnn.output_size,
                                            self.embedding.weight if tie_weights else None)
        self.tied = tie_weights
        # inside fixed(): the first layer's input part over the vocabulary, by autocast dtype
        # (None: the cell takes none), and the positions read so far in the scope
        self._tables: dict[torch.dtype | None, Tensor | None] | None = None
        self._read = 0

        self.register_load_state_dict_pre_hook(_rename_legacy_keys)

    @staticmethod
    def check_options(options: dict[str, Any]) -> dict[str, Any]:
        """``options`` with their nested section ``output`` parsed (:class:`OutputOptions`):
        the checks of the ``model:`` section that need no data
        (:func:`treelm.models.model_options`, before any corpus is read), done once."""
        if "output" not in options:
            return options
        return {**options, "output": OutputOptions.parse(options["output"])}

    def embed(self, tokens: Tensor) -> Tensor:
        return self.eye[tokens] if self.onehot else self.embedding(tokens)

    def features(self, tokens: Tensor, states: list[State] | None = None) -> StackOutput:
        x = self.embed(tokens)      # read by the first layer for its shapes even with xp given
        return self.rnn(x, states, self._input_part(tokens))

    @contextlib.contextmanager
    def fixed(self) -> Iterator[None]:
        """The scope in which the first layer's input part is read from a table over the
        vocabulary (module docstring); nested scopes share the outer's."""
        if self._tables is not None:
            yield
            return
        self._tables, self._read = {}, 0
        try:
            yield
        finally:
            self._tables, self._read = None, 0

    def _input_part(self, tokens: Tensor) -> Tensor | None:
        """The first layer's input part for ``tokens``, rows of the scope's table, or None (no
        scope, training, a gradient, one-hot inputs, a cell that takes none, or fewer positions
        read in the scope so far than the table has rows)."""
        tables = self._tables
        if tables is None or self.training or self.onehot or torch.is_grad_enabled():
            return None
        key = autocast_dtype(tokens.device.type)
        if key not in tables:
            self._read += tokens.numel()
            if self._read < self.vocab_size:        # the table would cost more than it saved
                return None
            # in eval mode the embedding is E's rows as they are (no dropout): x = E[tokens]
            tables[key] = self.rnn.layers[0].input_part(self.embedding.weight)
        table = tables[key]
        return None if table is None else table[tokens]

    def logits(self, h: Tensor) -> Tensor:
        return self.head(h)     # the adaptive softmax's forward: its log-probabilities

    def target_nll(self, h: Tensor, targets: Tensor) -> Tensor:
        """Σ −log p(target | h) over the rows of ``h`` (N, d), float32 at least: the output
        layer's own (:meth:`treelm.nn.output.OutputLayer.target_nll`; the adaptive softmax's
        runs a tail only on the rows whose target is in it, and makes no (N, V) tensor)."""
        return self.head.target_nll(h, targets)

    def forward(self, tokens: Tensor, states: list[State] | None = None,
                targets: Tensor | None = None) -> LMOutput:
        pieces = None
        if targets is not None and self.tied:
            # E's two uses meet in the backward, so that its gradient is written once
            # (treelm.nn.lookup, "Tied"); the pieces made after the stack, used right after
            x, meet = self.embedding.tied(tokens)
            out = self.rnn(x, states)
            pieces = self.embedding.pieces(self.head.widths(), meet)
        else:
            out = self.features(tokens, states)
        dropped = locked_dropout(out.out, self.dropout, self.training)
        if targets is None:
            return LMOutput(self.head(dropped), out.states, out.raw, dropped, out.aux)
        flat = dropped.reshape(-1, dropped.size(-1))
        nll = self.head.loss(flat, targets.reshape(-1), pieces)
        return LMOutput(None, out.states, out.raw, dropped, out.aux, nll)

    def layer_cells(self) -> list[nn.Module]:
        return list(self.rnn.layers)

    def start(self, batch: int) -> list[State]:
        """The zero state of every layer for ``batch`` sequences."""
        like = self.head.weight
        return [layer.init_state(batch, like) for layer in self.rnn.layers]

    def step(self, tokens: Tensor, states: list[State] | None) -> tuple[Tensor, list[State]]:
        """``tokens`` (B,) or a prefix (T, B) -> (logits (B, V) after its last symbol, states)."""
        if tokens.dim() == 1:
            tokens = tokens.unsqueeze(0)
        out = self.features(tokens, states)
        return self.head(out.out[-1]), out.states


def _rename_legacy_keys(module: nn.Module, state_dict: dict[str, Tensor], prefix: str,
                        *args: Any) -> None:
    for key in [k for k in state_dict if k.startswith(prefix)]:
        for old, new in LEGACY_NAMES.items():
            if key.startswith(prefix + old):
                state_dict[prefix + new + key[len(prefix + old):]] = state_dict.pop(key)
