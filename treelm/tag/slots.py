"""What ``treelm tag`` reads and prints: utterances in, words with their slots out.

Input: one utterance a line, words separated by whitespace (the ``word`` tokenizer, as the
training data), read and checked by :mod:`treelm.text.inputs` (input without text is an error; a
blank line gives an empty result, so the output stays aligned with the input; words outside the
vocabulary follow ``--unk``). Output, per utterance, either one text line with each slot in
brackets::

    [atis_flight] show me flights from [boston : fromloc.city_name] to [denver : toloc.city_name]

or (``--format json``) one JSON object a line: ``words``, ``tags``, ``slots`` (type, text, start,
end exclusive: the chunks conlleval would count) and ``intent``. The results are
:meth:`treelm.api.model.TreelmModel.tag`'s, which reads and tags the utterances.
"""

from __future__ import annotations

import json
from typing import Any


def as_json(t: dict[str, Any]) -> str:
    """One utterance's result (:meth:`treelm.api.model.TreelmModel.tag`) as one JSON line."""
    return json.dumps(t, ensure_ascii=False)


def as_text(t: dict[str, Any]) -> str:
    """One utterance's result as its words with each slot in brackets, ``[intent]`` first."""
    starts = {s["start"]: s for s in t["slots"]}
    words = t["words"]
    parts, i = [], 0
    while i < len(words):
        s = starts.get(i)
        if s is None:
            parts.append(words[i])
            i += 1
        else:
            parts.append(f"[{s['text']} : {s['type']}]")
            i = s["end"]
    return (f"[{t['intent']}] " if t["intent"] else "") + " ".join(parts)
