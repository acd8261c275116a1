"""What each ``POST /api/<method>`` of ``treelm serve`` computes, apart from HTTP: the fields of
its JSON body checked and bounded (a bad one is a :class:`RequestError` naming it), then the run's
API called (:class:`treelm.api.model.TreelmModel`) and its answer made JSON: ``parse`` (the
page's :func:`tree_view`), ``score``, ``generate``, ``probe``, ``tag`` and ``translate``
(:data:`ENDPOINTS`); and a run's training curves as JSON (:func:`curves_view`, for ``GET
/api/runs/<name>/curves``). :mod:`treelm.serve.server` routes the requests here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from treelm.api.curves import Curves
from treelm.api.model import TreelmModel

MAX_CHARS = 1000            # characters of one sentence, prompt or prefix
MAX_WORDS = 100             # whitespace-separated words of one sentence
MAX_LENGTH = 400            # symbols generated per request
MAX_BEAM = 10
MAX_TOP = 50                # next symbols listed by probe


class RequestError(Exception):
    """A bad request: its HTTP status and a one-line message for the client."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _text(body: dict[str, Any], key: str, *, empty: bool = False) -> str:
    value = body.get(key, "" if empty else None)
    if value is None:
        raise RequestError(400, f"missing field {key!r}")
    if not isinstance(value, str):
        raise RequestError(400, f"{key!r} must be a string")
    if not empty and not value.strip():
        raise RequestError(400, f"{key!r} is empty")
    if len(value) > MAX_CHARS:
        raise RequestError(413, f"{key!r} has {len(value)} characters; at most {MAX_CHARS}")
    words = len(value.split())
    if words > MAX_WORDS:
        raise RequestError(413, f"{key!r} has {words} words; at most {MAX_WORDS}")
    return value


def _int(body: dict[str, Any], key: str, default: int | None, lo: int, hi: int) -> int | None:
    value = body.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise RequestError(400, f"{key!r} must be an integer from {lo} to {hi}")
    return value


def _float(body: dict[str, Any], key: str, default: float | None, lo: float,
           hi: float) -> float | None:
    value = body.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise RequestError(400, f"{key!r} must be a number from {lo} to {hi}")
    return float(value)


def _choice(body: dict[str, Any], key: str, default: str, choices: Sequence[str]) -> str:
    value = body.get(key, default)
    if value not in choices:
        raise RequestError(400, f"{key!r} must be one of {', '.join(choices)}")
    return value


def tree_view(m: TreelmModel, sentence: str, direction: str = "forward") -> dict[str, Any]:
    """What the page draws for a sentence: tokens, the levels of every ON-LSTM layer and the
    tree of every layer under both rules (the API's ``levels`` and ``SentenceLevels.tree``, the
    path of ``parse``), and the layer and rule ``parse`` reads by default, with why (the API's
    ``choice``)."""
    from treelm.syntax.trees import TREE_STYLES

    lv = m.levels(sentence, direction=direction)
    return {"tokens": lv.tokens, "unknown": lv.unknown, "layers": list(lv.layers),
            **defaults(m),
            "df": [[round(float(x), 5) for x in row] for row in lv.df],
            "di": [[round(float(x), 5) for x in row] for row in lv.di],
            "trees": {style: {str(k): lv.tree(k, style) for k in lv.layers}
                      for style in TREE_STYLES}}


def defaults(m: TreelmModel) -> dict[str, Any]:
    """The default layer and rule of a run's trees and why (``choice`` in the API)."""
    return {"default_layer": m.default_layer, "default_rule": m.default_rule,
            "default_why": m.choice.why if m.choice else None}


def _parse(m: TreelmModel, body: dict[str, Any]) -> dict[str, Any]:
    m.require("parse")
    direction = _choice(body, "direction", "forward", ("forward", "backward"))
    return tree_view(m, _text(body, "sentence"), direction)


def _score(m: TreelmModel, body: dict[str, Any]) -> dict[str, Any]:
    m.require("score")
    return {"logprob": m.score([_text(body, "sentence")])[0]}


def _generate(m: TreelmModel, body: dict[str, Any]) -> dict[str, Any]:
    m.require("generate")
    text = m.generate(_text(body, "prompt", empty=True),
                      _int(body, "length", 50, 0, MAX_LENGTH) or 0,
                      temperature=_float(body, "temperature", 1.0, 0.0, 100.0) or 0.0,
                      top_k=_int(body, "top_k", None, 1, 1_000_000),
                      top_p=_float(body, "top_p", None, 1e-9, 1.0),
                      seed=_int(body, "seed", 0, 0, 2**31 - 1) or 0, unk="map")
    return {"text": text}


def _probe(m: TreelmModel, body: dict[str, Any]) -> dict[str, Any]:
    m.require("probe")
    rows = m.probe(_text(body, "prefix", empty=True), _int(body, "k", 5, 1, MAX_TOP) or 5,
                   unk="map")
    return {"next": [{"symbol": s, "prob": round(p, 6)} for s, p in rows]}


def _tag(m: TreelmModel, body: dict[str, Any]) -> dict[str, Any]:
    m.require("tag")
    return m.tag([_text(body, "sentence")])[0]


def _translate(m: TreelmModel, body: dict[str, Any]) -> dict[str, Any]:
    m.require("translate")
    sentence = _text(body, "sentence")
    beam = _int(body, "beam", 5, 1, MAX_BEAM) or 5
    att = m.attention(sentence, beam=beam, unk="map")      # one search: its text and weights
    out: dict[str, Any] = {
        "translation": att.text,
        "attention": {"source": att.source, "target": att.target,
                      "weights": [[[round(float(x), 4) for x in row] for row in layer]
                                  for layer in att.weights]}}
    if "parse" in m.supports:             # an ON-LSTM encoder: the source tree too
        out["source_tree"] = tree_view(m, sentence)
    return out


def _finite(points: list[tuple[int, float]]) -> list[list[float | None]]:
    # JSON has no NaN or Infinity (the browser's JSON.parse refuses them): a diverged value is
    # null, which the page leaves out of its line
    return [[t, float(f"{v:.6g}") if math.isfinite(v) else None] for t, v in points]


def curves_view(c: Curves) -> dict[str, Any]:
    """The API's :class:`~treelm.api.curves.Curves` as JSON: points as ``[tokens, value]``
    (``null`` for a value that is not finite), values to 6 significant digits, layers as
    strings."""
    return {"headline": c.headline, "done": c.done, "modified": c.modified,
            "valid": {k: _finite(v) for k, v in c.valid.items()},
            "train": {k: _finite(v) for k, v in c.train.items()},
            "trees": {rule: {str(k): _finite(v) for k, v in layers.items()}
                      for rule, layers in c.trees.items()}}


ENDPOINTS: dict[str, Callable[[TreelmModel, dict[str, Any]], dict[str, Any]]] = {
    "parse": _parse, "score": _score, "generate": _generate, "probe": _probe, "tag": _tag,
    "translate": _translate}
