"""What ``treelm tag`` reads and prints: utterances in, words with their slots out.

Input: one utterance a line, words separated by whitespace (the ``word`` tokenizer, as the
training data), read and checked by :mod:`treelm.text.inputs` (input without text is an error; a
blank line gives an empty result, so the output stays aligned with the input; words outside the
vocabulary follow ``--unk``). Output, per utterance, either one text line with each slot in
brackets::

    [atis_flight] show me flights from [boston : fromloc.city_name] to [denver : toloc.city_name]

or (``--format json``) one JSON object a line: ``words``, ``tags``, ``slots`` (type, text, start,
end exclusive: the chunks conlleval would count) and ``intent``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from treelm.tasks.conlleval import chunks
from treelm.tasks.tagging import Tagged, TaggingTask
from treelm.text.inputs import UnknownSymbols
from treelm.text.tokenizers import WordTokenizer


def read_utterances(lines: Iterable[str]) -> list[list[str]]:
    """Whitespace-separated words of each line (a blank line: no words, an empty result)."""
    tok = WordTokenizer()
    return [tok.encode_line(line) for line in lines]


def tag_utterances(task: TaggingTask, model: Any, utterances: list[list[str]],
                   batch_size: int | None, policy: UnknownSymbols, source: str) -> list[Tagged]:
    """The tags of each utterance, in order; words outside the run's vocabulary follow
    ``policy`` (lines named ``source:N``); an empty utterance (a blank line) gets an empty
    result without running the model."""
    for n, words in enumerate(utterances, 1):
        policy.check(task.unknown_words(words), f"{source}:{n}")
    todo = [u for u in utterances if u]
    tagged = iter(task.tag(model, todo, batch_size) if todo else [])
    return [next(tagged) if u else Tagged([], [], None) for u in utterances]


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
