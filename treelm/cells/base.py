"""The interface every recurrent cell in treelm shares.

Shape convention (time-major, as in AWD-LSTM and ``torch.nn.LSTM``):

* input ``x``: ``(T, B, input_size)``
* output ``out``: ``(T, B, output_size)`` (``output_size == hidden_size`` except for Jordan)
* state: a tuple of ``(B, ·)`` tensors, cell-specific (``(h,)``, ``(h, c)``, ...); ``None`` means
  the zero state from :meth:`Cell.init_state`. The final state is returned so that truncated BPTT
  can carry it into the next batch.
* ``aux``: a dict of per-step diagnostics, each ``(T, B)``; ON-LSTM returns the master-gate levels
  ``"df"`` and ``"di"`` used for tree induction.

A cell may run a whole sequence through a fused kernel (:meth:`Cell.fused`: PyTorch's for the
cells in ``torch.nn.RNN``/``GRU``/``LSTM``'s layout, named by :meth:`Cell.kernel`; treelm's own for
ON-LSTM); ``impl="reference"``, or a cell without one for its options, runs :meth:`Cell.step` in
the loop of :meth:`Cell.forward`, the readable form the fused kernels are tested against.

A cell names the parameters that are hidden-to-hidden (``recurrent_weights``) so that a stack can
apply DropConnect (Wan et al. 2013, as in AWD-LSTM) to them: the dropped copies are passed to
``forward`` in ``weights`` and are held fixed over all time steps of one sequence.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from treelm.kernels import gemm
from treelm.kernels.precision import up

State = tuple[Tensor, ...]


class Cell(nn.Module):
    """Base class: subclasses implement :meth:`step` (one time step) and :meth:`state_sizes`."""

    recurrent_weights: tuple[str, ...] = ("weight_hh",)

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size

    @property
    def output_size(self) -> int:
        return self.hidden_size

    def state_sizes(self) -> tuple[int, ...]:
        return (self.hidden_size,)

    def init_state(self, batch: int, like: Tensor) -> State:
        """The zero state on ``like``'s device and dtype."""
        return tuple(like.new_zeros(batch, n) for n in self.state_sizes())

    def kernel(self) -> Callable[..., Any] | None:
        """PyTorch's fused kernel for this cell's options (``torch.lstm``, ``torch.gru``,
        ``torch.rnn_tanh``, ``torch.rnn_relu``: what ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` run),
        for cells holding ``weight_ih, weight_hh, bias_ih, bias_hh`` in that layout; None: none."""
        return None

    def fused(
        self, x: Tensor, state: State | None, weights: dict[str, Tensor] | None
    ) -> tuple[Tensor, State, dict[str, Tensor]] | None:
        """The whole sequence through a fused kernel, as :meth:`forward` returns it; None where
        there is none (the step loop runs). Here: :meth:`kernel`, with DropConnect coming in as
        ``weights["weight_hh"]``.

        Under CPU autocast the cell's own step loop runs instead: oneDNN's bfloat16 RNN primitive
        carries the state in bfloat16 and is missing on CPUs without native bfloat16, while the
        loop's products go through ``gemm.linear`` in bfloat16 with gates and state in float32.
        (The LSTM overrides this with a C++ loop of the same precision rules,
        :mod:`treelm.kernels.lstm_cxx`.)
        """
        kernel = self.kernel()
        if kernel is None or (x.device.type == "cpu" and torch.is_autocast_enabled("cpu")):
            return None
        if state is None:
            state = self.init_state(x.size(1), x)
        w_hh = self.weight_hh if weights is None else weights["weight_hh"]
        params = [self.weight_ih, w_hh, self.bias_ih, self.bias_hh]
        hx = tuple(s.unsqueeze(0) for s in state)
        out, *hs = kernel(x, hx if len(hx) > 1 else hx[0], params, True, 1, 0.0, self.training,
                          False, False)
        return out, tuple(h[0] for h in hs), {}

    def gate_parameters(self, gates: int, extra: int = 0) -> None:
        """``weight_ih`` (G, I), ``weight_hh`` (G, H), ``bias_ih``, ``bias_hh`` (G,) for
        ``G = gates · H + extra``: the layout of ``torch.nn.RNN``/``GRU``/``LSTM`` (so their
        kernels run these weights; ON-LSTM adds its master gates' rows as ``extra``), registered
        in that order (state dicts and initialisation follow it)."""
        G, H = gates * self.hidden_size + extra, self.hidden_size
        self.weight_ih = nn.Parameter(torch.empty(G, self.input_size))
        self.weight_hh = nn.Parameter(torch.empty(G, H))
        self.bias_ih = nn.Parameter(torch.empty(G))
        self.bias_hh = nn.Parameter(torch.empty(G))

    def init_uniform(self) -> None:
        """Every parameter ~ U(−1/√H, 1/√H), in registration order: PyTorch's recurrent layers'
        initialisation."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def recurrent(self) -> dict[str, Tensor]:
        """The hidden-to-hidden weights as used this sequence (undropped)."""
        return {name: getattr(self, name) for name in self.recurrent_weights}

    def input_projection(self, x: Tensor) -> Tensor | None:
        """The input part of all steps at once, ``(T, B, ·)``, handed to ``step``: here
        ``W_ih x + b_ih`` in one product (for cells holding ``weight_ih``, ``bias_ih``)."""
        return gemm.linear(x, self.weight_ih, self.bias_ih)

    def step(
        self, x_t: Tensor, xp_t: Tensor | None, state: State, w: dict[str, Tensor]
    ) -> tuple[Tensor, State, dict[str, Tensor]]:
        """One time step. A product by a weight that is the same at every step may go through
        :func:`treelm.kernels.gemm.linear` (same numbers and gradients as ``F.linear``) to run on
        the GEMM backend measured fastest for the loop."""
        raise NotImplementedError

    def input_part(self, x: Tensor) -> Tensor | None:
        """The input part of every step for inputs ``x`` (…, I), made apart and without
        autograd, for a caller that reads the same inputs many times (a language model's table
        over its vocabulary, :mod:`treelm.models.lm`) and hands its rows back to :meth:`forward`
        as ``xp``; ``None``: the cell makes its own (here, every cell but the fused ON-LSTM)."""
        return None

    def forward(
        self,
        x: Tensor,
        state: State | None = None,
        weights: dict[str, Tensor] | None = None,
        xp: Tensor | None = None,
    ) -> tuple[Tensor, State, dict[str, Tensor]]:
        """Run the whole sequence ``x`` (T, B, I) from ``state``; see the module docstring. Through
        :meth:`fused` unless ``impl`` is ``"reference"`` or it has none; else step by step (cells
        without an ``impl`` attribute have no fused path). ``xp``: :meth:`input_part`'s rows for
        ``x``, which only a cell whose :meth:`input_part` made them takes (its fused path)."""
        if xp is not None:
            return self.fused(x, state, weights, xp=xp)  # type: ignore[call-arg]
        if getattr(self, "impl", "reference") != "reference":
            fused = self.fused(x, state, weights)
            if fused is not None:
                return fused
        x = up(x)       # an input autocast made bfloat16: the state and gates stay float32
        if state is None:
            state = self.init_state(x.size(1), x)
        w = self.recurrent() if weights is None else weights
        xp = self.input_projection(x)
        outs: list[Tensor] = []
        auxs: dict[str, list[Tensor]] = {}
        # products a step makes through gemm.linear run on the GEMM backend measured fastest for
        # T of them, each weight prepared once (F.linear's numbers and gradients either way)
        # unbind, not x[t]: the backward of T selects would add T zero-filled (T, B, ·) tensors
        # (quadratic in T); unbind's backward stacks the T step gradients once
        xs = x.unbind(0)
        xps = [None] * len(xs) if xp is None else xp.unbind(0)
        with gemm.loop(x.size(1), x.size(0)):
            for x_t, xp_t in zip(xs, xps):
                out, state, aux = self.step(x_t, xp_t, state, w)
                outs.append(out)
                for k, v in aux.items():
                    auxs.setdefault(k, []).append(v)
        return torch.stack(outs), state, {k: torch.stack(v) for k, v in auxs.items()}
