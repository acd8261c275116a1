"""The evaluation brackets of many sentences' trees read straight off their levels, and their
sentence F1 against gold brackets, all sentences of a chunk at once: the training-time tracker's
path (:class:`treelm.syntax.tracking.ParseTracker`), which scores every layer under every rule on
the dev trees at each validation and wants their F1 only, not the trees.

Both rules of :func:`treelm.syntax.trees.build_tree` are max-Cartesian trees of the levels
``v_0 … v_{n-1}`` (ties: the leftmost is the ancestor), so node ``k`` covers

    lo_k = 1 + max{j < k : v_j ≥ v_k}   (0 when there is none)
    hi_k = min{j > k : v_j > v_k}       (n when there is none)

* ``official`` (``[tree(x_<k), [x_k, tree(x_>k)]]``): its brackets are
  ``{[lo_k, hi_k)} ∪ {[k, hi_k) : lo_k < k}``, the spans of ≥ 2 words;
* ``split`` (``[tree(x_<k), tree(x_≥k)]``, ``k`` over 1 … n-1): the same bounds with ``v_0 := +∞``
  give, for each ``k ≥ 1``, the span ``[lo_k − 1, hi_k)`` that ``k`` splits.

The whole sentence ``[0, n)`` is dropped, as :func:`treelm.syntax.metrics.brackets` drops it.
Why: building 6 nested-list trees per sentence (3 layers × 2 rules) and walking them back into
span sets took a quarter of a validation of the tree config; here the bounds are two
comparisons of every pair of positions in a padded chunk of sentences (``(S, N, N)`` booleans),
the brackets an ``(S, N+1, N+1)`` mask, and the F1 sums over masks, with the per-sentence
conventions of :func:`treelm.syntax.metrics.sentence_prf`. ``tests/test_level_brackets.py``
checks every bracket set against ``brackets(build_tree(...))`` (ties included) and the F1
against :func:`~treelm.syntax.metrics.span_prf`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from treelm.syntax.trees import TREE_STYLES

Span = tuple[int, int]

#: Sentences per chunk: the chunk's ``(S, N, N)`` comparisons stay a few megabytes.
CHUNK = 256


def _bounds(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)``, each ``(S, N)``, of the module docstring for padded levels ``v`` (S, N)
    whose padding is ``+inf`` (at least one padded column, so every real ``hi`` exists)."""
    n = v.shape[1]
    j = np.arange(n)
    later = j[None, :] > j[:, None]                              # [k, j]: j after k
    above = (v[:, None, :] > v[:, :, None]) & later              # v_j > v_k, j > k
    hi = np.where(above.any(2), above.argmax(2), n)
    before = j[None, :] < j[:, None]
    atleast = (v[:, None, :] >= v[:, :, None]) & before          # v_j ≥ v_k, j < k
    last = n - 1 - atleast[:, :, ::-1].argmax(2)                 # the nearest such j
    lo = np.where(atleast.any(2), last + 1, 0)
    return lo, hi


def bracket_masks(levels: Sequence[np.ndarray], rule: str) -> np.ndarray:
    """``mask[s, i, j]``: whether ``[i, j)`` is a bracket of sentence ``s``'s tree under ``rule``
    (every sentence of at least one word; ``(S, N+1, N+1)``, ``N`` the longest).

    Raises:
        ValueError: an unknown rule, an empty sentence or a NaN level (as ``build_tree``).
    """
    if rule not in TREE_STYLES:
        raise ValueError(f"unknown tree style {rule!r}; choose one of {TREE_STYLES}")
    lengths = np.array([len(lv) for lv in levels])
    if (lengths == 0).any():
        raise ValueError("cannot build a tree over zero tokens")
    S, N = len(levels), int(lengths.max())
    v = np.full((S, N + 1), np.inf)
    for s, lv in enumerate(levels):
        v[s, : len(lv)] = lv
    if np.isnan(v).any():
        raise ValueError("levels contain NaN")
    real = np.arange(N + 1)[None, :] < lengths[:, None]         # [s, k]: k is a word
    k = np.broadcast_to(np.arange(N + 1), v.shape)
    rows = np.broadcast_to(np.arange(S)[:, None], v.shape)
    mask = np.zeros((S, N + 1, N + 1), dtype=bool)        # (every bound is <= N)
    if rule == "official":
        lo, hi = _bounds(v)
        whole = real & (hi - lo >= 2)
        mask[rows[whole], lo[whole], hi[whole]] = True
        opens = real & (lo < k) & (hi - k >= 2)
        mask[rows[opens], k[opens], hi[opens]] = True
    else:
        v[:, 0] = np.inf
        lo, hi = _bounds(v)
        split = real & (k >= 1)
        mask[rows[split], lo[split] - 1, hi[split]] = True
    mask[np.arange(S), 0, lengths] = False                       # the whole sentence
    return mask


def gold_masks(gold: Sequence[set[Span]], size: int) -> np.ndarray:
    """``mask[s, i, j]`` of gold bracket sets (``(S, size, size)``)."""
    mask = np.zeros((len(gold), size, size), dtype=bool)
    for s, spans in enumerate(gold):
        for i, j in spans:
            mask[s, i, j] = True
    return mask


def sentence_f1s(levels: Sequence[np.ndarray], rule: str, gold: Sequence[set[Span]]
                 ) -> np.ndarray:
    """Per sentence, the F1 of the brackets of ``build_tree(levels[s], ·, rule)`` against
    ``gold[s]`` (:func:`treelm.syntax.metrics.sentence_prf`'s conventions: no gold bracket
    gives recall 1, and precision 1 when there is no predicted one either), a chunk of
    :data:`CHUNK` sentences at a time.

    Raises:
        ValueError: ``levels`` and ``gold`` differ in length, or as :func:`bracket_masks`.
    """
    if len(levels) != len(gold):
        raise ValueError(f"{len(levels)} sentences of levels for {len(gold)} gold bracket sets")
    out = np.empty(len(levels))
    # chunks of sentences of similar length: the (S, N, N) work follows each chunk's longest
    order = np.argsort([len(lv) for lv in levels], kind="stable")
    for a in range(0, len(order), CHUNK):
        part = order[a : a + CHUNK]
        pred = bracket_masks([levels[i] for i in part], rule)
        ref = gold_masks([gold[i] for i in part], pred.shape[1])
        match = (pred & ref).sum((1, 2))
        n_pred, n_gold = pred.sum((1, 2)), ref.sum((1, 2))
        precision = np.where(n_pred > 0, match / np.maximum(n_pred, 1),
                             np.where(n_gold > 0, 0.0, 1.0))
        recall = np.where(n_gold > 0, match / np.maximum(n_gold, 1), 1.0)
        total = precision + recall
        out[part] = np.where(total > 0, 2 * precision * recall / np.where(total > 0, total, 1),
                             0.0)
    return out


def spans_of(mask: np.ndarray) -> set[Span]:
    """One sentence's brackets as a set of spans (tests and debugging)."""
    return {(int(i), int(j)) for i, j in zip(*np.nonzero(mask))}
