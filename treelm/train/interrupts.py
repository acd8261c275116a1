"""Ctrl-C and ``kill`` (SIGINT, SIGTERM) during training: finish the batch, save, stop.

Inside ``with StopRequests(say) as stop:`` the first signal only sets ``stop.signal`` (its name);
the loop checks it after every batch, writes a checkpoint and returns, so no work is lost beyond
the current batch and ``--resume`` continues bit for bit. A second signal stops at once with
``KeyboardInterrupt``; the last checkpoint stays intact (saves are atomic). Outside the main
thread (where handlers cannot be installed) nothing changes.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any


class StopRequests:
    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.signal: str | None = None
        self._old: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        if self.signal is not None:
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name
        self.say(f"treelm: {self.signal}: saving after this batch (send it again to stop now)")

    def __enter__(self) -> StopRequests:
        if threading.current_thread() is threading.main_thread():
            self._old = {sig: signal.signal(sig, self._handler)
                         for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
