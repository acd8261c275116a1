"""The symbol tables of a pair of languages: a tokenizer and a vocabulary for each side of a
translation run, learned on its training pairs, saved in the run directory and read back.

Text becomes symbols by a sentencepiece model (BPE by default) learned on the training side, or
by words with ``tokenizer: word``; with ``data.joint`` one model and one vocabulary serve both
languages (learned on both sides' lines: shared subwords, and one table to save), otherwise each
side has its own. Every vocabulary starts with the specials ``<pad> <bos> <eos> <unk>``, so that
``<pad>`` is 0 on both sides, and holds every character of its piece model as well as the pieces
the training lines use: once the segmenter is restricted to the vocabulary (:mod:`treelm.text.spm`)
only characters the model never saw are unknown.

The tables are a pair ``(source, target)`` of the same object when joint; the run directory holds
one tokenizer and one vocabulary then, and a ``src`` and a ``tgt`` one otherwise.
"""

from __future__ import annotations

from treelm.data.parallel import Pairs, ParallelData
from treelm.rundir.files import RunFiles
from treelm.text.tokenizers import SentencePieceTokenizer, Tokenizer, make_tokenizer
from treelm.text.vocab import BOS, EOS, PAD, UNK, Vocab

SPECIALS = (PAD, BOS, EOS, UNK)
Tokenizers = tuple[Tokenizer, Tokenizer]         # source, target (one object when joint)
Vocabs = tuple[Vocab, Vocab]


def build_tables(spec: ParallelData, train: Pairs) -> tuple[Tokenizers, Vocabs]:
    """Tokenizers and vocabularies learned on the training pairs (module docstring)."""
    kind = spec.tokenizer_kind
    if kind == "word":
        src_tok: Tokenizer = make_tokenizer("word")
        tgt_tok: Tokenizer = src_tok
    elif spec.joint:
        src_tok = tgt_tok = SentencePieceTokenizer.train(train.src + train.tgt, kind,
                                                         spec.vocab_size)
    else:
        src_tok = SentencePieceTokenizer.train(train.src, kind, spec.vocab_size)
        tgt_tok = SentencePieceTokenizer.train(train.tgt, kind, spec.vocab_size)
    src_syms = [src_tok.encode_line(s) for s in train.src]
    tgt_syms = [tgt_tok.encode_line(t) for t in train.tgt]
    # every character of the piece model too, so that only characters the model does not
    # know are unknown once the segmenter is restricted to the vocabulary (text.spm)
    if spec.joint:
        src_vocab = tgt_vocab = Vocab.build(src_syms + tgt_syms, SPECIALS,
                                            extra=src_tok.alphabet())
    else:
        src_vocab = Vocab.build(src_syms, SPECIALS, extra=src_tok.alphabet())
        tgt_vocab = Vocab.build(tgt_syms, SPECIALS, extra=tgt_tok.alphabet())
    return (src_tok, tgt_tok), (src_vocab, tgt_vocab)


def read_tables(files: RunFiles, joint: bool) -> tuple[Tokenizers, Vocabs]:
    """The tables a run saved with :func:`write_tables`."""
    if joint:
        tok, vocab = files.read_tokenizer(), files.read_vocab()
        return (tok, tok), (vocab, vocab)
    return ((files.read_tokenizer("src"), files.read_tokenizer("tgt")),
            (files.read_vocab("src"), files.read_vocab("tgt")))


def write_tables(files: RunFiles, tokenizers: Tokenizers, vocabs: Vocabs, joint: bool) -> None:
    """The tables into a new run directory: one of each when joint, a side's each otherwise."""
    if joint:
        files.write_tokenizer(tokenizers[0])
        files.write_vocab(vocabs[0])
        return
    for role, tok, vocab in zip(("src", "tgt"), tokenizers, vocabs, strict=True):
        files.write_tokenizer(tok, role)
        files.write_vocab(vocab, role)
