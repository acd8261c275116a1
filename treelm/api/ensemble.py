"""``treelm.ensemble_trees``: the tree ensemble of several sources' trees, from Python.

A thin layer over :func:`treelm.syntax.ensemble.ensemble_trees` (Shayegh et al., "Ensemble
Distillation for Unsupervised Constituency Parsing", ICLR 2024: per sentence, the binary tree
that maximises ``sum_k w_k |spans(T) ∩ spans(T_k)|`` over spans of 2 to n-1 words; ties to the
smallest split point), which takes the API's trees as well as the library's: the ``nltk.Tree``\\ s
that :meth:`~treelm.api.model.TreelmModel.parse` returns come back as ``nltk.Tree``\\ s.
``treelm ensemble`` goes through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from treelm.errors import TreelmError


def ensemble_trees(sources: Sequence[Sequence[Any]],
                  weights: Sequence[float] | None = None) -> list[Any]:
    """Per sentence, the binary tree that shares the most spans with the sources' trees.

    Args:
        sources: one list of trees per source (a run's ``parse``, another parser's trees), each
            with a tree per sentence in the same order and over the same words: ``nltk.Tree``\\ s
            or nested lists (``[["the", "cat"], "sat"]``); labels are ignored, n-ary and unary
            nodes are fine (only spans count).
        weights: one per source, finite and ``>= 0`` (default: all 1).

    Returns:
        One binary tree per sentence: ``nltk.Tree``\\ s labelled ``X`` (as ``parse`` gives) where
        the first source's trees are ``nltk.Tree``\\ s, else nested lists.

    Raises:
        TreelmError: no source, sources of different lengths, a sentence whose trees have other
        words (named), bad weights, or text where a tree belongs (read a file of trees with
        :func:`treelm.syntax.tree_files.read_tree_file`).
    """
    from treelm.syntax.ensemble import ensemble_trees as ensemble

    if isinstance(sources, (str, bytes)) or not sources:
        raise TreelmError("give a list of sources, each a list of trees (one per sentence)")
    for k, source in enumerate(sources, 1):
        if isinstance(source, (str, bytes)) or not isinstance(source, Sequence):
            raise TreelmError(f"source {k} is a {type(source).__name__}, not a list of trees")
        text = next((t for t in source if isinstance(t, str)
                     and (len(t.split()) != 1 or "(" in t or ")" in t)), None)
        if text is not None:
            raise TreelmError(f"source {k} holds text ({text[:40]!r}), not a tree; read a tree "
                              "file with treelm.syntax.tree_files.read_tree_file")
    trees = ensemble(sources, weights)
    first = sources[0][0] if sources[0] else None
    if type(first).__name__ == "Tree" and type(first).__module__.startswith("nltk"):
        from treelm.api.values import to_nltk

        return [to_nltk(t) for t in trees]
    return trees


__all__ = ["ensemble_trees"]
