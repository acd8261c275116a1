"""The Sinica Treebank sample: its trees as gold unlabeled trees, a fixed split of its sentences,
and the segmented text of its training part for a Chinese language model.

NLTK's sample of the Sinica Treebank 3.0 (``corpora/sinica_treebank``, found through
``NLTK_DATA``; nothing is ever downloaded) holds 10,000 clauses of modern Chinese in Traditional
characters, one a line in the file ``parsed``, in the head-driven notation of Information-based
Case Grammar::

    #4:4.[39030] S(theme:NP(Head:Nhaa:我們)|Head:V_11:是|range:NP(Head:Nab:鄰居))#，(COMMACATEGORY)

A line is an identifier, the tree, then ``#`` and the clause's final punctuation mark with its
``…CATEGORY`` tag (empty on 11 lines). In the tree a phrase is ``role:LABEL(child|child|…)`` (no
role at the root) and a word ``role:POS:word``. :func:`parse_icg` reads that notation into the
PTB reader's :class:`~treelm.data.treebank.PTBNode` (label, children; a word's pre-terminal is
its POS), so that the preprocessing is the PTB one (:func:`~treelm.data.treebank.to_gold`):

* punctuation is removed: the final mark after ``#`` (COMMA-, PERIOD-, QUESTION-, COLON-,
  EXCLANATION-, SEMICOLON- and ETCCATEGORY in the sample) and, inside trees, any word tagged
  ``…CATEGORY`` or made of punctuation characters only (Unicode category P). The sample's
  trees hold 1,485 such words, all tagged ``Caa`` as coordination heads: the enumeration comma
  、 (1,482 times), － and ．. They are removed as the PTB's coordinating commas are;
* words keep their characters: no lower-casing or digit mapping (Chinese has no case; digits are
  rare, mostly full-width, and the language model reads the same words as the trees);
* constituents left without words are removed, unary chains are collapsed, trees with fewer than
  2 words are dropped by the evaluation (they have no span to score), and the whole-sentence span
  is not counted (:mod:`treelm.syntax.metrics` decides that, as for the PTB);
* a constituent's label is its phrase category (``NP``, ``VP``, ``S``, ``PP``, ``GP``, a ``…‧的``
  phrase), without its semantic role. A doubled role (``head:Head:Nac:鵝掌形``, twice in the
  sample) is read as one.

Malformed input raises :class:`~treelm.data.treebank.TreebankError` naming ``file:line``.

**The split** (:data:`PARTS`, :func:`part_of`). The sample's clauses follow their texts (the first
hundreds are a children's story; consecutive clauses are often one sentence cut at its commas),
and it carries no document boundaries. The split is therefore by position, in blocks of
:data:`BLOCK` = 50 consecutive clauses: block ``b`` belongs to the part at position ``b mod 20`` of
:data:`CYCLE`: 14 blocks of language-model training text, one of LM validation text, one of LM
test text, two of ``dev`` trees and two of ``test`` trees (7,000 / 500 / 500 / 1,000 / 1,000
clauses). Blocks keep neighbouring clauses of one sentence or paragraph together, so that a dev or
test clause rarely has its other half in the LM's training text (only at the 2 edges of a block);
cycling through the whole file gives each part every genre of the balanced corpus in proportion,
where three contiguous slices would hand dev and test the last texts only. The LM trains, chooses
its checkpoint and is scored in perplexity on the first three parts alone: no dev or test tree's
words are ever in its text.

Names: ``sinica`` (every tree), ``sinica-dev`` and ``sinica-test`` (:func:`load_sinica`), the
treebanks of ``treelm eval-parse --treebank``, ``train.eval_parse`` and ``treelm study``'s
``score.trees``; :func:`lm_lines` gives the LM parts' text (``data.source: sinica``,
:mod:`treelm.data.corpus`).
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass

from treelm.data.treebank import (
    SINICA_NAMES,
    GoldTree,
    PTBNode,
    TreebankError,
    TreebankNotFound,
    to_gold,
)

#: Consecutive clauses that stay in one part.
BLOCK = 50
#: The part of each block, by its position modulo the cycle's length (module docstring).
CYCLE: tuple[str, ...] = ("lm-train",) * 14 + ("lm-valid", "lm-test", "dev", "dev", "test", "test")
#: Every part, the LM's three first.
PARTS = ("lm-train", "lm-valid", "lm-test", "dev", "test")
#: How messages and :attr:`GoldTree.source` name the sample's file.
FILE_NAME = "sinica:sinica_treebank/parsed"

_ID_RE = re.compile(r"#\S*\s+")
_TOKEN_RE = re.compile(r"[()|]|[^()|]+")
_SPACE_RE = re.compile(r"\s")


@dataclass(frozen=True)
class SinicaTree:
    """One line of ``parsed``: its 0-based position among the trees (what :func:`part_of`
    reads), its 1-based line, its identifier, the tree and the punctuation after ``#``."""

    index: int
    line: int
    ident: str
    tree: PTBNode
    final: str


