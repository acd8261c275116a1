"""Gradient flow through time: the mean norm of ∂L_T/∂h_t against the lag T − t.

For a batch of B sequences of length T, the model is run one step at a time from the zero state
``h_0`` so that every state ``h_t`` (t = 0 … T) is a node of the graph. ``L_T`` is the loss at the
*last step only*: the summed cross-entropy of the model's prediction after ``x_T`` of the symbol
that follows it, computed from the last layer's final state through the model's decoder,
``L_T = Σ_b CE(W_o h_T[b] + b_o, y_T[b])``. Because the sequences of a batch are independent,
row ``b`` of ``∂L_T/∂h_t`` is ``∂L_T[b]/∂h_t[b]``; we report its Euclidean norm averaged over the
batch, for every lag ``T − t`` from 0 to T. ``h_t`` is each layer's hidden vector (``wrt="h"``,
the first tensor of every layer's state, concatenated over layers) or the whole recurrent state
(``wrt="state"``, e.g. ``(h_t, c_t)`` for the LSTM).

For the Elman SRN, ``h_t = σ(W_hh h_{t−1} + W_ih x_t + b)``, Pascanu, Mikolov & Bengio (ICML 2013,
"On the difficulty of training recurrent neural networks", Sec. 2.1) bound the Jacobian
``‖∂h_t/∂h_{t−1}‖ ≤ ‖W_hhᵀ‖ · ‖diag σ'(·)‖ ≤ σ_max(W_hh) · γ`` with ``γ`` the bound on ``|σ'|``
(γ = 1 for tanh, 1/4 for the logistic sigmoid). Hence ``σ_max < 1/γ`` is *sufficient* for the
gradient to vanish exponentially with the lag, and ``σ_max > 1/γ`` *necessary* for it to explode.
:func:`elman_bounds` reports ``σ_max`` of each Elman layer against ``1/γ``.

Fresh cells are wrapped in a one-layer :class:`~treelm.models.lm.RNNLM` with one-hot input (the
input size is the alphabet, as in Sutskever et al. 2011) and a random linear decoder, so that
fresh and trained models are measured the same way.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from treelm.cells import Elman
from treelm.errors import TreelmError

GAMMA = {"tanh": 1.0, "relu": 1.0, "linear": 1.0, "sigmoid": 0.25}
"""γ = sup |σ'| of each activation (relu and linear: 1)."""


@dataclass
class ElmanBound:
    """σ_max(W_hh) of one Elman layer against the 1/γ bound of Pascanu et al. (2013)."""

    layer: int
    sigma_max: float
    nonlinearity: str
    gamma: float

    @property
    def bound(self) -> float:
        return 1.0 / self.gamma

    @property
    def vanishing_guaranteed(self) -> bool:
        return self.sigma_max < self.bound

    def describe(self) -> str:
        if self.vanishing_guaranteed:
            verdict = "vanishing gradients guaranteed"
        else:
            verdict = ("the sufficient condition for vanishing does not hold "
                       "(σ_max > 1/γ is necessary for exploding)")
        rel = "<" if self.vanishing_guaranteed else ">="
        return (f"layer {self.layer}: σ_max(W_hh) = {self.sigma_max:.3f} {rel} 1/γ = "
                f"{self.bound:g} ({self.nonlinearity}, γ = {self.gamma:g}): {verdict}")


@dataclass
class FlowResult:
    label: str
    cell: str
    norms: Tensor                       # (T + 1,): mean ‖∂L_T/∂h_{T−lag}‖, index = lag
    elman: list[ElmanBound] = field(default_factory=list)


def elman_bounds(model: nn.Module) -> list[ElmanBound]:
    """σ_max(W_hh) (largest singular value) of every Elman layer of ``model``."""
    out = []
    layers = [m for m in model.modules() if isinstance(m, Elman)]
    for i, m in enumerate(layers):
        s = float(torch.linalg.matrix_norm(m.weight_hh.detach().double(), ord=2))
        out.append(ElmanBound(i, s, m.nonlinearity, GAMMA[m.nonlinearity]))
    return out


def _chunk_size(hidden: int) -> int:
    for c in (10, 8, 16, 4, 2):
        if hidden % c == 0:
            return c
    return 1


