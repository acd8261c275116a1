"""Restricting a sentencepiece model to a vocabulary: the pieces it may emit.

A BPE model learned with ``vocab_size`` V holds V pieces, but the segmentation of the training
text uses only some of them: a piece made by an early merge (``▁ausgeb``) may always be merged
further on training text (``▁ausgebildet``) and so never reach the run's vocabulary, while new
text stops at it. Marking every piece outside the vocabulary as *unused* (sentencepiece's
``UNUSED`` type, what its C++ ``SetVocabulary`` does) makes the segmenter split such a piece back
into the pieces it was merged from, recursively, until each is in the vocabulary or a single
character (BPE); a unigram model's Viterbi search skips unused pieces. On text whose segmentation
uses only vocabulary pieces (the training text) the result is unchanged.

The Python binding of sentencepiece 0.2 has no ``set_vocabulary`` and no protobuf classes without
the ``protobuf`` package, so the types are set here on the serialized ``ModelProto`` in the
protocol-buffer wire format (field 1 of ``ModelProto``: the repeated ``SentencePiece``, whose
field 1 is the piece text and field 3 its type)::

    tag = varint(field << 3 | wire type)   wire types: 0 varint, 1 8 bytes, 2 length + bytes,
                                                       5 4 bytes

Every other field is copied byte for byte.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

NORMAL, UNUSED = 1, 5          # SentencePiece.Type values that a vocabulary may switch
PIECES, PIECE, TYPE = 1, 1, 3  # field numbers: ModelProto.pieces, SentencePiece.piece / .type


def _varint(b: bytes, i: int) -> tuple[int, int]:
    x = shift = 0
    while True:
        if i >= len(b):
            raise ValueError("truncated sentencepiece model")
        c = b[i]
        i += 1
        x |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return x, i


def _put_varint(x: int) -> bytes:
    out = bytearray()
    while True:
        c, x = x & 0x7F, x >> 7
        if x:
            out.append(c | 0x80)
        else:
            out.append(c)
            return bytes(out)


def _fields(b: bytes) -> Iterator[tuple[int, int, bytes, bytes]]:
    """(field number, wire type, payload of a length-delimited field, raw bytes) of a message."""
    i = 0
    while i < len(b):
        start = i
        tag, i = _varint(b, i)
        num, wire = tag >> 3, tag & 7
        payload = b""
        if wire == 0:
            _, i = _varint(b, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n, i = _varint(b, i)
            payload = b[i:i + n]
            i += n
        else:
            raise ValueError(f"unsupported wire type {wire} in a sentencepiece model")
        yield num, wire, payload, b[start:i]


def pieces(model: bytes) -> list[tuple[str, int]]:
    """(piece, type) of every piece of a serialized model, in id order."""
    out = []
    for num, wire, payload, _ in _fields(model):
        if num == PIECES and wire == 2:
            text, kind = "", NORMAL
            for n2, w2, p2, raw in _fields(payload):
                if n2 == PIECE and w2 == 2:
                    text = p2.decode("utf-8")
                elif n2 == TYPE and w2 == 0:
                    kind = _varint(raw, 1)[0]
            out.append((text, kind))
    return out


def single_characters(model: bytes) -> list[str]:
    """The one-character normal pieces of a model: what its segmenter falls back to, and so what
    a vocabulary must hold for every character the model knows to be read."""
    return [p for p, kind in pieces(model) if kind == NORMAL and len(p) == 1]


def restrict(model: bytes, keep: Collection[str]) -> bytes:
    """``model`` with every normal piece outside ``keep`` marked unused (single characters stay
    normal, as sentencepiece's ``SetVocabulary`` keeps them); control, unknown, user-defined and
    byte pieces are left as they are."""
    out = bytearray()
    for num, wire, payload, raw in _fields(model):
        if not (num == PIECES and wire == 2):
            out += raw
            continue
        text, kind = "", NORMAL
        body = bytearray()
        for n2, w2, p2, raw2 in _fields(payload):
            if n2 == TYPE and w2 == 0:
                kind = _varint(raw2, 1)[0]
                continue
            if n2 == PIECE and w2 == 2:
                text = p2.decode("utf-8")
            body += raw2
        new = kind
        if kind in (NORMAL, UNUSED):
            new = NORMAL if text in keep or len(text) == 1 else UNUSED
        if new == kind:                        # unchanged: keep the bytes as they were
            out += raw
            continue
        body += _put_varint(TYPE << 3) + _put_varint(new)
        out += _put_varint(PIECES << 3 | 2) + _put_varint(len(body)) + body
    return bytes(out)
