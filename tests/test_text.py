"""The text layer: tokenizers (word, char, sentencepiece BPE/unigram) and vocabularies with
configurable specials and one unknown-symbol policy."""

from __future__ import annotations

import pytest

from treelm.errors import TreelmError
from treelm.rundir.files import RunFiles
from treelm.text import (
    BOS,
    EOS,
    PAD,
    UNK,
    UnknownSymbolError,
    Vocab,
    make_tokenizer,
)
from treelm.text.tokenizers import SentencePieceTokenizer


def test_word_and_char_round_trip_with_newlines_as_eos():
    w = make_tokenizer("word")
    assert w.encode("the cat\n sat  down") == ["the", "cat", EOS, "sat", "down"]
    assert w.decode(["the", "cat", EOS, "sat"]) == "the cat\nsat"
    c = make_tokenizer("char")
    assert c.encode("ab c\nd") == ["a", "b", " ", "c", EOS, "d"]
    assert c.decode(c.encode("ab c\nd")) == "ab c\nd"
    assert c.encode("the ") == ["t", "h", "e", " "]          # a prompt keeps its last space
    assert [w.piece_text(s, k == 0) for k, s in enumerate(["a", "b"])] == ["a", " b"]
    assert c.piece_text(EOS, False) == "\n"


def test_unknown_tokenizer_is_one_line_error():
    with pytest.raises(TreelmError, match="unknown tokenizer 'wordpiece'"):
        make_tokenizer("wordpiece")
    with pytest.raises(TreelmError, match="needs its trained"):
        make_tokenizer("bpe")


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_sentencepiece_learns_saves_and_round_trips(tmp_path, root, kind):
    lines = (root / "tests/data/tiny.txt").read_text().splitlines()
    tok = SentencePieceTokenizer.train(lines, kind, vocab_size=300)
    text = "the company said it expects higher sales"
    pieces = tok.encode(text)
    assert 1 < len(pieces) < len(text) and tok.decode(pieces) == text
    assert "".join(tok.piece_text(p, k == 0) for k, p in enumerate(pieces)) == text
    files = RunFiles(tmp_path)
    files.write_tokenizer(tok, role="src")
    back = files.read_tokenizer(role="src")
    assert back.kind == kind and back.encode(text) == pieces
    again = SentencePieceTokenizer.train(lines, kind, vocab_size=300)
    assert again.model_bytes() == tok.model_bytes()            # deterministic


def test_vocab_specials_order_and_policies(tmp_path):
    lm = Vocab.build([["b", "a", "b", EOS]])
    assert lm.itos == [EOS, UNK, "b", "a"] and lm.eos == 0 and lm.unk == 1
    mt = Vocab.build([["x", "y", "x"]], specials=(PAD, BOS, EOS, UNK))
    assert mt.itos[:4] == [PAD, BOS, EOS, UNK] and (mt.pad, mt.bos, mt.eos, mt.unk) == (0, 1, 2, 3)
    assert mt.encode(["x", "zz"]) == [4, 3]
    with pytest.raises(UnknownSymbolError, match="'zz'.*--unk map"):
        mt.encode(["zz"], unk="error")
    labels = Vocab.build([["O", "B-city", "O"]], specials=())
    assert labels.itos == ["O", "B-city"]
    with pytest.raises(UnknownSymbolError, match="label 'B-date' is not in the vocabulary"):
        labels.encode(["B-date"], what="label")              # no <unk>: always refused
    with pytest.raises(UnknownSymbolError, match="no <eos>"):
        _ = labels.eos
    with pytest.raises(TreelmError, match="unknown token policy"):
        lm.encode(["a"], unk="drop")
    files = RunFiles(tmp_path)
    files.write_vocab(mt, role="tgt")
    back = files.read_vocab(role="tgt")
    assert back.itos == mt.itos and back.specials == mt.specials


def test_vocab_reads_the_layout_of_older_runs(tmp_path):
    p = tmp_path / "vocab.json"
    p.write_text('{"level": "char", "itos": ["<eos>", "<unk>", "a"]}')
    v = Vocab.load(p)
    assert v.specials == (EOS, UNK) and v.stoi["a"] == 2
    files = RunFiles(tmp_path)
    assert files.read_tokenizer(legacy_kind=files.legacy_level()).kind == "char"