def part_of(index: int) -> str:
    """The part of the split (:data:`PARTS`) that holds the tree at 0-based position ``index``."""
    return CYCLE[(index // BLOCK) % len(CYCLE)]


def is_punctuation(tag: str, word: str) -> bool:
    """A punctuation mark: tagged ``…CATEGORY``, or made of Unicode punctuation only (、 ， －)."""
    return tag.endswith("CATEGORY") or all(unicodedata.category(c).startswith("P") for c in word)


def _keep(tag: str, word: str) -> bool:
    return not is_punctuation(tag, word)


def _same(text: str) -> str:
    return text


def parse_icg(text: str, where: str) -> PTBNode:
    """One tree in ICG notation (``S(theme:NP(Head:Nab:…)|Head:VC1:…)``, without the line's
    identifier and final punctuation) as a :class:`PTBNode`: phrases labelled with their
    category, words under a pre-terminal labelled with their POS. Read with an explicit stack
    (any depth).

    Raises:
        TreebankError: ``"<where>: malformed Sinica tree: …"``: unbalanced brackets, an empty
            child, a word that is not ``role:POS:word``, a phrase without a label or children,
            text after the tree.
    """
    def fail(reason: str, at: int) -> TreebankError:
        return TreebankError(f"{where}: malformed Sinica tree: {reason} (at character {at + 1})")

    tokens = [(m.group(), m.start()) for m in _TOKEN_RE.finditer(text.strip())]
    if not tokens or tokens[0][0] in "()|":
        raise fail("expected a phrase LABEL(...)", 0)
    stack: list[PTBNode] = []
    root: PTBNode | None = None
    expect_child = True     # after '(' or '|': a word or a phrase must come
    i = 0
    while i < len(tokens):
        tok, at = tokens[i]
        if root is not None:
            raise fail(f"text after the tree: {tok[:40]!r}", at)
        if tok == "|" or tok == ")":
            if expect_child or not stack:
                what = "an empty child" if stack else f"unexpected {tok!r}"
                raise fail(what, at)
            if tok == ")":
                node = stack.pop()
                if not stack:
                    root = node
            else:
                expect_child = True
            i += 1
            continue
        if tok == "(":
            raise fail("'(' without a label", at)
        if not expect_child:
            raise fail(f"{tok[:40]!r} after a child without '|'", at)
        fields = tok.split(":")
        if i + 1 < len(tokens) and tokens[i + 1][0] == "(":          # a phrase
            label = fields[-1].strip()
            if not label:
                raise fail(f"phrase without a label: {tok[:40]!r}", at)
            node = PTBNode(label=label)
            if stack:
                stack[-1].children.append(node)
            elif i:
                raise fail("a second tree", at)
            stack.append(node)
            i += 2
            continue
        if not stack:
            raise fail("expected a phrase LABEL(...)", at)
        # a word: role:POS:word (a doubled role, head:Head:POS:word, is read as one); no
        # whitespace, which would cut the word in the language model's text
        doubled = len(fields) == 4 and fields[0].lower() == fields[1].lower()
        if not (len(fields) == 3 or doubled) or not fields[-2] or not fields[-1] or \
                _SPACE_RE.search(tok.strip()):
            raise fail(f"expected role:POS:word, got {tok[:40]!r}", at)
        stack[-1].children.append(PTBNode(label=fields[-2], children=[fields[-1]]))
        expect_child = False
        i += 1
    if stack or root is None:
        raise fail(f"{len(stack)} unclosed '(' at the end", len(text.strip()))
    return root


def read_parsed(text: str, name: str = FILE_NAME) -> list[SinicaTree]:
    """Every tree of a ``parsed`` file's text, in order (blank lines skipped)."""
    trees: list[SinicaTree] = []
    for number, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        where = f"{name}:{number}"
        found = _ID_RE.match(line)
        if found is None:
            raise TreebankError(f"{where}: malformed Sinica line: expected '#<id> <tree>#...'")
        body = line[found.end():]
        cut = body.rfind("#")
        if cut < 0:
            raise TreebankError(f"{where}: malformed Sinica line: no '#' after the tree")
        node = parse_icg(body[:cut], where)
        node.line = number
        trees.append(SinicaTree(len(trees), number, found.group().strip(), node,
                                body[cut + 1:].strip()))
    if not trees:
        raise TreebankError(f"{name}:1: no Sinica tree found (empty input)")
    return trees


def gold(tree: SinicaTree, name: str = FILE_NAME) -> GoldTree | None:
    """The preprocessed tree (module docstring); ``None`` when no word is left."""
    return to_gold(tree.tree, f"{name}:{tree.line}", keep=_keep, normalize=_same, label=_same)


def words(tree: SinicaTree) -> list[str]:
    """The clause's words without punctuation, as the language model reads them."""
    out: list[str] = []
    todo = [tree.tree]
    while todo:
        node = todo.pop()
        if node.is_preterminal:
            word = node.children[0]
            assert isinstance(word, str)
            if _keep(node.label, word):
                out.append(word)
        else:
            todo.extend(reversed(node.children))  # type: ignore[arg-type]
    return out


def read_sample() -> list[SinicaTree]:
    """The trees of NLTK's sample (``corpora/sinica_treebank/parsed``), looked up in the
    directories of ``NLTK_DATA`` as it is *now*, then in ``nltk.data.path``; read afresh on
    every call.

    Raises:
        TreebankError: the sample is not found (nothing is downloaded) or is malformed.
    """
    import nltk

    env = [p for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
    try:
        root = nltk.data.find("corpora/sinica_treebank/", paths=env + list(nltk.data.path))
        with root.join("parsed").open() as stream:
            data = stream.read()
    except (LookupError, OSError) as exc:
        raise TreebankNotFound(
            f"{FILE_NAME}:0: NLTK's Sinica Treebank sample not found; point NLTK_DATA at a "
            "directory holding corpora/sinica_treebank.zip (nltk.download is never called)"
        ) from exc
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            raise TreebankError(f"{FILE_NAME}:{line}: not UTF-8 text ({exc.reason})") from exc
    return read_parsed(data)


def load_sinica(name: str, trees: list[SinicaTree] | None = None) -> list[GoldTree]:
    """The gold trees of ``sinica`` (all), ``sinica-dev`` or ``sinica-test``, in file order,
    with at least 2 words each (of ``trees``, default :func:`read_sample`)."""
    if name not in SINICA_NAMES:
        raise TreebankError(f"{name}:0: not a Sinica treebank; choose one of "
                            f"{', '.join(SINICA_NAMES)}")
    _, _, part = name.partition("-")
    out = []
    for tree in read_sample() if trees is None else trees:
        if part and part_of(tree.index) != part:
            continue
        g = gold(tree)
        if g is not None and len(g.words) >= 2:
            out.append(g)
    return out


def lm_lines(trees: list[SinicaTree] | None = None) -> list[list[str]]:
    """The language model's ``[train, valid, test]`` text: the clauses of the parts
    ``lm-train``, ``lm-valid`` and ``lm-test``, one line each, words joined by spaces,
    punctuation removed as in the trees (a clause left without words is left out)."""
    parts: dict[str, list[str]] = {p: [] for p in PARTS[:3]}
    for tree in read_sample() if trees is None else trees:
        part = part_of(tree.index)
        if part in parts and (ws := words(tree)):
            parts[part].append(" ".join(ws))
    return [parts[p] for p in PARTS[:3]]