def fresh_model(cell: str, vocab_size: int, hidden: int, seed: int = 0,
                cell_options: dict[str, Any] | None = None) -> nn.Module:
    """A one-layer RNNLM with one-hot input and a freshly initialised ``cell`` of size ``hidden``
    (seeded, so every call with the same arguments gives the same weights). ON-LSTM gets a chunk
    size dividing ``hidden`` (10, else 8, 16, 4, 2, 1) unless ``cell_options`` names one."""
    from treelm.models.lm import RNNLM

    opts = dict(cell_options or {})
    if cell == "onlstm":
        opts.setdefault("chunk_size", _chunk_size(hidden))
    torch.manual_seed(seed)
    model = RNNLM(vocab_size, cell, sizes=[vocab_size, hidden], tie_weights=False,
                  embedding="onehot", cell_options=opts)
    return model.eval()


def grad_flow(model: nn.Module, inputs: Tensor, targets: Tensor, wrt: str = "h",
              double: bool = True) -> Tensor:
    """Mean norm of ∂L_T/∂h_t by lag for an RNNLM-like ``model`` (see the module docstring).

    ``inputs`` (T, B) int64, ``targets`` (B,) the symbols after ``inputs[-1]``. Returns (T + 1,),
    entry ``k`` the batch mean of ``‖∂L_T/∂h_{T−k}‖`` (``k = T`` is the initial state). With
    ``double`` (default) a float64 copy of the model is used, so that gradients of 1e-40 and below
    do not underflow to 0 as they do in float32; ``model`` itself is left unchanged.
    """
    if wrt not in ("h", "state"):
        raise ValueError(f"wrt must be 'h' or 'state', got {wrt!r}")
    if double:
        model = copy.deepcopy(model).double()
    was_training = model.training
    model.eval()
    T, B = inputs.shape
    with torch.enable_grad():
        states = [tuple(s.clone().requires_grad_(True) for s in st)
                  for st in model.start(B)]
        seen = [states]
        out = None
        for t in range(T):
            out = model.features(inputs[t : t + 1], states)
            states = out.states
            seen.append(states)
        h_last = states[-1][0]
        if out is None or torch.allclose(out.out[-1], h_last, atol=1e-6):
            logits = model.logits(h_last)   # through the state itself: lag 0 is ∂L_T/∂h_T
        else:                               # a cell whose output is not its state
            logits = model.logits(out.out[-1])
        loss = F.cross_entropy(logits.float(), targets, reduction="sum")
        per_t = [[s for st in sts for s in (st[:1] if wrt == "h" else st)] for sts in seen]
        flat = [s for group in per_t for s in group]
        grads = torch.autograd.grad(loss, flat, allow_unused=True)
    norms = torch.zeros(T + 1, dtype=torch.float64)
    it = iter(grads)
    for t, group in enumerate(per_t):
        sq = torch.zeros(B, dtype=torch.float64)
        for g in (next(it) for _ in group):
            if g is not None:
                sq += g.detach().double().pow(2).reshape(B, -1).sum(-1)
        norms[T - t] = sq.sqrt().mean()
    model.train(was_training)
    return norms


def random_batch(vocab_size: int, length: int, batch: int, seed: int) -> tuple[Tensor, Tensor]:
    """Uniformly random symbols: inputs (length, batch), targets (batch,)."""
    g = torch.Generator().manual_seed(seed)
    seq = torch.randint(0, vocab_size, (length + 1, batch), generator=g)
    return seq[:-1], seq[-1]


def ptb_char_batch(length: int, batch: int, vocab: Any = None) -> tuple[Tensor, Tensor, Any]:
    """The start of the PTB character training text cut into ``batch`` consecutive rows of
    ``length + 1`` symbols: inputs (length, batch), targets (batch,), and the vocabulary (built
    from PTB-char training text unless a run's ``vocab`` is given)."""
    from treelm.data.corpus import load_corpus

    corpus = load_corpus({"source": "ptb-char"}, None, vocab)
    need = batch * (length + 1)
    seq = corpus.train[:need].view(batch, length + 1).t()
    return seq[:-1], seq[-1], corpus.vocab


