"""The plumbing of :class:`~treelm.api.model.TreelmModel`: which methods a run offers, one call
at a time in the run's precision, the run's level sources, and the unknown-symbol policy.

Every method of the API enters :meth:`ModelBase._calling`: it refuses a method the run does not
offer (:class:`UnsupportedMethodError`), holds the object's lock (``treelm serve`` shares one
object between threads), and runs in the run's precision (``Run.autocast``) without gradients.
A Python caller names the policy (``unk="map"`` or ``"error"``) and reads errors that name this
API's argument; a verb passes its own :class:`~treelm.text.inputs.UnknownSymbols`, which names
the verb's option and input lines, and whose messages are left as they are.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from treelm.api.values import TreeDefaults, Unk
from treelm.errors import TreelmError

if TYPE_CHECKING:   # torch and the run load only when a run is opened
    from treelm.run import Run
    from treelm.rundir.trees import TreeChoice
    from treelm.syntax.sources import LevelSource

#: Every method of the API, in the order ``supports`` lists them.
METHODS = ("parse", "levels", "score", "generate", "probe", "tag", "translate", "attention",
           "curves")
TREE_METHODS = ("parse", "levels")
#: What each task offers; the tree methods also need ON-LSTM layers (a language model's, or a
#: translation encoder's). ``curves`` (the training curves of metrics.jsonl) is every run's.
TASK_METHODS: dict[str, tuple[str, ...]] = {
    "lm": ("parse", "levels", "score", "generate", "probe", "curves"),
    "translation": ("parse", "levels", "translate", "attention", "curves"),
    "tagging": ("tag", "curves"),
    "logic": ("curves",),
    "listops": ("curves",),
}


class UnsupportedMethodError(TreelmError):
    """A method the run's task (or its model) does not offer."""


class ModelBase:
    """A loaded run and what it offers. ``task`` is its task's name, ``supports`` the methods it
    offers, ``layers`` the 1-based numbers of its ON-LSTM layers (``()`` without master gates),
    ``choice`` the :class:`~treelm.api.values.TreeDefaults` ``parse`` reads unless told (the
    layer and rule the run chose on dev trees for this checkpoint, else the last-but-one layer
    and the official rule; None without ON-LSTM layers), and ``default_layer`` and
    ``default_rule`` the same two values."""

    def __init__(self, run: Run) -> None:
        from treelm.syntax.levels import NoMasterGatesError, default_layer
        from treelm.syntax.sources import level_source

        self.run = run
        self.task: str = run.task.name
        self.path: Path = run.path
        self._lock = threading.RLock()
        self._sources: dict[str, LevelSource] = {}
        self._no_trees = ""          # why the tree methods are missing, when they are
        offered = TASK_METHODS.get(self.task, ())
        self.layers: tuple[int, ...] = ()
        if any(m in offered for m in TREE_METHODS):
            try:
                self._sources["forward"] = level_source(run, "forward")
                self.layers = self._sources["forward"].layers
            except NoMasterGatesError as e:
                self._no_trees = str(e)
        self.default_layer: int | None = default_layer(self.layers) if self.layers else None
        self.choice: TreeDefaults | None = None
        if self.layers:
            chosen = self._chosen()
            self.default_layer = chosen.layer if chosen else self.default_layer
            self.choice = TreeDefaults(self.default_layer, chosen.rule if chosen else "official",
                                       chosen)
        self.default_rule = self.choice.rule if self.choice else "official"
        self.supports: tuple[str, ...] = tuple(
            m for m in METHODS if m in offered and (m not in TREE_METHODS or self.layers))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({str(self.path)!r}, task={self.task!r}, "
                f"supports={self.supports})")

    def _chosen(self) -> TreeChoice | None:
        """The run's choice on dev trees for the loaded checkpoint (``trees.json``), if it is
        for these weights and names a layer and rule there are; a damaged file is said in one
        line and left out (it could only change a default)."""
        import sys

        from treelm.rundir.trees import current_choice
        from treelm.syntax.trees import TREE_STYLES

        try:
            chosen = current_choice(self.path, self.run.checkpoint)
        except TreelmError as e:
            print(f"treelm: warning: {e}", file=sys.stderr, flush=True)
            return None
        if chosen is None or chosen.layer not in self.layers or chosen.rule not in TREE_STYLES:
            return None
        return chosen

    def require(self, method: str) -> None:
        """Raise :class:`UnsupportedMethodError` unless ``method`` is in ``supports``."""
        if method in self.supports:
            return
        why = (f" ({self._no_trees})" if method in TREE_METHODS and self._no_trees else "")
        offers = ", ".join(self.supports) if self.supports else "no method of this API"
        raise UnsupportedMethodError(f"{method}: not supported by this {self.task!r} run{why}; "
                                     f"it supports {offers}")

    @contextmanager
    def _calling(self, method: str, unk: Unk = "map") -> Iterator[None]:
        """One call at a time, in the run's precision, without gradients; with a policy given
        by name, an unknown symbol's error names this API's ``unk`` argument."""
        import torch

        from treelm.text.vocab import UnknownSymbolError

        self.require(method)
        try:
            with self._lock, self.run.autocast(), torch.no_grad():
                yield
        except UnknownSymbolError as e:      # the library's hint names the verbs' option
            if not isinstance(unk, str):
                raise
            raise UnknownSymbolError(str(e).replace("--unk map", "unk='map'")) from None

    def _check(self, method: str, unk: Unk, unknown: Sequence[str], where: str,
               vocabulary: str = "the run's vocabulary") -> None:
        """``unknown`` (the symbols of one input outside the vocabulary) under ``unk``: a
        verb's policy counts or refuses them in its words; a named policy refuses them with
        this API's hint."""
        from treelm.api.values import policy_of

        with self._calling(method, unk):
            policy_of(unk, vocabulary).check(unknown, where)

    def _source(self, direction: str) -> LevelSource:
        from treelm.syntax.levels import DIRECTIONS
        from treelm.syntax.sources import level_source

        if direction not in DIRECTIONS:
            raise TreelmError(f"direction must be one of {', '.join(DIRECTIONS)}, "
                              f"got {direction!r}")
        if direction not in self._sources:
            self._sources[direction] = level_source(self.run, direction)
        return self._sources[direction]

    def layers_of(self, direction: str = "forward") -> tuple[int, ...]:
        """The ON-LSTM layers whose levels ``direction`` reads (a translation encoder's
        backward stack has its own); the library's error where there are none."""
        return self._source(direction).layers
