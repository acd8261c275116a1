"""A run's scalars as TensorBoard event files in ``RUN/tb/``, where ``tensorboard`` is installed.

``pip install 'treelm[tb]'`` and every run also writes what its metrics log holds of the
``train`` and ``valid`` events (loss, perplexity or the task's scores, learning rate, tokens/s,
the trees' ``parse_f1/<rule>/L<k>``), so that ``tensorboard --logdir runs/STUDY`` draws every run
of a study on one chart. The step is the units (tokens) seen, not the batch: runs of different
batch sizes, or resumed on another number of processes, then share one axis. A tag is the
metrics log's ``event/key`` (``valid/loss``, ``train/tok_s``); a key that is a path already (the
trees' F1) is its own tag.

``metrics.jsonl`` stays the record: this is a view of it, so where ``tensorboard`` is not
installed nothing is written and nothing is said, and a write that fails (a full disk) is said in
one line and stops the view, not the training. The writer opens at the first event, so a run
that logs nothing (a finished run resumed) makes no ``tb/``. A resumed run purges what the
killed process logged after its checkpoint (``purge_step``): the curve goes on as the metrics
log does, without a second copy of those points. A new run (``--force`` over an old one) first
removes the old run's event files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The events drawn, and the fields of theirs that are bookkeeping, not curves.
EVENTS = ("train", "valid")
NOT_SCALARS = frozenset({"event", "epoch", "step", "elapsed", "tokens", "threads"})
#: TensorBoard's event file names (``events.out.tfevents.<time>.<host>...``).
EVENT_FILES = "events.out.tfevents.*"


class Board:
    """The TensorBoard writer of one run (main process only). ``resumed_at``: the units of the
    checkpoint a resume starts from (None: a new run)."""

    def __init__(self, path: Path, resumed_at: int | None,
                 warn: Callable[[str], None]) -> None:
        self.path, self.resumed_at, self.warn = path, resumed_at, warn
        self.writer: Any = None
        self.off = False            # not installed, or a write failed: nothing more is tried

    def _open(self) -> Any:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:         # the package is an extra: without it, no view and no word
            self.off = True
            return None
        if self.resumed_at is None:
            for old in self.path.glob(EVENT_FILES):     # the run --force replaces
                old.unlink()
        # a resume's events start after its checkpoint's units (those logged at them were
        # logged before it was saved, and stay): what a killed process logged later goes
        purge = None if self.resumed_at is None else self.resumed_at + 1
        return SummaryWriter(str(self.path), purge_step=purge, flush_secs=30)

    def log(self, record: dict[str, Any]) -> None:
        """Draw the numbers of one metrics log ``record`` (``event``, ``tokens``, fields)."""
        if self.off or record.get("event") not in EVENTS:
            return
        try:
            if self.writer is None:
                self.writer = self._open()
                if self.writer is None:
                    return
            event, step = record["event"], int(record["tokens"])
            for key, value in record.items():
                # bools are ints to Python: `initial`, `epoch_end` are flags, not curves
                if key in NOT_SCALARS or isinstance(value, bool) or \
                        not isinstance(value, int | float):
                    continue
                self.writer.add_scalar(key if "/" in key else f"{event}/{key}", value, step)
            if event == "valid":    # a validation is worth seeing at once; train points wait
                self.writer.flush()         # for flush_secs
        except Exception as e:      # a view of the metrics log must never stop the training
            self.off = True
            self.warn(f"treelm: warning: TensorBoard events in {self.path} no longer written "
                      f"({type(e).__name__}: {e}); metrics.jsonl has every event")

    def close(self) -> None:
        """Flush and close; safe to call twice. Silent: a run that ends on an error (a full
        disk) has said its one line already, and metrics.jsonl holds what the view lacks."""
        writer, self.writer = self.writer, None
        if writer is not None:
            try:
                writer.close()
            except Exception:
                pass