def write_csv(results: list[FlowResult], path: str | Path) -> None:
    lines = ["lag,cell,mean_grad_norm"]
    for r in results:
        for lag, v in enumerate(r.norms.tolist()):
            lines.append(f"{lag},{r.label},{v:.6e}")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def plot(results: list[FlowResult], path: str | Path, title: str, decades: float = 30) -> None:
    """Log-scale plot of mean ‖∂L_T/∂h_t‖ against the lag, one line per model.

    The y axis shows at most ``decades`` powers of ten below the largest value, so that one fast-
    vanishing model does not flatten the others; a model that falls below says from which lag in
    its legend entry (the CSV has every value).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    top = max(float(r.norms.max()) for r in results)
    pos = [float(r.norms[r.norms > 0].min()) for r in results if bool((r.norms > 0).any())]
    floor = max(min(pos, default=top), top * 10.0 ** (-decades))
    fig, ax = plt.subplots(figsize=(8.5, 5.2), dpi=120)
    for r in results:
        y = r.norms.numpy().copy()
        y[y <= 0] = math.nan                          # log scale: leave exact zeros out
        label = r.label
        for b in r.elman:
            rel = "<" if b.vanishing_guaranteed else "≥"
            label += f"  (σ_max(W_hh) = {b.sigma_max:.2f} {rel} 1/γ = {b.bound:g})"
        below = [k for k, v in enumerate(r.norms.tolist()) if v < floor]
        if below:
            label += f"  (below the axis from lag {below[0]})"
        ax.plot(range(len(y)), y, label=label, linewidth=1.8)
    ax.set_yscale("log")
    ax.set_ylim(floor, top * 3)
    ax.set_xlabel("lag T − t (steps back from the loss)")
    ax.set_ylabel("mean ‖∂L_T / ∂h_t‖")
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.1)
    ax.set_xlim(0, max(len(r.norms) for r in results) - 1)
    ax.legend(fontsize=9, loc="best", framealpha=0.85)
    if any(r.elman for r in results):
        title += "\nElman: vanishing guaranteed when σ_max(W_hh) < 1/γ (Pascanu et al. 2013)"
    ax.set_title(title, fontsize=10.5)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def _labels(names: list[str]) -> list[str]:
    """Unique labels: the names themselves, suffixed #2, #3 … where repeated."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}#{seen[n]}")
    return out


def flow_study(cells: list[str] | None = None, runs: list[str] | None = None, *,
               hidden: int = 128, length: int = 100, batch: int = 32, seed: int = 0,
               data: str = "random", vocab_size: int = 50, wrt: str = "h",
               checkpoint: str = "best") -> list[FlowResult]:
    """Gradient flow of fresh ``cells`` (size ``hidden``, one shared batch) or of trained
    ``runs`` (each on a batch of its own vocabulary), ``length`` steps of ``data`` (``random``
    symbols or the start of the ``ptb-char`` training text)."""
    from treelm.cells import CELLS
    from treelm.run import load_run

    models: list[tuple[str, str, Any, Any]] = []      # (name, cell, model, vocab or None)
    for c in cells or []:
        if c not in CELLS:
            raise TreelmError(f"unknown cell {c!r}; choose from {', '.join(CELLS)}")
        models.append((c, c, None, None))
    for d in runs or []:
        r = load_run(d, checkpoint, expect="lm")
        cell = r.task.config.model.get("cell", "lstm")
        models.append((f"{cell}:{Path(d).name}", cell, r.model, r.vocab))
    if runs and len({m[1] for m in models}) == len(models):     # cell names are unique labels
        models = [(m[1], *m[1:]) for m in models]
    if cells:
        if data == "ptb-char":
            x0, y0, vocab = ptb_char_batch(length, batch)
            vocab_size = len(vocab)
        else:
            x0, y0 = random_batch(vocab_size, length, batch, seed)
    results = []
    for label, (_, cell, model, vocab) in zip(_labels([m[0] for m in models]), models):
        if model is None:
            try:
                model = fresh_model(cell, vocab_size, hidden, seed)
            except ValueError as e:      # e.g. a Tensor RNN too large to build
                raise TreelmError(str(e)) from None
            x, y = x0, y0
        elif data == "ptb-char":
            x, y, _ = ptb_char_batch(length, batch, vocab)
        else:
            x, y = random_batch(len(vocab), length, batch, seed)
        norms = grad_flow(model, x, y, wrt=wrt)
        results.append(FlowResult(label, cell, norms, elman_bounds(model)))
    return results


def study_title(fresh: bool, length: int, batch: int, hidden: int, data: str) -> str:
    what = "fresh cells" if fresh else "trained runs"
    size = f", H = {hidden}" if fresh else ""
    return (f"Gradient flow, {what}: T = {length}, B = {batch}{size}, {data} data, "
            "L_T = last-step loss")
