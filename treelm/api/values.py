"""What the methods of :class:`~treelm.api.model.TreelmModel` take and give back: the checks of
their arguments (one-line :class:`~treelm.errors.TreelmError`\\ s), the unknown-symbol policy a
caller passes (a name, or the verbs' :class:`~treelm.text.inputs.UnknownSymbols` with their
``--unk`` hints and input names), and the values returned (:class:`Attention`,
:class:`Generation`, ``nltk.Tree``, :class:`TreeDefaults`). Nothing here loads torch: ``import
treelm`` stays light.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Union

from treelm.errors import TreelmError

if TYPE_CHECKING:
    import nltk
    import numpy as np

    from treelm.rundir.trees import TreeChoice
    from treelm.text.inputs import UnknownSymbols

#: An unknown-symbol policy: ``"map"`` or ``"error"`` (a Python caller), or the verbs' policy
#: object, which counts mapped symbols over a whole input and names the verb's options.
Unk = Union[str, "UnknownSymbols"]


def policy_of(unk: Unk, vocabulary: str = "the run's vocabulary") -> UnknownSymbols:
    """``unk`` as a policy object (a name makes a fresh one)."""
    from treelm.text.inputs import UnknownSymbols

    return UnknownSymbols(unk, vocabulary) if isinstance(unk, str) else unk


@dataclass(frozen=True)
class Attention:
    """Attention of a translation: ``weights[l, t, j]`` is how much decoder layer ``l`` read
    source symbol ``source[j]`` when it predicted ``target[t]`` (each row sums to 1)."""

    weights: np.ndarray          # (layers, T, S)
    source: list[str]            # S source symbols, <eos> last
    target: list[str]            # T target symbols, <eos> last
    text: str                    # the target as text (the translation, when none was given)


@dataclass(frozen=True)
class TreeDefaults:
    """The layer and rule ``parse`` reads unless told (``TreelmModel.choice``), and why:
    ``chosen``, the run's choice on dev trees for the loaded checkpoint
    (:class:`~treelm.rundir.trees.TreeChoice`, from ``trees.json``), or None, where the
    defaults are the last-but-one ON-LSTM layer (the only one of a 1-layer model) and the
    official rule."""

    layer: int
    rule: str
    chosen: TreeChoice | None = None

    @property
    def why(self) -> str:
        """``chosen on nltk-dev (sentence F1 47.6 at the best checkpoint)``, or why not."""
        if self.chosen is not None:
            return self.chosen.describe()
        return "the last-but-one ON-LSTM layer and the official rule; no dev choice in this run"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``layer``, ``rule``, ``why`` and the ``chosen`` entry (or None)."""
        return {"layer": self.layer, "rule": self.rule, "why": self.why,
                "chosen": asdict(self.chosen) if self.chosen is not None else None}


class Generation(Iterator[str]):
    """The text of :meth:`~treelm.api.model.TreelmModel.generate_stream`, piece by piece as the
    model produces it (a symbol's text: a word with its space, a character, a newline for
    ``<eos>``). ``symbols`` counts the symbols given out so far; ``logprob`` is the beam
    search's log-probability of the whole continuation (``None`` when sampling)."""

    def __init__(self, symbols: Iterator[str], piece_text: Callable[[str, bool], str],
                 line_start: bool, logprob: float | None = None) -> None:
        self._symbols, self._piece_text = symbols, piece_text
        self.line_start = line_start       # whether the next piece starts a line
        self.symbols = 0
        self.logprob = logprob

    def __next__(self) -> str:
        piece = self._piece_text(next(self._symbols), self.line_start)
        self.symbols += 1
        self.line_start = piece.endswith("\n")
        return piece


def to_nltk(tree: Any, label: str = "X") -> nltk.Tree:
    """A nested-list tree (:mod:`treelm.syntax.trees`) as an ``nltk.Tree`` whose constituents
    are all labelled ``label`` (the induced trees are unlabeled); a one-token tree is
    ``Tree(label, [token])``. Built with an explicit stack: deep trees do not recurse."""
    import nltk

    if not isinstance(tree, (list, tuple)):
        return nltk.Tree(label, [tree])
    root = nltk.Tree(label, [])
    stack: list[tuple[Any, nltk.Tree]] = [(tree, root)]
    while stack:
        node, out = stack.pop()
        for child in node:
            if isinstance(child, (list, tuple)):
                sub = nltk.Tree(label, [])
                out.append(sub)
                stack.append((child, sub))
            else:
                out.append(child)
    return root


def sentences_of(sentences: str | Sequence[str], what: str = "sentence") -> list[str]:
    """One string or a sequence of them, each with text."""
    items = [sentences] if isinstance(sentences, str) else list(sentences)
    if not items:
        raise TreelmError(f"no {what}s given")
    for k, s in enumerate(items, 1):
        if not isinstance(s, str):
            raise TreelmError(f"{what} {k} is a {type(s).__name__}, not text")
        if not s.strip():
            raise TreelmError(f"{what} {k} is empty")
    return items


def check_positive(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value < 1):
        raise TreelmError(f"{name} must be an integer >= 1, got {value!r}")
