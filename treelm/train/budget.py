"""``train.max_minutes`` as the wall time of the whole run, the final validation inside it, and
when a run is finished.

**What is counted.** ``LoopState.elapsed`` is wall time: from the start of each ``treelm train``
command that trained the run (``treelm.cli.main``: importing torch, reading data, building the
model, the step-0 checkpoint), every batch, every validation and every checkpoint. The
interpreter's own start before ``main`` and the exit after the result are the only parts of a
command outside it.

**When training stops.** Training must leave time for what follows it, the final validation and
its checkpoint, so after every batch the loop stops when

    elapsed + reserve >= 60 · max_minutes,
    reserve = MARGIN · t_valid + t_save + t_batch,

where ``t_valid`` is the wall time of the run's last validation (kept in the loop state, so a
resume knows it), ``t_save`` that of the last checkpoint and ``t_batch`` that of the last batch
(the one more batch a "not yet" lets in). MARGIN = 1.25 absorbs a validation that runs slower
than the previous one on a shared machine. A run with a budget and no validation measured yet
(a new run, or one that never reached a validation) validates once before its first batch: the
measurement is a real validation of the untrained model, logged as such (``initial: true``), and
costs what the final one will (a fraction of a validation would need every task to evaluate a
part of its data, and would still have to be scaled up). If the budget cannot hold another
validation after that one, the run ends there, that validation being its final one (a one-line
note says so). An epoch that ends inside the reserve ends the run: its validation is the final
one.

**Finished runs.** A run that stopped on its budget records why (``minutes`` or ``units``) and the
limits then in force. ``treelm train --resume`` on a finished run (that budget spent, or every
epoch done) says so and trains nothing, unless the command line raises the limit that stopped it
(``train.max_minutes=``, ``train.max_units=``, ``train.epochs=``; ``null`` lifts it).
"""

from __future__ import annotations

from typing import Any

MARGIN = 1.25
LIMITS = {"minutes": "max_minutes", "units": "max_units"}


def reserve_seconds(valid_s: float, save_s: float, batch_s: float) -> float:
    """Seconds the end of a run needs after the batch just taken (see the module docstring)."""
    return MARGIN * valid_s + save_s + batch_s


def limits(tc: Any) -> dict[str, Any]:
    """The limits of the loop's config ``tc`` that end a run, as the state records them."""
    return {"epochs": tc.epochs, "max_minutes": tc.max_minutes, "max_units": tc.max_units}


def _raised(then: Any, now: Any) -> bool:
    return now is None or (then is not None and now > then)


def finished(epoch: int, elapsed: float, units: int, why: str, then: dict[str, Any],
             tc: Any) -> str | None:
    """Why a run whose loop state is (``epoch``, ``elapsed``, ``units``, ``why`` it stopped,
    the limits ``then``) has nothing left to train under the config ``tc``, or None."""
    if epoch > tc.epochs:
        return f"all {tc.epochs} epochs done"
    if why in LIMITS and not _raised(then.get(LIMITS[why]), getattr(tc, LIMITS[why])):
        return (f"its budget of {then[LIMITS[why]]} min was spent" if why == "minutes" else
                f"its budget of {then[LIMITS[why]]:,} units was spent")
    # runs from before stops were recorded, or a limit lowered since
    if tc.max_minutes and elapsed >= 60 * tc.max_minutes:
        return f"its budget of {tc.max_minutes} min was spent"
    if tc.max_units and units >= tc.max_units:
        return f"its budget of {tc.max_units:,} units was spent"
    return None
