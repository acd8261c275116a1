"""The command-line options the syntax verbs share (:mod:`treelm.parsing.commands`): the run and
its sentence, the model's options (``--unk``, ``--style``, ``--batch-size``), the reading
direction of a translation encoder and the text's segmentation. Apart from the verbs so that
the verbs stay what they do: check, call the library, print.
"""

from __future__ import annotations

import argparse

from treelm.parsing.defaults import STYLES
from treelm.text.inputs import add_unk_option
from treelm.verb import Number


def add_model_options(p: argparse.ArgumentParser, batch: bool = True,
                      run_style: bool = True) -> None:
    """The run's options, ``--unk``, ``--style`` (default: the run's choice on dev trees where
    ``run_style``, else official) and ``--batch-size``."""
    from treelm.run import add_run_options

    add_run_options(p)
    add_unk_option(p, "word (or piece)")
    default = ("the run's choice on dev trees, else official" if run_style else "official")
    p.add_argument("--style", choices=STYLES, default=None if run_style else "official",
                   help=f"tree rule: official (the highest-level word opens a constituent, "
                   f"ON-LSTM test_phrase_grammar.py) or split (span split before the "
                   f"highest-level word); default: {default}")
    if batch:
        p.add_argument("--batch-size", type=Number(int, at_least=1), default=256,
                       help="sentences per forward pass (default 256)")


def add_direction_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--direction", choices=["forward", "backward"], default="forward",
                   help="translation runs: the levels of the encoder's left-to-right stack "
                   "(forward, default; the paper's reading) or of a bidirectional encoder's "
                   "right-to-left stack (backward; its tree is read off the reversed source and "
                   "mirrored back)")


def add_text_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--segment", choices=["auto", "none", "jieba"], default="auto",
                   help="word segmentation of the input: auto (default: as the run reads text; "
                   "a run trained on segmented Chinese, such as configs/sinica-onlstm.yaml, cuts "
                   "what its vocabulary lacks with jieba), none (the run's tokenizer alone: "
                   "whitespace-separated words) or jieba for the whole line (needs pip install "
                   "'treelm[zh]'). A run trained on Chinese converts the words it lacks to the "
                   "script of its text (OpenCC) in every case")
    p.add_argument("--normalize", action="store_true",
                   help="PTB preprocessing of every word: lower-case, digit runs -> N")


def add_run_and_sentence(p: argparse.ArgumentParser, stdin: str) -> None:
    """The run and the sentence, as ``parse`` and ``plot`` take them (``stdin``: what the
    default or ``-`` reads)."""
    p.add_argument("run_dir", metavar="RUN_DIR",
                   help="a trained run with ON-LSTM layers (a language model, or a translation "
                   "model's encoder)")
    p.add_argument("sentence", nargs="?", metavar="SENTENCE",
                   help=f"the sentence (default, or '-': {stdin})")


__all__ = ["add_direction_option", "add_model_options", "add_run_and_sentence",
           "add_text_options"]
