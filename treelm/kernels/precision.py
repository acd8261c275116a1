"""Numeric precision of a run: ``fp32`` or ``bf16`` mixed precision, and ``auto``'s measured choice.

Under ``bf16`` the forward pass and the loss run inside ``torch.autocast(device, bfloat16)``:

    products (x Wᵀ, h Uᵀ, convolutions, attention scores)   bfloat16 operands, float32 accumulation
    everything else                                          float32

Weights, gradients and optimiser states stay float32 (autocast casts a weight to bfloat16 as an
operand only). The models and cells bring each product's result back to float32 before any
nonlinearity, so gates, softmax / log-softmax / cross-entropy, cumax, the cell state, AR/TAR and
every reduction run in float32 (``gemm.linear`` does it for the cells, the models do it at their
few products of their own; ``tests/test_precision.py`` compares losses and gradients with fp32).

Why measured rather than decided by a flag of the processor: bfloat16 pays only where the machine
multiplies it natively (AVX512-BF16 or AMX on x86 CPUs, tensor cores of compute capability ≥ 8.0
on CUDA). Elsewhere the products are emulated: on an AVX2-only CPU whole training ran at
0.03-0.04× its float32 speed in bfloat16 (``benchmarks/results/precision-20261123.json``). So on
the CPU ``auto`` times a small product, then (unless bfloat16 is clearly emulated) one of a
language model's shape, in both precisions once per process and device, and takes ``bf16`` only
where it is at least :data:`MIN_SPEEDUP` times faster. On CUDA no product is timed: a GPU of
compute capability ≥ 8.0 has bfloat16 tensor cores, and a product of that size takes about as
long as its launch there (an H100 timed 256×512·512×1024 at 1.11× in bfloat16, and ``auto`` took
fp32 for the paper-width tree run, which trains 1.29× faster in bf16 there:
``precision-gpu-trees-20261127.json``), so such a GPU is a candidate for bf16 and the run's own
training step decides
(:mod:`treelm.train.step_probe`), as it does after a CPU's products said bf16. The measurement
is logged and recorded, and a resumed run keeps the precision it started with (so it rounds as
before). The environment variable ``TREELM_AUTO_PRECISION=fp32|bf16`` makes ``auto`` that
precision without measuring.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

PRECISIONS = ("fp32", "bf16", "auto")
#: ``auto`` taken as this precision without measuring (``fp32`` or ``bf16``): the test suite pins
#: it so that its results do not depend on whether the machine multiplies bfloat16 natively
ENV_VAR = "TREELM_AUTO_PRECISION"
MIN_SPEEDUP = 1.3        # bf16 must beat float32 by this factor for `auto` to take it
SHAPE = (256, 512, 1024)  # (M, K, N): rows × width → gates (a layer's, an output layer's slice)
PROBE = (64, 256, 256)    # a first, cheap look: an emulated bfloat16 is many times slower already


@dataclass(frozen=True)
class Choice:
    """What ``auto`` measured on a device and what it took."""

    device: str
    precision: str              # "fp32" | "bf16"
    reason: str                 # one line for the log
    fp32_ms: float | None = None
    bf16_ms: float | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _time_product(dtype: torch.dtype, device: torch.device, shape: tuple[int, int, int],
                  repeats: int = 10, budget_s: float = 0.3) -> float:
    """Fastest of up to ``repeats`` timed (M, K) · (K, N) products in ``dtype`` on ``device``, in
    milliseconds (the minimum: other work on the machine only ever adds time), within about
    ``budget_s`` seconds of wall time.

    On the CPU the products run on one intra-op thread and are timed by that thread's CPU time
    (``time.thread_time``), not by the wall clock: a training started while other jobs keep the
    cores busy was measured at "bfloat16 0.04× float32" (40 vs 1.7 ms, the process waiting for
    a core) on a CPU where bfloat16 is 2.3× faster, and took float32. CPU time counts only what
    this thread computed, so the ratio of the two dtypes is the machine's, busy or not."""
    m, k, n = shape
    g = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(m, k, generator=g).to(device=device, dtype=dtype)
    b = torch.randn(k, n, generator=g).to(device=device, dtype=dtype)
    cpu = device.type == "cpu"
    clock = time.thread_time if cpu else time.perf_counter
    threads = torch.get_num_threads()
    best, start = float("inf"), time.perf_counter()
    try:
        if cpu:
            torch.set_num_threads(1)          # the product runs on this thread: its clock sees it
        for i in range(repeats + 1):
            if not cpu:
                torch.cuda.synchronize(device)
            t0 = clock()
            a @ b
            if not cpu:
                torch.cuda.synchronize(device)
            if i:                  # the first call warms caches and may pick a kernel
                best = min(best, clock() - t0)
                if time.perf_counter() - start > budget_s:
                    break
    finally:
        torch.set_num_threads(threads)
    return 1e3 * best


