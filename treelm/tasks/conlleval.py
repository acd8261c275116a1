"""Chunk-level precision, recall and F1 as the CoNLL shared tasks' ``conlleval`` script counts them.

A tag is ``O`` or ``X-type`` (``X`` in ``B I E``: IOB1, IOB2 and the script's E rules). Chunk
boundaries follow conlleval's ``startOfChunk`` / ``endOfChunk`` rules pair by pair, so an ``I-x``
after ``O`` or after another type *starts* a chunk (conlleval is lenient; ``seqeval``'s default
mode agrees).
A predicted chunk is correct when a gold chunk has the same type, start and end. With ``C``
correct, ``P`` predicted and ``G`` gold chunks:

    precision = C / P,   recall = C / G,   F1 = 2 · precision · recall / (precision + recall)

all in percent, over every utterance of the split at once (micro average), as conlleval prints.
"""

from __future__ import annotations

from collections.abc import Sequence


def _split(tag: str) -> tuple[str, str]:
    """``B-city`` -> ``("B", "city")``; ``O`` -> ``("O", "")`` (split at the first ``-``)."""
    prefix, _, kind = tag.partition("-")
    return prefix, kind


# conlleval's rules, pair by pair: (previous tag, this tag) that end / start a chunk; besides
# these, a change of type ends a chunk (unless the previous tag is O) and starts one (unless this
# tag is O)
_END = {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"), ("E", "I"), ("E", "O")}
_START = {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"), ("E", "E"), ("E", "I"), ("O", "E")}


def _ends(prev: str, prev_type: str, tag: str, kind: str) -> bool:
    """Did a chunk end just before ``tag`` (conlleval's endOfChunk)?"""
    return (prev, tag) in _END or (prev != "O" and prev_type != kind)


def _starts(prev: str, prev_type: str, tag: str, kind: str) -> bool:
    """Does a chunk start at ``tag`` (conlleval's startOfChunk)?"""
    return (prev, tag) in _START or (tag != "O" and prev_type != kind)


def chunks(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """The chunks of one utterance as ``(type, start, end)``, ``end`` exclusive."""
    out: set[tuple[str, int, int]] = set()
    prev, prev_type, start = "O", "", -1
    for i, t in enumerate([*tags, "O"]):        # a final O closes an open chunk
        tag, kind = _split(t)
        if start >= 0 and _ends(prev, prev_type, tag, kind):
            out.add((prev_type, start, i))
            start = -1
        if _starts(prev, prev_type, tag, kind):
            start = i
        prev, prev_type = tag, kind
    return out


def chunk_scores(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> dict[str, float]:
    """Precision, recall and F1 (percent) of ``pred`` against ``gold``, utterance by utterance."""
    correct = found_pred = found_gold = 0
    for g, p in zip(gold, pred, strict=True):
        if len(g) != len(p):
            raise ValueError(f"{len(p)} predicted tags for {len(g)} gold tags")
        cg, cp = chunks(g), chunks(p)
        correct += len(cg & cp)
        found_pred += len(cp)
        found_gold += len(cg)
    precision = 100.0 * correct / found_pred if found_pred else 0.0
    recall = 100.0 * correct / found_gold if found_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}
