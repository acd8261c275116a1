"""Tree F1 while a language model trains (``train.eval_parse``).

At every validation the trainer asks a :class:`ParseTracker` for the sentence F1 of the trees
read off each ON-LSTM layer ``k`` under each tree rule ``r`` on a treebank of gold trees:

    parse_f1/r/Lk = (1/S) Σ_s F1(brackets(build_tree(d_f^k(s), r)), brackets(gold(s)))

the number ``treelm eval-parse RUN --treebank T --style r`` reports for layer ``k``, as a
fraction: the levels of every layer read once (:func:`treelm.syntax.levels.sentence_levels`, as
:func:`treelm.syntax.readings.read_parts` reads them), then each rule's brackets and their F1
straight from the levels, every sentence at once (:mod:`treelm.syntax.level_brackets`: the same
brackets as the trees', without building them), against the gold brackets read once. The
figures are logged beside the validation loss.
The model never sees trees, and ``best`` stays the checkpoint of the lowest validation loss;
on dev trees (:func:`chooses`) the figures also choose, by :func:`choose`, each checkpoint's
default layer and rule and the checkpoint ``best-trees`` (:mod:`treelm.train.trees`): choices
made on labelled data.

Shaped for a training loop: the treebank is read and checked once, when the tracker is made
(so a missing treebank, a treebank with no sentence, or a layer without master gates stops a
run before its first batch, in one line); each evaluation runs the model once over the
sentences for the levels of every layer, then only reads brackets off them per rule and
layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from treelm.data.treebank import TREEBANK_NAMES
from treelm.errors import TreelmError
from treelm.syntax.level_brackets import sentence_f1s
from treelm.syntax.levels import onlstm_layers, sentence_levels
from treelm.syntax.metrics import brackets
from treelm.syntax.report import load_golds
from treelm.syntax.trees import TREE_STYLES

#: The named treebanks a layer and rule may be chosen on: the development parts. The other
#: names (``nltk-test``, ``sinica-test``, and ``nltk``, ``sinica``, which hold them) never choose.
DEV_TREEBANKS = ("nltk-dev", "sinica-dev")


def score_key(rule: str, layer: int) -> str:
    """The metrics key of layer ``layer``'s sentence F1 under ``rule``: ``parse_f1/official/L2``."""
    return f"parse_f1/{rule}/L{layer}"


def key_parts(key: str) -> tuple[str, int]:
    """``(rule, layer)`` of a :func:`score_key`."""
    _, rule, layer = key.split("/")
    return rule, int(layer[1:])


def by_rule(scores: dict[str, float]) -> dict[str, dict[str, float]]:
    """``scores`` (keyed by :func:`score_key`) split per rule, in the order the rules appear."""
    out: dict[str, dict[str, float]] = {}
    for k, f in scores.items():
        out.setdefault(key_parts(k)[0], {})[k] = f
    return out


def chooses(treebank: str, paths: bool) -> bool:
    """Whether scores on ``treebank`` may choose a layer and rule: a named development part
    always, another named treebank never (it holds test sentences), a path as ``paths`` says
    (``train.eval_parse`` takes the file its config names as the run's dev trees; ``eval-parse``
    cannot tell a dev file from a test one, so it never chooses on a path)."""
    if treebank in DEV_TREEBANKS:
        return True
    return paths and treebank not in TREEBANK_NAMES


def choose(scores: dict[str, float]) -> tuple[str, int, float]:
    """``(rule, layer, sentence F1)`` of the highest sentence F1 among ``scores`` (keyed by
    :func:`score_key`). Ties go to the official rule before the split rule, then to the lower
    layer: the paper's rule, and the layer nearer the words."""
    def order(key: str) -> tuple[float, int, int]:
        rule, layer = key_parts(key)
        return -scores[key], TREE_STYLES.index(rule), layer

    rule, layer = key_parts(min(scores, key=order))
    return rule, layer, scores[score_key(rule, layer)]


class ParseTracker:
    """Sentence F1 per tree rule and ON-LSTM layer of a model on a fixed set of gold trees.

    Args:
        treebank: what :func:`treelm.data.treebank.load_treebank` reads (``nltk-dev``, ``nltk``,
            a ``.mrg`` file, a directory, a glob).
        model: the language model to be scored (its ON-LSTM layers are checked here).
        layers: 1-based ON-LSTM layers to score, or ``"all"``.
        rules: tree rules (styles of :func:`~treelm.syntax.trees.build_tree`).
        max_len: keep sentences of at most this many words (``None``: all).
        max_sentences: keep the first this many sentences (after ``max_len``; ``None``: all).
        batch_size: sentences per forward pass.

    Raises:
        TreelmError: the treebank is missing, malformed or left empty; a layer has no master
        gates; an unknown rule.
    """

    def __init__(self, treebank: str, model: nn.Module, layers: Sequence[int] | str = "all",
                 rules: Sequence[str] = TREE_STYLES, max_len: int | None = None,
                 max_sentences: int | None = None, batch_size: int = 256) -> None:
        unknown = [r for r in rules if r not in TREE_STYLES]
        if unknown or not rules:
            raise TreelmError(f"tree rules {list(rules)}: choose among {', '.join(TREE_STYLES)}")
        available = onlstm_layers(model)
        chosen = list(available) if layers == "all" else list(layers)
        missing = [k for k in chosen if k not in available]
        if missing:
            raise TreelmError(f"layer(s) {', '.join(map(str, missing))} have no master gates; "
                              f"this model's ON-LSTM layers are {', '.join(map(str, available))}")
        golds = load_golds(treebank, max_len)
        self.golds = golds[:max_sentences] if max_sentences else golds
        # the gold side of every score, read once: a validation then builds and reads only the
        # model's trees (6 of them per sentence with 3 layers and 2 rules)
        self.gold_brackets = [brackets(g.tree) for g in self.golds]
        self.treebank, self.layers, self.rules = treebank, chosen, list(rules)
        self.batch_size = batch_size

    def keys(self) -> list[str]:
        """The metrics keys :meth:`scores` returns, rule by rule, layer by layer."""
        return [score_key(r, k) for r in self.rules for k in self.layers]

    def scores(self, model: nn.Module, vocab: Any) -> dict[str, float]:
        """``{parse_f1/<rule>/L<k>: sentence F1}`` of ``model`` now (words outside ``vocab``
        read as ``<unk>``, as ``eval-parse`` reads them); the model's mode is kept."""
        levels = sentence_levels(model, vocab, [g.words for g in self.golds], self.batch_size)
        out: dict[str, float] = {}
        for rule in self.rules:
            for k in self.layers:
                f1 = sentence_f1s([lv.df[lv.row(k)] for lv in levels], rule,
                                  self.gold_brackets)
                out[score_key(rule, k)] = sum(f1.tolist()) / len(f1)   # span_prf's mean
        return out

    def describe(self, scores: dict[str, float]) -> str:
        """One progress line of ``scores``, in percent: ``official L1 22.6 L2 27.6 | split ...``."""
        return " | ".join(f"{r} " + " ".join(f"L{k} {100 * scores[score_key(r, k)]:.1f}"
                                             for k in self.layers) for r in self.rules)