Measure = Callable[[torch.dtype, torch.device, tuple[int, int, int]], float]
_CHOICES: dict[str, Choice] = {}


def measure(device: torch.device | str, timer: Measure | None = None) -> Choice:
    """``auto``'s choice for ``device``: measured once per process and device (``timer`` replaces
    the timing, for tests: ``timer(dtype, device, (M, K, N)) -> ms``). A small product is timed
    first: where bfloat16 is more than twice as slow there it is emulated, and the choice is
    made without timing the larger one (a fraction of a second instead of one). On CUDA nothing
    is timed (module docstring): tensor cores make bf16 the candidate that the run's own step
    then confirms or turns down (:func:`treelm.train.step_probe.confirm`)."""
    device = torch.device(device)
    key = str(device)
    if timer is None and key in _CHOICES:
        return _CHOICES[key]
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        choice = (Choice(key, "fp32", "no bfloat16 tensor cores (compute capability < 8.0)")
                  if major < 8 else
                  Choice(key, "bf16", f"bfloat16 tensor cores (compute capability "
                                      f"{major}.{minor}): bf16"))
    elif device.type != "cpu":
        choice = Choice(key, "fp32", f"no bfloat16 autocast measured on {device.type}")
    else:
        time_it = timer or _time_product
        with torch.no_grad():
            shape = PROBE
            f32 = time_it(torch.float32, device, shape)
            b16 = time_it(torch.bfloat16, device, shape)
            if f32 / b16 >= 0.5:        # not clearly emulated: time the product that counts
                shape = SHAPE
                f32 = time_it(torch.float32, device, shape)
                b16 = time_it(torch.bfloat16, device, shape)
        speedup = f32 / b16
        native = speedup >= MIN_SPEEDUP
        m, k, n = shape
        choice = Choice(key, "bf16" if native else "fp32",
                        f"bfloat16 products {speedup:.2f}× float32 "
                        f"({b16:.3g} vs {f32:.3g} ms for {m}×{k}·{k}×{n}); " +
                        ("native: bf16" if native else f"not {MIN_SPEEDUP}× faster: fp32"),
                        round(f32, 4), round(b16, 4))
    if timer is None:
        _CHOICES[key] = choice
    return choice


def forget() -> None:
    """Drop the measured choices (tests)."""
    _CHOICES.clear()


def pinned() -> str:
    """What :data:`ENV_VAR` pins ``auto`` to (``fp32`` / ``bf16``), or ``""``."""
    pin = os.environ.get(ENV_VAR, "")
    if pin and pin not in ("fp32", "bf16"):
        raise ValueError(f"{ENV_VAR}={pin!r}: fp32 or bf16")
    return pin


def resolve(requested: str, device: torch.device | str) -> Choice:
    """The precision to run in: ``requested`` unless it is ``auto`` (then :func:`measure`)."""
    if requested not in PRECISIONS:
        raise ValueError(f"unknown precision {requested!r}: one of {PRECISIONS}")
    if requested == "auto":
        if pin := pinned():
            return Choice(str(torch.device(device)), pin, f"auto pinned by {ENV_VAR}")
        return measure(device)
    return Choice(str(torch.device(device)), requested, "asked for")


def autocast(precision: str, device: torch.device | str) -> contextlib.AbstractContextManager:
    """The context a forward pass and its loss run in: bfloat16 autocast for ``bf16``, nothing
    for ``fp32``."""
    device = torch.device(device)
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    if precision != "fp32":
        raise ValueError(f"unknown precision {precision!r}: fp32 or bf16 (resolve 'auto' first)")
    return contextlib.nullcontext()


def autocasting(device_type: str) -> bool:
    """Whether autocast is on for ``device_type`` (``False`` for types it does not know, e.g.
    ``meta``, where asking raises)."""
    return device_type in ("cpu", "cuda", "xpu", "mps") and torch.is_autocast_enabled(device_type)


def autocast_dtype(device_type: str) -> torch.dtype | None:
    """The dtype ``torch.autocast`` runs products in for this device type now, ``None`` when it
    is off (or the device type has no autocast)."""
    if device_type not in ("cpu", "cuda") or not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type)


def no_autocast(device_type: str, active: bool) -> contextlib.AbstractContextManager:
    """Autocast switched off for ``device_type`` (where it was on), else nothing: hand-written
    passes that cast their own products run the rest in float32."""
    return torch.autocast(device_type, enabled=False) if active else contextlib.nullcontext()


def up(t: torch.Tensor) -> torch.Tensor:
    """``t`` in float32 if autocast made it bfloat16 / float16 (float64 and float32 stay)."""
    return t.float() if t.dtype in (torch.bfloat16, torch.float16) else t
