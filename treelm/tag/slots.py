"""What ``treelm tag`` reads and prints: utterances in, words with their slots out.

Input: one utterance a line, words separated by whitespace (the ``word`` tokenizer, as the
training data). Output, per utterance, either one text line with each slot in brackets::

    [atis_flight] show me flights from [boston : fromloc.city_name] to [denver : toloc.city_name]

or (``--format json``) one JSON object a line: ``words``, ``tags``, ``slots`` (type, text, start,
end exclusive: the chunks conlleval would count) and ``intent``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from treelm.errors import TreelmError
from treelm.tasks.conlleval import chunks
from treelm.tasks.tagging import Tagged
from treelm.text.tokenizers import WordTokenizer


def read_utterances(lines: Iterable[str], where: str) -> list[list[str]]:
    """Whitespace-separated words of each line; an empty line is a one-line error."""
    tok = WordTokenizer()
    out = []
    for i, line in enumerate(lines, 1):
        words = tok.encode_line(line)
        if not words:
            raise TreelmError(f"{where}:{i}: empty utterance (one utterance a line)")
        out.append(words)
    if not out:
        raise TreelmError(f"{where}: no utterances to tag")
    return out


def slots(t: Tagged) -> list[dict[str, Any]]:
    return [{"type": kind, "text": " ".join(t.words[a:b]), "start": a, "end": b}
            for kind, a, b in sorted(chunks(t.tags), key=lambda c: c[1])]


def as_json(t: Tagged) -> str:
    return json.dumps({"words": t.words, "tags": t.tags, "slots": slots(t), "intent": t.intent},
                      ensure_ascii=False)


def as_text(t: Tagged) -> str:
    starts = {s["start"]: s for s in slots(t)}
    parts, i = [], 0
    while i < len(t.words):
        s = starts.get(i)
        if s is None:
            parts.append(t.words[i])
            i += 1
        else:
            parts.append(f"[{s['text']} : {s['type']}]")
            i = s["end"]
    return (f"[{t.intent}] " if t.intent else "") + " ".join(parts)
