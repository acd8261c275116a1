"""Adaptive softmax (Grave, Joulin, Cissé, Grangier & Jégou 2017, "Efficient softmax approximation
for GPUs"): an exact distribution over the vocabulary whose rare words cost less per token.

The vocabulary ids are split at the cutoffs ``k_0 < k_1 < … < k_C = V`` into a head of the
``k_0`` most frequent words and C tail clusters ``V_c = [k_{c-1}, k_c)``. For a hidden state h (d,)
and the layer's word matrix E (V, d) (the embedding when tied):

    head:   z_h = [E[:k_0]; K] h + [b[:k_0]; β]         (k_0 + C,)  a word per row, then one
                                                                     logit per cluster (K, β)
    tail c: u_c = P_c h                                  (d_c,)      d_c = d / div^c, P_c (d_c, d)
            W_c = E[V_c] R_c                             (|V_c|, d_c) R_c (d, d_c), untied
            z_c = W_c u_c + b[V_c]                       (|V_c|,)
    log p(w) = log softmax(z_h)[w]                                  w in the head
    log p(w) = log softmax(z_h)[k_0 + c − 1] + log softmax(z_c)[w − k_{c-1}]   w in V_c

Each softmax is normalised, so Σ_w p(w) = 1 exactly: perplexities are comparable with the full
softmax's. Tying: the head's word rows *are* the embedding's first k_0 rows, and each tail's word
matrix is the embedding's rows of its words projected to d_c by R_c (the projections P_c, R_c and
the cluster rows K, β are the layer's own). So every word's output vector is its input vector,
seen by the tails through the rank-d_c map R_c P_c. At initialisation P_c = R_cᵀ with orthonormal
columns, so a tail starts as the tied full softmax restricted to a d_c-dimensional subspace.

Ids must be ordered by frequency for the head to hold the frequent words; the clusters are
contiguous id ranges. :class:`treelm.text.vocab.Vocab` builds them so (specials first, then by
count on the training split; in a language model's corpus ``<eos>`` and ``<unk>`` are among the
most frequent words anyway), so no permutation is needed. Any order gives the same exact
distribution, only a slower one.

Training (:meth:`AdaptiveSoftmax.loss`) and evaluation (:meth:`AdaptiveSoftmax.target_nll`, the
same sum) run the head on every row and tail c only on the rows whose target is in V_c, each
through :func:`treelm.nn.linear_ce.linear_cross_entropy` (the fused product + softmax
cross-entropy: no logits kept beyond its gradient buffer), so no (N, V) tensor is made. Which
rows those are depends on the data (``nonzero``: a host sync on CUDA, and shapes that change
from batch to batch, so this layer is not for CUDA-graph capture). The full log-probabilities
(:meth:`AdaptiveSoftmax.log_probs`, also its forward: the model's ``logits``, for generation and
probes) compute every tail on every row. The layer is one kind of
:class:`treelm.nn.output.OutputLayer`.

The cluster logits' rate. A cluster logit carries the whole probability mass of its words (13%
of PTB's training tokens for the one tail below): under SGD its bias steps by η (p(c) − f(c))
where f(c) is the batch's share of tail targets, whereas in the full softmax that mass moves
through |V_c| biases, each by its own word's small share. At the tree recipe's η = 30 one β
swings by several nats from batch to batch and the whole model trains worse (the first look of
``studies/trees-output.yaml``). ``cluster_lr_scale`` (``model.output``) gives K and β their own
optimiser group at η × scale (:meth:`AdaptiveSoftmax.optimizer_groups`, made a group by
:mod:`treelm.train.optim`); 1 leaves them at η, as for an adaptive optimiser such as Adam, which
normalises each step anyway.

FLOPs (multiply-adds × 2; forward + backward = 3 × forward, each product's two gradients). Per
token, with N rows in the batch and f_c the fraction of targets in V_c:

    full softmax         6 · V d
    adaptive (training)  6 · [ (k_0 + C) d + Σ_c ( f_c (d d_c + |V_c| d_c) + |V_c| d d_c / N ) ]

where the last term is W_c = E[V_c] R_c, made once per batch and shared by its rows (without a
gradient, once for all the batches of an evaluation, inside its scope of fixed weights:
:meth:`AdaptiveSoftmax.fixed`). For rows few
enough that this does not pay (decoding one token), the tail is taken in the other order,
z_c = E[V_c] (R_c u_c), costing n (|V_c| d + d d_c) instead of |V_c| d_c (d + n) for n rows; the
cheaper order is chosen per call (:func:`weights_first`): the same numbers up to rounding. At the
tree config (d = 400, V = 10,000, N ≈ 20 × 70) with cutoffs [2000] and div 4 (d_1 = 100; 13% of
PTB's training tokens fall in the tail), the training layer is ≈ 6.8 MFLOP per token against
24 (:meth:`AdaptiveSoftmax.loss_macs` counts it from the shapes, ``benchmarks/output_layer.py``
with PTB's counts).

Precision: under bfloat16 autocast every product takes bfloat16 operands and is brought back to
float32 (:func:`treelm.kernels.precision.up`) before anything else touches it; softmaxes, biases,
losses and log-probabilities are float32 (float64 for float64 inputs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from treelm.kernels.gemm import linear
from treelm.kernels.precision import autocast_dtype, autocasting, up
from treelm.nn.linear_ce import linear_cross_entropy, measured
from treelm.nn.output import Groups, OutputLayer


def tail_sizes(dim: int, n_clusters: int, div_value: float) -> list[int]:
    """d_c = d / div^c (floored, at least 1) for c = 1 … C."""
    return [max(1, int(dim // div_value ** (c + 1))) for c in range(n_clusters)]


def weights_first(rows: int, words: int, dim: int, small: int) -> bool:
    """Whether tail logits for ``rows`` rows are cheaper as ``(E_c R_c) u`` (the word matrix
    W_c first: ``words·small·(dim + rows)`` multiply-adds) than as ``E_c (R_c u)``
    (``rows·dim·(words + small)``)."""
    return words * small * (dim + rows) <= rows * dim * (words + small)


class AdaptiveSoftmax(OutputLayer):
    """The output layer of the module docstring for hidden states of size ``dim`` over
    ``vocab_size`` words, split at ``cutoffs`` (increasing, each in (0, V)). ``weight``: the
    word matrix E (V, dim) to tie to (the embedding's Parameter), else the layer's own.
    ``div_value`` >= 1: a tail is never wider than the features it projects."""

    OPTIONS = ("cutoffs", "div_value", "cluster_lr_scale")

    def __init__(self, vocab_size: int, dim: int, cutoffs: list[int], div_value: float = 4.0,
                 weight: nn.Parameter | None = None, cluster_lr_scale: float = 1.0) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if not cutoffs:
            raise ValueError("an adaptive softmax needs cutoffs, e.g. [2000]")
        if any(b <= a for a, b in zip([0, *cutoffs], [*cutoffs, vocab_size])):
            raise ValueError(f"cutoffs must increase strictly within (0, {vocab_size}) "
                             f"(the vocabulary's size), got {cutoffs}")
        if div_value < 1:
            raise ValueError(f"div_value must be >= 1, got {div_value}")
        if cluster_lr_scale <= 0:
            raise ValueError(f"cluster_lr_scale must be > 0, got {cluster_lr_scale}")
        if weight is not None and tuple(weight.shape) != (vocab_size, dim):
            raise ValueError(f"the tied weight has shape {tuple(weight.shape)}, expected "
                             f"({vocab_size}, {dim})")
        self.vocab_size, self.dim = vocab_size, dim
        self.cutoffs, self.div_value = cutoffs, div_value
        self.bounds = [*cutoffs, vocab_size]            # V_c = [bounds[c-1], bounds[c])
        n_clusters = len(cutoffs)
        self.sizes = tail_sizes(dim, n_clusters, div_value)
        self.register_buffer("cut", torch.tensor(cutoffs), persistent=False)
        if weight is None:
            weight = nn.Parameter(torch.empty(vocab_size, dim).uniform_(-0.1, 0.1))
        self.weight = weight
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        self.cluster_weight = nn.Parameter(torch.empty(n_clusters, dim).uniform_(-0.1, 0.1))
        self.cluster_bias = nn.Parameter(torch.zeros(n_clusters))
        # the trainer's rate for K and β is train.lr × this (optimizer_groups): see "The
        # cluster logits' rate" in the module docstring
        self.cluster_lr_scale = cluster_lr_scale
        self.tail_in = nn.ParameterList()       # P_c (d_c, d)
        self.tail_out = nn.ParameterList()      # R_c (d, d_c)
        for small in self.sizes:
            r = nn.init.orthogonal_(torch.empty(dim, small))
            self.tail_in.append(nn.Parameter(r.t().clone()))
            self.tail_out.append(nn.Parameter(r))
        #: the tail's order of products: "auto" (the cheaper, :func:`weights_first`), or
        #: "weights" / "hidden" forced (tests)
        self.order = "auto"
        #: the tails' W_c made inside :meth:`fixed` (``None`` outside it); not state
        self._kept: dict[tuple[object, ...], Tensor] | None = None

    def extra_repr(self) -> str:
        return (f"vocab={self.vocab_size}, dim={self.dim}, cutoffs={self.cutoffs}, "
                f"div_value={self.div_value}, tail sizes={self.sizes}")

    def optimizer_groups(self) -> Groups:
        """K and β at the run's rate × ``cluster_lr_scale`` (one group with the rest at 1)."""
        return [([self.cluster_weight, self.cluster_bias], self.cluster_lr_scale)]

    # ------------------------------------------------------------------ pieces
    def widths(self) -> list[int]:
        """The head's words, then each tail's: ``[k_0, |V_1|, …]``."""
        return [b - a for a, b in zip([0, *self.bounds], self.bounds)]

    def pieces(self, weights: Sequence[Tensor] | None = None
               ) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
        """E and b cut at the cutoffs: ``(E[:k_0], E[V_1], …), (b[:k_0], b[V_1], …)`` (E's
        ``weights`` where a tied model cut them). One split rather than a slice per use: a
        split's backward writes E's gradient once, where each slice's would fill a zero (V, d)
        tensor and add it."""
        widths = self.widths()
        cut = torch.split(self.weight, widths) if weights is None else tuple(weights)
        return cut, torch.split(self.bias, widths)

    def head_params(self, weights: tuple[Tensor, ...] | None = None,
                    biases: tuple[Tensor, ...] | None = None) -> tuple[Tensor, Tensor]:
        """``[E[:k_0]; K]`` (k_0 + C, d) and ``[b[:k_0]; β]`` (from :meth:`pieces`)."""
        if weights is None or biases is None:
            weights, biases = self.pieces()
        return (torch.cat((weights[0], self.cluster_weight)),
                torch.cat((biases[0], self.cluster_bias)))

    def _first(self, c: int, rows: int) -> bool:
        if self.order != "auto":
            return self.order == "weights"
        lo, hi = self.bounds[c], self.bounds[c + 1]
        return weights_first(rows, hi - lo, self.dim, self.sizes[c])

    def _tail_operands(self, c: int, h: Tensor, words: Tensor) -> tuple[Tensor, Tensor]:
        """``(a, M)`` with ``a Mᵀ`` the tail c's logits (bias aside) for the rows ``h`` (n, d),
        ``words`` = E[V_c]: ``(P_c h, E[V_c] R_c)`` or ``(R_c P_c h, E[V_c])``, whichever costs
        less."""
        u = up(F.linear(h, self.tail_in[c]))                   # (n, d_c)
        if self._first(c, h.size(0)):
            return u, self._word_matrix(c, words)
        return up(F.linear(u, self.tail_out[c])), words

    def _word_matrix(self, c: int, words: Tensor) -> Tensor:
        """``W_c = E[V_c] R_c``, in float32 (:func:`up`). Inside :meth:`fixed` and without a
        gradient it is made once and handed out again for the same ``words`` in the same
        autocast dtype: an evaluation scores its rows block by block (1,677 rows a block at the
        tree config), and each block made the same (8000 × 400)·(400 × 100) product again,
        about 1 s of a tree run's seven validations on a 2-core Zen 4. The product is the one
        it would have made, so the same bits. Only a scope says that the weights stay: PyTorch's
        fused SGD and writes through ``.data`` leave a tensor's version counter as it was."""
        r = self.tail_out[c]
        if self._kept is None or torch.is_grad_enabled():
            return up(self._words_times(words, r))
        key = (c, words.data_ptr(), words.shape, autocast_dtype(words.device.type))
        kept = self._kept.get(key)
        if kept is None:
            kept = self._kept[key] = up(self._words_times(words, r))
        return kept

    @contextlib.contextmanager
    def fixed(self) -> Iterator[None]:
        """A scope in which the layer's weights do not change (one evaluation): the tails'
        word matrices made inside without a gradient are kept until it ends
        (:func:`treelm.nn.fixed.fixed_weights` opens it; nested scopes share the outer's)."""
        if self._kept is not None:
            yield
            return
        self._kept = {}
        try:
            yield
        finally:
            self._kept = None

    @staticmethod
    def _words_times(words: Tensor, r: Tensor) -> Tensor:
        """``E[V_c] R_c`` (a fixed shape, the tail's largest product): in float32 as ``linear``
        (the backend measured fastest) where :func:`~treelm.nn.linear_ce.measured`, else
        ``torch.mm`` (under autocast its bfloat16 product)."""
        if autocasting(words.device.type) or not measured(words, r):
            return torch.mm(words, r)
        return linear(words, r.t())

    # ------------------------------------------------------------------ the uses
    def loss(self, h: Tensor, target: Tensor, pieces: Sequence[Tensor] | None = None
             ) -> Tensor:
        """Mean −log p(target) over the rows of ``h`` (N, d), ``target`` (N,), without any
        (N, V) tensor: the head on every row, tail c on the rows whose target is in V_c.
        ``pieces``: E cut at :meth:`widths` by the caller (a tied model)."""
        if h.dim() != 2 or target.shape != h.shape[:1]:
            raise ValueError(f"AdaptiveSoftmax.loss: h (N, d) and target (N,), got "
                             f"{tuple(h.shape)} and {tuple(target.shape)}")
        n, k0 = h.size(0), self.cutoffs[0]
        target = target.to(torch.int64)
        cluster = torch.bucketize(target, self.cut, right=True)
        head_target = torch.where(cluster == 0, target, k0 + cluster - 1)
        weights, biases = self.pieces(pieces)
        w, b = self.head_params(weights, biases)
        total = linear_cross_entropy(h, w, b, head_target) * n
        for c in range(len(self.cutoffs)):
            rows = (cluster == c + 1).nonzero().squeeze(1)
            if rows.numel() == 0:
                # no target there: a zero that keeps P_c and R_c in the graph (DDP expects
                # every parameter to get a gradient)
                total = total + 0.0 * (self.tail_in[c].sum() + self.tail_out[c].sum())
                continue
            a, m = self._tail_operands(c, h.index_select(0, rows), weights[c + 1])
            t = target.index_select(0, rows) - self.bounds[c]
            total = total + linear_cross_entropy(a, m, biases[c + 1], t) * rows.numel()
        return total / n

    def target_nll(self, h: Tensor, target: Tensor) -> Tensor:
        """Σ −log p(target) over the rows of ``h`` (N, d): :meth:`loss` × N (evaluation: the
        head on every row, a tail only on the rows whose target is in it, 3-4x less work than
        :meth:`log_probs` at the tree config)."""
        return self.loss(h, target) * h.size(0)

    def log_probs(self, h: Tensor) -> Tensor:
        """log p(w) for every word w: (..., d) -> (..., V), float32 at least."""
        lead, d = h.shape[:-1], h.size(-1)
        h = h.reshape(-1, d)
        k0 = self.cutoffs[0]
        weights, biases = self.pieces()
        w, b = self.head_params(weights, biases)
        z = up(F.linear(h, w))
        acc = torch.promote_types(z.dtype, torch.float32)
        head = torch.log_softmax(z.to(acc) + b.to(acc), dim=-1)
        parts = [head[:, :k0]]
        for c in range(len(self.cutoffs)):
            a, m = self._tail_operands(c, h, weights[c + 1])
            zc = up(F.linear(a, m)).to(acc) + biases[c + 1].to(acc)
            parts.append(torch.log_softmax(zc, dim=-1) + head[:, k0 + c : k0 + c + 1])
        return torch.cat(parts, dim=1).view(*lead, self.vocab_size)

    def forward(self, h: Tensor) -> Tensor:
        return self.log_probs(h)

    # ------------------------------------------------------------------ the cost
    def tail_fractions(self, targets: Tensor) -> list[float]:
        """The share of ``targets`` in each tail V_c (the f_c of the module docstring)."""
        cluster = torch.bucketize(targets, self.cut.to(targets.device), right=True)
        counts = torch.bincount(cluster, minlength=len(self.bounds)).double()
        return [float(counts[c + 1] / targets.numel()) for c in range(len(self.cutoffs))]

    def loss_macs(self, rows: int, fractions: Sequence[float] = ()) -> dict[str, float]:
        """Multiply-adds per token of :meth:`loss`'s forward on ``rows`` rows of which the
        share ``fractions[c]`` have their target in tail c (:meth:`tail_fractions`), by part
        (``head``, ``tail1``, …), each tail in the order of products the layer takes for its
        rows (the module docstring's formula, FLOPs = 2 × these)."""
        if len(fractions) != len(self.cutoffs):
            raise ValueError(f"loss_macs: one fraction per tail ({len(self.cutoffs)}), got "
                             f"{len(fractions)}")
        d = self.dim
        parts = {"head": float((self.cutoffs[0] + len(self.cutoffs)) * d)}
        for c, (small, f) in enumerate(zip(self.sizes, fractions)):
            words, n = self.bounds[c + 1] - self.bounds[c], f * rows
            part = f * d * small                                      # u = P_c h
            if n == 0:
                pass
            elif self._first(c, round(n)):
                part += words * d * small / rows + f * words * small   # W_c = E R_c, W_c u
            else:
                part += f * (d * small + words * d)                    # R_c u, E (R_c u)
            parts[f"tail{c + 1}"] = part
        return parts

    def log_probs_macs(self, rows: int) -> float:
        """Multiply-adds per token of :meth:`log_probs` on ``rows`` rows at once: every tail on
        every row (evaluation of every word, generation)."""
        d = self.dim
        total = float((self.cutoffs[0] + len(self.cutoffs)) * d)
        for c, small in enumerate(self.sizes):
            words = self.bounds[c + 1] - self.bounds[c]
            total += d * small + (words * small * (d + rows) / rows if self._first(c, rows)
                                  else d * small + words * d)
        return total
