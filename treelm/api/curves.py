"""A run's training curves, read from its ``metrics.jsonl``: :meth:`TreelmModel.curves
<treelm.api.model.TreelmModel.curves>` (what ``treelm serve`` draws while a run trains).

The log is the trainer's (:class:`treelm.rundir.files.MetricsLog`, one JSON object per line,
read with :func:`~treelm.rundir.files.read_metrics`): ``train`` events (the training loss at
every progress line), ``valid`` events (the task's scores, and with ``train.eval_parse`` the
tree F1 ``parse_f1/<rule>/L<layer>`` of :func:`treelm.syntax.tracking.score_key`), each with the
``tokens`` trained on so far. The curves are those values against ``tokens``.

Cheap to ask often: the file is re-read only when its size, modification time or inode changed
since the last read (one ``stat`` otherwise), so a page can poll it every few seconds while the
run trains. A reader ignores the writer's lock (:mod:`treelm.rundir.lock`): the log is only ever
appended to, or cut back to a checkpoint's length on ``--resume``, and either shows as a change.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treelm.errors import TreelmError
from treelm.rundir.files import RunFiles, read_metrics

#: Fields of an event that are not scores (bookkeeping, rates, the learning rate, flags).
NOT_SCORES = frozenset({"event", "epoch", "step", "elapsed", "tokens", "lr", "tok_s",
                        "train_loss"})
#: The headline score of a run, the first of these its validations log: the task's primary
#: score where it is a named score (translation's BLEU, a tagger's F1, accuracy), a language
#: model's perplexity (bits per character for a character model), else the loss.
HEADLINE = ("bleu", "f1", "accuracy", "ppl", "bpc", "loss")
TREE_KEY = re.compile(r"parse_f1/(?P<rule>[^/]+)/L(?P<layer>\d+)")   # score_key's format

Points = list[tuple[int, float]]          # (tokens seen, value), in the log's order


@dataclass(frozen=True)
class Curves:
    """What a run's ``metrics.jsonl`` holds, as curves against the tokens trained on.

    ``valid``: each validation score (``ppl``, ``loss``, ``bleu``, ``f1``…) -> its points;
    ``train``: the training ``loss`` (and ``ppl`` or ``bpc`` where logged) at each progress line;
    ``trees``: tree rule (``official``, ``split``) -> ON-LSTM layer -> sentence F1 (a fraction,
    as logged) at each validation of a run trained with ``train.eval_parse``; ``headline``: the
    score to show first (:data:`HEADLINE`; ``None`` before the first validation); ``done``: the
    log ends with the trainer's ``done`` event (a stopped or running training has none yet);
    ``version``: changes whenever the file does (for HTTP's ``ETag``); ``modified``: the file's
    modification time (seconds since the epoch; 0 without a log). Values are as logged: a
    diverged run's ``nan`` or ``inf`` stay.
    """

    valid: dict[str, Points] = field(default_factory=dict)
    train: dict[str, Points] = field(default_factory=dict)
    trees: dict[str, dict[int, Points]] = field(default_factory=dict)
    headline: str | None = None
    done: bool = False
    version: str = "none"
    modified: float = 0.0


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def curves_of(events: list[dict[str, Any]], version: str = "none",
              modified: float = 0.0) -> Curves:
    """The curves of a metrics log's events (in their order)."""
    valid: dict[str, Points] = {}
    train: dict[str, Points] = {}
    trees: dict[str, dict[int, Points]] = {}
    done = False
    for ev in events:
        kind, tokens = ev.get("event"), ev.get("tokens")
        if kind == "done":
            done = True
            continue
        if kind not in ("train", "valid") or not _number(tokens):
            continue
        done = False                        # a resumed run logs on after an earlier "done"
        for key, value in ev.items():
            if key in NOT_SCORES or not _number(value):
                continue
            point = (int(tokens), float(value))
            tree = TREE_KEY.fullmatch(key) if kind == "valid" else None
            if tree:
                trees.setdefault(tree["rule"], {}).setdefault(
                    int(tree["layer"]), []).append(point)
            elif kind == "valid":
                valid.setdefault(key, []).append(point)
            elif key in ("loss", "ppl", "bpc"):
                train.setdefault(key, []).append(point)
    headline = next((k for k in HEADLINE if k in valid), next(iter(valid), None))
    trees = {rule: dict(sorted(layers.items())) for rule, layers in trees.items()}
    return Curves(valid, train, trees, headline, done, version, modified)


class CurvesReader:
    """The curves of one run's log, re-read only when the file changed (thread-safe)."""


    def __init__(self, run: str | Path) -> None:
        self.files = RunFiles(run)
        self._lock = threading.Lock()
        self._cached: Curves | None = None

    def read(self) -> Curves:
        with self._lock:
            path = self.files.metrics
            try:
                st = os.stat(path)
            except FileNotFoundError:           # nothing logged (yet): no curves, not an error
                self._cached = Curves()
                return self._cached
            except OSError as e:
                raise TreelmError(f"{path}: cannot read ({e.strerror})") from None
            version = f"{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"
            if self._cached is not None and self._cached.version == version:
                return self._cached
            # stat first, then read: a line appended in between is read now and its change of
            # version makes the next call read again (never the other way round, which would
            # mark a log as read that was not)
            events = read_metrics(self.files)   # an unfinished last line is left out
            self._cached = curves_of(events, version, st.st_mtime)
            return self._cached

