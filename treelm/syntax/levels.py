"""Per-token master-gate levels of a trained ON-LSTM language model, for tree induction.

Shen et al., "Ordered Neurons" (ICLR 2019), Sec. 5.2 / Table 2 read a binary constituency tree
off a language model: at word ``w_t`` each ON-LSTM layer's master forget gate ``f̃_t`` (L levels)
gives the split-point estimate

    d_f,t = 1 − mean_k f̃_t(k)          (the "distance" of the official code; in [0, 1])

and ``build_tree`` (:mod:`treelm.syntax.trees`) splits every span at its highest level. The
master-input-gate level ``d_i,t = mean_k ĩ_t(k)`` is reported alongside. Both come from the cell
as ``LMOutput.aux[layer]["df"]`` / ``["di"]`` (see :mod:`treelm.cells.onlstm`).

Input protocol (official ``test_phrase_grammar.py`` + ``data_ptb.py``): every sentence is read
*alone from the zero state* as ``<eos> w_1 … w_n <eos>`` and the levels of positions ``1 … n``
(``gates[1:-1]``, the steps that read ``w_1 … w_n``) are kept; the two wrappers are dropped, so a
sentence of n words gets exactly n levels per layer. Two exact shortcuts keep this fast:

* the model reads left to right, so the closing ``<eos>`` cannot influence positions ``1 … n``
  and is not run at all;
* the opening ``<eos>`` step from the zero state is the same for every sentence: it is run once
  and its state starts every sentence.

Many sentences are evaluated in batches: sorted by length (longest first), padded *to the right*
(padding comes after a sentence's last word, so it never reaches that sentence's kept positions),
``batch_size`` at a time; a batch reads :data:`STEPS` positions a pass, and each pass drops the
columns of the sentences that have ended, so the padding is mostly not run. Results equal
one-by-one evaluation up to float rounding (tested to 1e-6). The model runs in eval mode (no
dropout) under ``torch.no_grad``; its previous mode is restored afterwards. The vocabulary
decoder (``V × E`` per token) is skipped: only the embedding and the recurrent stack run.

Shapes: per sentence, ``df`` and ``di`` are ``(n_layers, n)`` float32 arrays, row ``k`` for the
``k``-th ON-LSTM layer (``layers[k]`` is its 1-based number in the model).

The verbs obtain levels in one place, :func:`treelm.syntax.sources.level_source`: a
:class:`~treelm.syntax.sources.LevelSource` holds a run's layers with master gates, the tokenizer
of the text its model reads, and the function that reads tokenised sentences. A language model
reads them as above; a model that reads a *source* sentence (a translation encoder:
``encoder_cells()`` / ``encoder_features()``) gives its encoder's levels over the source symbols
(:mod:`treelm.syntax.source_levels`), for either direction of a bidirectional encoder. Both wrap
their levels with :func:`tokenised_levels`, and this module imports neither of the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from treelm.errors import TreelmError
from treelm.progress import Ticker
from treelm.syntax.trees import Tree, build_tree, mirror_tree
from treelm.text.vocab import Vocab
from treelm.threads import recurrence_threads

NO_MASTER_GATES = "this run's model has no ON-LSTM layers; tree induction needs master gates"
#: Time steps × sentences read per forward pass: a long sentence is read in pieces (the state
#: carried) so that its progress can be reported; shorter batches in one pass.
STEPS = 4096
#: Reading directions: left to right (a language model, a forward encoder stack) or right to
#: left (the second stack of a bidirectional encoder).
DIRECTIONS = ("forward", "backward")


class NoMasterGatesError(TreelmError):
    """The model has no ON-LSTM layer, so there are no master-gate levels to read."""


@dataclass(frozen=True)
class SentenceLevels:
    """Levels of one sentence (wrappers dropped).

    Attributes:
        tokens: the n words as given (before any ``<unk>`` mapping).
        ids: their n vocabulary ids.
        unknown: positions of words outside the vocabulary (read as ``<unk>``).
        df: ``(n_layers, n)`` master-forget-gate levels ``d_f`` (tree induction uses these).
        di: ``(n_layers, n)`` master-input-gate levels ``d_i``.
        layers: 1-based model layer number of each row of ``df`` / ``di``.
        direction: ``"forward"`` (the levels of a left-to-right reading) or ``"backward"``
            (of a right-to-left one; the levels are still in sentence order).
    """

    tokens: list[str]
    ids: list[int]
    unknown: list[int]
    df: np.ndarray
    di: np.ndarray
    layers: tuple[int, ...]
    direction: str = "forward"

    def row(self, layer: int) -> int:
        """Row of ``df`` / ``di`` for 1-based model layer ``layer``."""
        try:
            return self.layers.index(layer)
        except ValueError:
            raise TreelmError(
                f"layer {layer} has no master gates; ON-LSTM layers: "
                f"{', '.join(map(str, self.layers))}"
            ) from None

    def tree(self, layer: int, style: str = "official") -> Tree:
        """``build_tree`` of layer ``layer``'s ``d_f`` over the tokens (needs n >= 1).

        Backward levels were read right to left: the tree is built over the reversed sentence,
        as that reading saw it, and mirrored back into sentence order.
        """
        levels = self.df[self.row(layer)]
        if self.direction == "backward":
            return mirror_tree(build_tree(levels[::-1], self.tokens[::-1], style))
        return build_tree(levels, self.tokens, style)


def master_gate_layers(cells: Sequence[nn.Module]) -> tuple[int, ...]:
    """1-based positions of the ON-LSTM cells (the ones with master gates) among ``cells``.

    Raises:
        NoMasterGatesError: there is none.
    """
    from treelm.cells.onlstm import ONLSTM

    found = tuple(i + 1 for i, layer in enumerate(cells) if isinstance(layer, ONLSTM))
    if not found:
        raise NoMasterGatesError(NO_MASTER_GATES)
    return found


def onlstm_layers(model: nn.Module) -> tuple[int, ...]:
    """1-based numbers of the model's layers that have master gates (ON-LSTM cells).

    Raises:
        NoMasterGatesError: none does, or the model exposes no layers (``layer_cells()``).
    """
    cells = model.layer_cells() if callable(getattr(model, "layer_cells", None)) else []
    return master_gate_layers(cells)


def default_layer(layers: Sequence[int]) -> int:
    """The layer parsed by default: the last-but-one ON-LSTM layer, or the only one.

    For the paper's 3-layer model this is layer 2, the layer the official evaluation reads
    (``distance[1]``) and the best one in Table 2.
    """
    return layers[-2] if len(layers) > 1 else layers[0]


@contextmanager
def _eval_mode(model: nn.Module) -> Iterator[None]:
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def _run(model: nn.Module, tokens: torch.Tensor, states: list | None, rows: list[int],
         lengths: Sequence[int] = (), tick: Ticker | None = None):
    """The model's features only (no output layer); levels ``(n_rows, T, B)`` each.

    Long inputs are read :data:`STEPS` tokens (time steps × sentences) per pass, the state
    carried (the same numbers as one pass), so that ``tick`` counts the words of ``lengths``
    (the sentences' true lengths) as they are read, within one long sentence too. With
    ``lengths``, a pass reads only the columns up to the last sentence still unread at its first
    step: sorted longest first (as :func:`batched_levels` hands them), the batch shrinks as its
    sentences end, and the padding after them, which no kept level depends on, is not run. The
    levels of columns not run are zeros; the states returned are those of the columns read last
    (``benchmarks/validation_floor.py`` counts the positions read against the padded grid's)."""
    T, B = tokens.shape
    steps = max(1, STEPS // B)
    df = di = None
    for lo in range(0, T, steps):
        width = max((b + 1 for b, n in enumerate(lengths) if n > lo), default=B)
        if width < B and states is not None:        # the columns past ``width`` have ended
            states = [tuple(s[:width] for s in state) for state in states]
        B = width
        with recurrence_threads(model, B):          # small steps: 1 thread
            out = model.features(tokens[lo:lo + steps, :B], states)
        states = out.states
        part = [torch.stack([out.aux[r][k] for r in rows]) for k in ("df", "di")]
        if df is None:
            df, di = (p.new_zeros((len(rows), T, tokens.size(1))) for p in part)
        df[:, lo:lo + steps, :B], di[:, lo:lo + steps, :B] = part
        if tick is not None:
            tick.update(sum(max(0, min(n, lo + steps) - lo) for n in lengths))
    return states, df, di


def compute_levels(
    model: nn.Module,
    id_seqs: Sequence[Sequence[int]],
    eos: int,
    batch_size: int = 256,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(df, di)`` per sentence of ids, each ``(n_layers, n)`` float32 (see module docstring).

    Args:
        model: an :class:`~treelm.models.lm.RNNLM` with ON-LSTM layers (on any device).
        id_seqs: sentences as vocabulary ids, *without* ``<eos>`` wrappers; empty ones give
            ``(n_layers, 0)`` arrays.
        eos: the id of ``<eos>``.
        batch_size: sentences per forward pass.

    Raises:
        NoMasterGatesError: the model has no ON-LSTM layer.
    """
    layers = onlstm_layers(model)
    rows = [n - 1 for n in layers]
    device = next(model.parameters()).device
    start: list = []                  # the opening <eos>'s state, run once when first needed

    def read(chunk: list[Sequence[int]], tick: Ticker) -> np.ndarray:
        if not start:   # the opening <eos> from the zero state: the same for every sentence
            start.append(_run(model, torch.full((1, 1), eos, dtype=torch.long, device=device),
                              None, rows)[0])
        B, T = len(chunk), len(chunk[0])
        grid = np.full((T, B), eos, dtype=np.int64)       # right padding
        for b, ids in enumerate(chunk):
            grid[: len(ids), b] = ids
        states = [tuple(s.expand(B, -1).contiguous() for s in state) for state in start[0]]
        _, df, di = _run(model, torch.from_numpy(grid).to(device), states, rows,
                         [len(ids) for ids in chunk], tick)
        return torch.stack((df, di)).permute(3, 0, 1, 2).float().cpu().numpy()  # (B,2,L,T)

    with _eval_mode(model):
        return batched_levels(id_seqs, len(rows), batch_size, read)


def batched_levels(
    id_seqs: Sequence[Sequence[int]],
    n_layers: int,
    batch_size: int,
    read: Callable[[list[Sequence[int]], Ticker], np.ndarray],
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The batching both level readers share: the non-empty sentences sorted longest first,
    ``batch_size`` at a time, to ``read(chunk, tick)`` -> ``(B, 2, n_layers, >= n)`` levels
    (``d_f`` then ``d_i``; the first sentence of a chunk is its longest), cut back to each
    sentence's n and returned in input order; an empty sentence gets ``(n_layers, 0)`` arrays
    unread. ``read`` counts the words it has read on ``tick`` (progress on stderr)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    empty = np.zeros((n_layers, 0), np.float32)
    results = [(empty, empty) for _ in id_seqs]
    order = sorted((i for i, s in enumerate(id_seqs) if len(s)), key=lambda i: -len(id_seqs[i]))
    with Ticker("reading levels", sum(len(s) for s in id_seqs), "words") as tick:
        for lo in range(0, len(order), batch_size):
            chunk = order[lo : lo + batch_size]
            both = read([id_seqs[i] for i in chunk], tick)
            for b, i in enumerate(chunk):
                n = len(id_seqs[i])
                results[i] = (both[b, 0, :, :n], both[b, 1, :, :n])
    return results


#: ``compute(id_seqs)``: the ``(df, di)`` arrays of each id sequence, in input order.
LevelsOf = Callable[[list[list[int]]], list[tuple[np.ndarray, np.ndarray]]]


def tokenised_levels(vocab: Vocab, sentences: Sequence[Sequence[str]], unk: str, what: str,
                     layers: tuple[int, ...], compute: LevelsOf,
                     direction: str = "forward") -> list[SentenceLevels]:
    """The :class:`SentenceLevels` of tokenised sentences, in input order: their ids in
    ``vocab``, the levels ``compute`` reads from those ids, the positions of unknown symbols.
    ``unk="map"`` reads a symbol outside ``vocab`` as ``<unk>``; ``unk="error"`` raises a
    :class:`~treelm.errors.TreelmError` naming it (a ``what``: "word", "source symbol").

    One wrapper for a language model's levels (:func:`sentence_levels`) and an encoder's
    (:func:`treelm.syntax.source_levels.source_sentence_levels`): they differ only in how the
    ids are read.
    """
    ids = [vocab.encode(s, unk, what=what) for s in sentences]
    return [
        SentenceLevels(list(symbols), row, vocab.unknown(symbols), df, di, layers, direction)
        for symbols, row, (df, di) in zip(sentences, ids, compute(ids))
    ]


def sentence_levels(model: nn.Module, vocab: Vocab, sentences: Sequence[Sequence[str]],
                    batch_size: int = 256, unk: str = "map") -> list[SentenceLevels]:
    """Master-gate levels of tokenised sentences (lists of words), in input order.

    Out-of-vocabulary words follow ``unk`` (see :func:`tokenised_levels`). See
    :func:`compute_levels` for the protocol and shapes.
    """
    return tokenised_levels(vocab, sentences, unk, "word", onlstm_layers(model),
                            lambda ids: compute_levels(model, ids, vocab.eos, batch_size))
