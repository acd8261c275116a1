"""The teacher corpus: training sentences for ensemble distillation, evaluation sentences out.

A student learns the tree average of its teachers over sentences of its own training text
(``train.tree_teacher``, :mod:`treelm.tasks.tree_teacher`). The default text is Mikolov's PTB
training split (WSJ sections 0-20), one sentence a line, and NLTK's WSJ sample that treelm scores
trees on (``nltk-dev``, ``nltk-test``: sections 00-01) lies inside it. So before any tree is made
the sentences of the held-out treebanks are dropped, or the student would be taught the
ensemble's trees of its own test sentences.

The two texts spell words differently (Mikolov's maps numbers to ``N``, keeps ``$``, splits long
lists of names into several lines, and has ``<unk>`` where the treebank has the rare word), so a
sentence is matched by its *skeleton*: its lower-case words that are in the PTB vocabulary, in
order (``N``, ``$``, ``<unk>`` and numbers left out). A PTB line is dropped when its skeleton is
a held-out sentence's, or, for the few held-out sentences whose skeleton no line has, when its
skeleton of at least :data:`MIN_PIECE` words lies inside theirs. This errs on the side of
dropping: a short skeleton shared by an unrelated line drops that line too, and
:func:`held_out` counts both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

#: A word of the skeleton: lower-case letters first (so not ``N``, ``$``, ``<unk>``, ``N,N``).
_WORD = re.compile(r"[a-z][a-z'&.-]*")
#: The fewest skeleton words of a PTB line matched inside a longer held-out sentence.
MIN_PIECE = 5


def ptb_sentences(split: str = "train") -> list[list[str]]:
    """Mikolov's PTB ``split`` (the ``treebank`` package: no download), a sentence a line."""
    from treelm.data.corpus import ptb_text

    return [line.split() for line in ptb_text()[split].split("\n") if line.strip()]


def skeleton(words: Sequence[str], vocab: set[str]) -> tuple[str, ...]:
    """The words that both texts spell alike (module docstring)."""
    return tuple(w for w in words if w in vocab and _WORD.fullmatch(w))


def held_out(sentences: Sequence[Sequence[str]], parts: dict[str, Sequence[Sequence[str]]]
             ) -> tuple[list[int], dict[str, dict[str, int]]]:
    """The indices of ``sentences`` that no held-out sentence matches, and per part (name: its
    sentences' words) ``{"sentences", "matched", "dropped"}``: its size, how many of its
    sentences matched a line, and how many lines it dropped."""
    vocab = {w for s in sentences for w in s}
    keys = [skeleton(s, vocab) for s in sentences]
    lines: dict[tuple[str, ...], list[int]] = {}
    for i, k in enumerate(keys):
        lines.setdefault(k, []).append(i)
    gone: set[int] = set()
    counts: dict[str, dict[str, int]] = {}
    for name, gold in parts.items():
        matched, dropped = 0, set()
        for words in gold:
            k = skeleton(words, vocab)
            hits = lines.get(k, [])
            if not hits and len(k) >= MIN_PIECE:
                text = f" {' '.join(k)} "
                hits = [i for i, key in enumerate(keys)
                        if len(key) >= MIN_PIECE and f" {' '.join(key)} " in text]
            matched += bool(hits)
            dropped.update(hits)
        counts[name] = {"sentences": len(gold), "matched": matched, "dropped": len(dropped)}
        gone |= dropped
    return [i for i in range(len(sentences)) if i not in gone], counts


def teacher_record(sources: Sequence[str], corpus: str, total: int, kept: int,
                   dropped: dict[str, Any], minutes: float, command: str) -> dict[str, Any]:
    """What a teacher tree file was made of, saved beside it as JSON."""
    return {"sources": list(sources), "corpus": corpus, "sentences": total, "trees": kept,
            "held_out": dropped, "dropped": total - kept, "minutes": round(minutes, 2),
            "command": command}


__all__ = ["MIN_PIECE", "held_out", "ptb_sentences", "skeleton", "teacher_record"]
