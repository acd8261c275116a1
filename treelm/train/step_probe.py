"""``auto``'s second look: this run's own training step, timed in float32 and in bf16.

    speedup = t_fp32 / t_bf16     (forward + loss + backward of the run's first batch; the
                                   fastest of a few turns each, the precisions alternating)
    bf16 kept  ⇔  speedup ≥ MIN_GAIN

Why: that this machine multiplies bfloat16 natively (:func:`treelm.kernels.precision.measure`,
a 256 × 512 · 512 × 1024 product) does not make every model train faster in bf16. A small
model's products (a slot tagger's 100-unit Elman cell: 16 × 100 · 100 × 100 per step) take
longer in bfloat16 than in float32 once the casts around them are counted, and its step is
little else: on an AMD EPYC with AVX512-BF16 the ATIS taggers (Elman, Jordan, GRU, LSTM) and
SNIPS Elman trained at 0.74-0.83× their float32 speed in bf16 and the reverse task's RNN with
attention at 0.95×, while ConvS2S, logic's ON-LSTM and the character models ran 1.24-1.69×
faster (``benchmarks/results/precision-tasks-20261126.json``) and the PTB word models 1.79×
(``precision-20261126.json``). So where the machine says bf16, ``auto`` times the run's step in
both precisions before training and keeps bf16 only where it pays; the measurement is logged and
recorded with the choice.

On CUDA the machine's word is only that it has bfloat16 tensor cores (compute capability ≥ 8.0;
:func:`treelm.kernels.precision.measure` times no product there: one of a layer's size takes
about as long as its launch), and the step decides alone. It is timed as the run will train:
between ``torch.cuda.synchronize`` calls, the fused ON-LSTM replayed from CUDA graphs captured
for the copy in each precision in the untimed first turn (the copy starts without the model's
graphs; they are thrown away with it), and more turns than on the CPU, a GPU's step being short.
Alone on an H100 the paper-width tree run's step measured 1.36× in bf16 (whole training 1.29×,
``benchmarks/results/precision-gpu-trees-20261127.json``). The wall clock is what it reads, so
other processes on the same GPU sway it: three such runs started at once measured 0.82×, 1.20×
and 1.55× (``trees-gpu-20261127.json``); runs sharing a GPU may pin the precision instead.

Nothing of the run changes: the step runs on a copy of the model, the random streams are
forked (dropout draws nothing from the run's), and the task's position and carried state are
put back (``state_dict``), so the run trains on the batches, and with the numbers, it would have
had without the probe (``tests/test_step_probe.py``). No optimiser step is timed: it does the
same float32 work in both precisions. On CUDA the CUDA generator is forked too (dropout draws
there), and the run's own CUDA graphs are neither copied nor touched.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable

import torch
from torch import nn

from treelm.kernels import precision
from treelm.kernels.graphs import GraphCache
from treelm.tasks.base import Task

MIN_GAIN = 1.1      # bf16 must make the step this much faster (a near tie keeps float32's digits)
TURNS = 3           # timed turns per precision, after one untimed
TURNS_CUDA = 10     # on CUDA: a step takes tens of milliseconds there
BUDGET_S = 20.0     # fewer turns where one step is long (at least one timed turn each)
CLEAR = 1.25        # ... and no more once the gain so far is this far from MIN_GAIN, either way:
                    # a further turn can only lower each minimum, and noise of 25% would not
                    # flip the choice (the PTB tree model's 1.63x: one timed turn, not three)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _copy(model: nn.Module) -> nn.Module:
    """``model`` deep-copied without its CUDA-graph caches (a captured graph cannot be copied,
    and the copy's own steps must not replay the model's): the copy captures its own."""
    memo: dict[int, object] = {id(v): None for m in model.modules() for v in vars(m).values()
                               if isinstance(v, GraphCache)}
    return copy.deepcopy(model, memo)


def step_times(model: nn.Module, task: Task, device: torch.device, turns: int | None = None,
               budget_s: float = BUDGET_S) -> dict[str, float]:
    """Seconds of one forward + backward of the task's next batch in each precision, the
    fastest of up to ``turns`` (default :data:`TURNS`, on CUDA :data:`TURNS_CUDA`; module
    docstring); the run's model, task and RNG (the CPU's and the device's) untouched."""
    if turns is None:
        turns = TURNS_CUDA if device.type == "cuda" else TURNS
    state = copy.deepcopy(task.state_dict())
    probe = _copy(model).train()
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            batch = next(iter(task.batches()))
            t_start = time.perf_counter()
            for turn in range(turns + 1):                   # turn 0 warms up, untimed
                for prec in ("fp32", "bf16") if turn % 2 else ("bf16", "fp32"):
                    _sync(device)
                    t0 = time.perf_counter()
                    with precision.autocast(prec, device):
                        out = task.loss(probe, batch)
                    out.loss.backward()
                    _sync(device)
                    if turn:
                        times[prec].append(time.perf_counter() - t0)
                    probe.zero_grad(set_to_none=True)
                if turn and (time.perf_counter() - t_start > budget_s or _clear(times)):
                    break
    finally:
        task.load_state_dict(state)
        del probe
    return {p: min(t) for p, t in times.items()}


def _clear(times: dict[str, list[float]]) -> bool:
    """Whether the timings so far put the gain beyond :data:`CLEAR` of :data:`MIN_GAIN`."""
    gain = min(times["fp32"]) / min(times["bf16"])
    return gain >= MIN_GAIN * CLEAR or gain <= MIN_GAIN / CLEAR


def _ms(seconds: float) -> str:
    """Milliseconds for a log line: 3 significant digits, no exponent (1,510 not 1.51e+03)."""
    ms = 1e3 * seconds
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.3g}"


def confirm(choice: precision.Choice, model: nn.Module, task: Task, device: torch.device,
            say: Callable[[str], None] | None = None) -> precision.Choice:
    """``auto``'s machine choice ``choice``, kept or turned to fp32 by this run's step (CPU or
    CUDA, where the machine chose bf16); the reason says what was measured. ``say`` hears a line
    before the timing starts (a large model's steps take seconds each)."""
    if choice.precision != "bf16" or device.type not in ("cpu", "cuda"):
        return choice
    if say is not None:
        say("treelm: precision auto: timing this model's training step in fp32 and bf16")
    t = step_times(model, task, device)
    gain = t["fp32"] / t["bf16"]
    keep = gain >= MIN_GAIN
    return precision.Choice(
        choice.device, "bf16" if keep else "fp32",
        f"{choice.reason.removesuffix(': bf16')}; this model's training step {gain:.2f}× in "
        f"bf16 ({_ms(t['bf16'])} vs {_ms(t['fp32'])} ms): " +
        ("bf16" if keep else f"not {MIN_GAIN}× faster, fp32"),
        choice.fp32_ms, choice.bf16_ms)
