"""Penn Treebank bracketed trees -> gold unlabeled trees for unsupervised-parsing evaluation.

Reads PTB ``.mrg`` files (multi-line trees, several per file, usually wrapped as
``( (S ...) )`` with an empty root label), files with one bracketed tree per line, a
directory or glob of such files, or ``"nltk"`` for the NLTK 10% WSJ sample
(``nltk.corpus.treebank``, located through ``NLTK_DATA``; nothing is ever downloaded).

The sample is split by file into a development part, ``"nltk-dev"`` (``wsj_0001`` to
``wsj_0099``: 1,921 sentences), on which a layer or a checkpoint may be chosen, and a test part,
``"nltk-test"`` (``wsj_0100`` to ``wsj_0199``: 1,993 sentences), on which it is reported. A
split by file rather than by sentence keeps each article whole on one side, so that no
article's wording helps the choice and the report both; the two halves are of a size.

``"sinica"``, ``"sinica-dev"`` and ``"sinica-test"`` name the Sinica Treebank sample (Chinese) and
its parts: :mod:`treelm.data.sinica` reads its own notation into :class:`PTBNode` trees and
preprocesses them with :func:`to_gold` and its own word filter
(:func:`treelm.syntax.report.load_golds` reads either kind by name).

Preprocessing follows the ON-LSTM / PRPN evaluation (``data_ptb.py`` of Shen et al.,
ICLR 2019 and Shen et al., ICLR 2018):

* keep only pre-terminals whose POS tag is in :data:`WORD_TAGS` -- this drops punctuation,
  ``-NONE-`` traces and other empty elements, currency symbols ``$``/``#`` and brackets;
* words are lower-cased and every maximal run of ASCII digits becomes one ``N``
  (``re.sub('[0-9]+', 'N', w)`` as in the official code: ``"1980s"`` -> ``"Ns"``,
  ``"3.5"`` -> ``"N.N"``, ``"61"`` -> ``"N"``);
* constituents left without words are removed and unary chains are collapsed (a node with a
  single child becomes that child), giving a nested-list tree over the kept words;
* phrase labels lose function tags and indices (``NP-SBJ-1`` -> ``NP``, ``NP=2`` -> ``NP``),
  i.e. ``re.split('[-=]', label)[0]``, for per-label recall.

Malformed input never gets skipped: it raises :class:`TreebankError`, whose one-line message
is ``"<file>:<line>: ..."`` with the line where the offending tree starts.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treelm.data.nltk_sample import sample_files

#: POS tags of "words" kept by the ON-LSTM / PRPN preprocessing (``word_tags`` in data_ptb.py).
WORD_TAGS: frozenset[str] = frozenset(
    "CC CD DT EX FW IN JJ JJR JJS LS MD NN NNS NNP NNPS PDT POS PRP PRP$ RB RBR RBS RP SYM "
    "TO UH VB VBD VBG VBN VBP VBZ WDT WP WP$ WRB".split()
)

_TOKEN_RE = re.compile(r"\(|\)|[^\s()]+")
_DIGITS_RE = re.compile(r"[0-9]+")
_FUNCTION_TAG_RE = re.compile(r"[-=]")
#: Lines starting with this are LDC copyright headers in some PTB distributions; skipped.
_HEADER_PREFIX = "*x*"


class TreebankError(ValueError):
    """Malformed or missing treebank input; the message starts with ``file:line:``."""


class TreebankNotFound(TreebankError):
    """The treebank is not there at all (no such path; the NLTK sample not found), as opposed
    to one that is there and malformed: ``train.eval_parse.if_missing: skip`` trains on."""


#: The names of the NLTK sample and of its two parts (see the module docstring).
NLTK_NAMES = ("nltk", "nltk-dev", "nltk-test")
#: The names of the Sinica Treebank sample and of its two evaluation parts (data/sinica.py).
SINICA_NAMES = ("sinica", "sinica-dev", "sinica-test")
#: Every treebank given by name rather than by path.
TREEBANK_NAMES = NLTK_NAMES + SINICA_NAMES
#: The last file number of the development part; later files are the test part.
NLTK_DEV_LAST = 99
_WSJ_NUMBER_RE = re.compile(r"wsj_(\d+)")


def nltk_part(fileid: str) -> str:
    """``"dev"`` or ``"test"``: the part of the NLTK sample that holds file ``fileid``
    (``wsj_0001.mrg`` .. ``wsj_0099.mrg`` are development, later numbers test).

    Raises:
        TreebankError: the name carries no ``wsj_NNNN`` number.
    """
    found = _WSJ_NUMBER_RE.search(fileid)
    if found is None:
        raise TreebankError(f"nltk:treebank/{fileid}:0: not a wsj_NNNN file; cannot tell "
                            f"its part of the dev/test split")
    return "dev" if int(found.group(1)) <= NLTK_DEV_LAST else "test"


@dataclass
class PTBNode:
    """A raw bracketed node: ``label`` (``""`` for the unlabeled wrapper) and its children.

    A pre-terminal has exactly one child, the word (a ``str``); other nodes have only
    :class:`PTBNode` children. ``line`` is the 1-based line of the node's ``(``.
    """

    label: str
    children: list[PTBNode | str] = field(default_factory=list)
    line: int = 0

    @property
    def is_preterminal(self) -> bool:
        return len(self.children) == 1 and isinstance(self.children[0], str)


@dataclass(frozen=True)
class GoldTree:
    """One preprocessed gold sentence.

    Attributes:
        words: the kept, normalised words (length n >= 1).
        tree: unlabeled nested-list tree over ``words`` (a bare ``str`` when n == 1), unary
            chains collapsed, so every internal node has >= 2 children.
        labeled_spans: ``(label, start, end_exclusive)`` for every original constituent
            covering >= 2 kept words, function tags stripped, in pre-order, without
            duplicates. All labels of a unary chain are listed (``S`` and ``VP`` over the
            same span are two entries), as in ON-LSTM's ``corpus_stats_labeled``. The
            whole-sentence span is included here; the metrics decide whether to count it.
        source: ``"<file>:<line>"`` of the tree in its file.
    """

    words: list[str]
    tree: Any
    labeled_spans: list[tuple[str, int, int]]
    source: str = ""

    def __len__(self) -> int:
        return len(self.words)


def normalize_word(word: str) -> str:
    """Lower-case and replace each run of digits by ``N`` (ON-LSTM ``data_ptb.py``)."""
    return _DIGITS_RE.sub("N", word.lower())


def strip_function_tags(label: str) -> str:
    """``NP-SBJ-1`` -> ``NP``; ``S=2`` -> ``S``; labels starting with ``-`` are kept whole."""
    if label.startswith("-"):
        return label
    return _FUNCTION_TAG_RE.split(label, maxsplit=1)[0]


def parse_bracketed(text: str, source: str = "<string>") -> list[PTBNode]:
    """Parse every bracketed tree in ``text`` (iteratively; any nesting depth).

    Trees may span several lines or share a line. A tree whose root has an empty label and
    one child (the usual ``( (S ...) )`` wrapper) is returned as is; :func:`to_gold` ignores
    empty labels. Lines starting with ``*x*`` (LDC headers) are ignored.

    Raises:
        TreebankError: unbalanced brackets, text outside brackets, empty nodes ``()``,
            nodes without children, pre-terminals with several words, mixed words and
            sub-trees, or no tree at all. The message names ``source`` and the line where
            the bad tree starts.
    """
    if _HEADER_PREFIX in text:
        text = "\n".join(
            "" if ln.lstrip().startswith(_HEADER_PREFIX) else ln for ln in text.split("\n")
        )
    trees: list[PTBNode] = []
    stack: list[PTBNode] = []
    labeled: list[bool] = []  # parallel to stack: has the node's label been read yet?
    line, pos = 1, 0
    start_line = 1

    def fail(reason: str, at: int) -> TreebankError:
        where = "" if at == start_line else f" (problem at line {at})"
        return TreebankError(f"{source}:{start_line}: malformed tree: {reason}{where}")

    for match in _TOKEN_RE.finditer(text):
        line += text.count("\n", pos, match.start())
        pos = match.start()
        tok = match.group()
        if tok == "(":
            if stack:
                parent = stack[-1]
                labeled[-1] = True  # "( (" : the parent is an unlabeled wrapper
                if any(isinstance(c, str) for c in parent.children):
                    raise fail(f"sub-tree after a word inside ({parent.label} ...)", line)
            else:
                start_line = line
            node = PTBNode(label="", line=line)
            if stack:
                stack[-1].children.append(node)
            stack.append(node)
            labeled.append(False)
        elif tok == ")":
            if not stack:
                start_line = line
                raise fail("unexpected ')' (more closing than opening brackets)", line)
            node = stack.pop()
            labeled.pop()
            if not node.children:
                what = f"({node.label})" if node.label else "()"
                raise fail(f"empty node {what}", line)
            if not stack:
                trees.append(node)
        else:
            if not stack:
                start_line = line
                raise fail(f"text outside brackets: {tok[:40]!r}", line)
            node = stack[-1]
            if not labeled[-1]:
                node.label = tok
                labeled[-1] = True
            elif node.children:
                what = "a sub-tree" if isinstance(node.children[-1], PTBNode) else "a word"
                raise fail(f"word {tok[:40]!r} after {what} inside ({node.label} ...)", line)
            else:
                node.children.append(tok)
    if stack:
        raise fail(f"{len(stack)} unclosed '(' at end of input", line)
    if not trees:
        start_line = 1
        raise fail("no bracketed tree found (empty input)", 1)
    return trees


def _ptb_word(tag: str, word: str) -> bool:
    return tag in WORD_TAGS


def to_gold(root: PTBNode, source: str = "", *,
            keep: Callable[[str, str], bool] = _ptb_word,
            normalize: Callable[[str], str] = normalize_word,
            label: Callable[[str], str] = strip_function_tags) -> GoldTree | None:
    """Apply the ON-LSTM/PRPN preprocessing to one parsed tree (see module docstring).

    ``keep(tag, word)`` says which pre-terminals are words (default: the PTB tags of
    :data:`WORD_TAGS`), ``normalize`` maps a kept word (default :func:`normalize_word`) and
    ``label`` a phrase label (default :func:`strip_function_tags`): another treebank
    (:mod:`treelm.data.sinica`) gives its own and shares the rest (dropping empty
    constituents, collapsing unary chains, the labelled spans).

    Returns ``None`` when no word survives the POS filter (e.g. a tree of punctuation).
    """
    words: list[str] = []
    labeled: list[tuple[int, str, int, int]] = []  # (pre-order index, label, start, end)
    kids_stack: list[list[Any]] = [[]]
    open_info: list[tuple[int, int]] = []  # (start word index, pre-order index)
    order = 0
    todo: list[tuple[PTBNode, bool]] = [(root, False)]
    while todo:
        node, closing = todo.pop()
        if not closing:
            if node.is_preterminal:
                if keep(node.label, node.children[0]):  # type: ignore[arg-type]
                    word = normalize(node.children[0])  # type: ignore[arg-type]
                    words.append(word)
                    kids_stack[-1].append(word)
                continue
            open_info.append((len(words), order))
            order += 1
            kids_stack.append([])
            todo.append((node, True))
            todo.extend((c, False) for c in reversed(node.children))  # type: ignore[misc]
        else:
            kids = kids_stack.pop()
            start, index = open_info.pop()
            end = len(words)
            if end - start >= 2 and node.label:
                labeled.append((index, label(node.label), start, end))
            if kids:
                kids_stack[-1].append(kids[0] if len(kids) == 1 else kids)
    top = kids_stack[0]
    if not top:
        return None
    seen: set[tuple[str, int, int]] = set()
    spans: list[tuple[str, int, int]] = []
    for _, label, start, end in sorted(labeled):
        if (label, start, end) not in seen:
            seen.add((label, start, end))
            spans.append((label, start, end))
    return GoldTree(words=words, tree=top[0], labeled_spans=spans, source=source)


def read_bracketed_file(path: str | os.PathLike[str], name: str | None = None) -> list[PTBNode]:
    """Parse all trees of one file (UTF-8). ``name`` replaces the path in error messages."""
    name = name or str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TreebankError(f"{name}:0: cannot read treebank file: {exc.strerror}") from exc
    return parse_bracketed(_decode(data, name), name)


def _decode(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TreebankError(f"{name}:{line}: not UTF-8 text ({exc.reason})") from exc


def _resolve_files(source: str | os.PathLike[str]) -> list[Path]:
    text = os.fspath(source)
    path = Path(text)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() == ".mrg")
        if not files:
            raise TreebankError(f"{text}:0: directory contains no .mrg files")
        return files
    if path.is_file():
        return [path]
    if any(ch in text for ch in "*?["):
        files = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
        if not files:
            raise TreebankNotFound(f"{text}:0: glob matches no files")
        return files
    raise TreebankNotFound(f"{text}:0: no such file or directory")


def _nltk_sources(part: str | None = None) -> Iterator[tuple[str, str]]:
    """Yield ``(name, text)`` for each file of the NLTK treebank sample (offline only), or of
    its part ``"dev"`` or ``"test"`` (:func:`nltk_part`).

    Looks up ``corpora/treebank/combined`` (a directory or inside ``corpora/treebank.zip``)
    in the directories of the ``NLTK_DATA`` environment variable as it is *now*, then in
    ``nltk.data.path``, read afresh on every call (no module-level caching).
    """
    found = sample_files()
    if found is None:
        raise TreebankNotFound(
            "nltk:treebank:0: NLTK treebank sample not found; point NLTK_DATA at a directory "
            "holding corpora/treebank.zip (nltk.download is never called)")
    for fileid, read in found:
        if part is not None and nltk_part(fileid) != part:
            continue
        name = f"nltk:treebank/{fileid}"
        yield name, _decode(read(), name)


def iter_parsed(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
) -> Iterator[tuple[str, PTBNode]]:
    """Yield ``(file_name, raw_tree)`` for every tree of ``source`` (see :func:`load_treebank`)."""
    if isinstance(source, (str, os.PathLike)) and os.fspath(source) in NLTK_NAMES:
        _, _, part = os.fspath(source).partition("-")
        for name, text in _nltk_sources(part or None):
            for node in parse_bracketed(text, name):
                yield name, node
        return
    sources = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    for item in sources:
        for path in _resolve_files(item):
            for node in read_bracketed_file(path):
                yield str(path), node


def load_treebank(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    max_len: int | None = None,
) -> list[GoldTree]:
    """Read and preprocess gold trees.

    Args:
        source: ``"nltk"`` (``nltk.corpus.treebank`` via ``NLTK_DATA``), ``"nltk-dev"`` or
            ``"nltk-test"`` (its development or test part), a ``.mrg`` or
            one-tree-per-line file, a directory (all ``*.mrg`` files below it, sorted), a glob
            pattern, or a list of these.
        max_len: keep only sentences with at most this many words *after* preprocessing
            (``max_len=10`` gives WSJ10). ``None`` keeps all.

    Returns:
        :class:`GoldTree` per sentence, in file order. Trees with no kept word are dropped
        (they cannot be evaluated); malformed trees raise :class:`TreebankError`.
    """
    golds: list[GoldTree] = []
    for name, node in iter_parsed(source):
        gold = to_gold(node, f"{name}:{node.line}")
        if gold is None or (max_len is not None and len(gold.words) > max_len):
            continue
        golds.append(gold)
    return golds
