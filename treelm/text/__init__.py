"""Text ↔ symbols ↔ ids, the one text layer of treelm.

* :mod:`treelm.text.tokenizers` -- a line of text ↔ a list of symbols (words, characters, jieba
  words, sentencepiece BPE / unigram pieces), built from a config's ``data:`` section and saved in
  the run directory;
* :mod:`treelm.text.chinese` -- a Chinese run's input: OpenCC's conversion to the script of its
  text and jieba's segmentation, applied by ``Tokenizer.read_line``;
* :mod:`treelm.text.vocab` -- symbols ↔ ids with configurable special symbols and one policy for
  unknown symbols (map to ``<unk>`` or raise :class:`~treelm.text.vocab.UnknownSymbolError`).

Every verb (train, eval, generate, probe, parse, gradflow) reads text through these two.
"""

from treelm.text.tokenizers import TOKENIZERS, Tokenizer, make_tokenizer
from treelm.text.vocab import BOS, EOS, PAD, UNK, UNK_POLICIES, UnknownSymbolError, Vocab

__all__ = ["BOS", "EOS", "PAD", "TOKENIZERS", "UNK", "UNK_POLICIES", "Tokenizer",
           "UnknownSymbolError", "Vocab", "make_tokenizer"]
