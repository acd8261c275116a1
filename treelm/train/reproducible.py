"""What makes a resumed run repeat the uninterrupted one: the RNG states a checkpoint carries and
the ``train.deterministic`` switch.

On the CPU every kernel treelm runs is deterministic, so saving the CPU generator's state is
enough: a resume gives the same loss curve and weights bit for bit. On CUDA two more things count:

* the CUDA generator of the training device (dropout masks drawn on the GPU): saved with the CPU
  one and restored on resume;
* kernels whose summation order varies from run to run (atomic adds in some reductions and
  backward passes, cuBLAS picking its split-K workspace): ``train.deterministic: true`` asks
  PyTorch for deterministic algorithms (:func:`use_deterministic`). Without it a resumed run's
  loss curve agrees with the uninterrupted one to about 1e-4 relative, not exactly (issue 15,
  tiny-lm on an H100: 6.014178 against 6.014237 at one point of the curve).
"""

from __future__ import annotations

import os
from typing import Any

import torch

CUBLAS_WORKSPACE = ":4096:8"
"""``CUBLAS_WORKSPACE_CONFIG`` under ``train.deterministic``: cuBLAS is deterministic only with a
fixed workspace per stream (NVIDIA's cuBLAS docs, "Results reproducibility")."""


def use_deterministic() -> None:
    """Deterministic algorithms for the rest of the process (``train.deterministic: true``).

    Sets ``CUBLAS_WORKSPACE_CONFIG`` (read when cuBLAS starts, so before the first CUDA product:
    the trainer calls this before it builds anything), ``torch.use_deterministic_algorithms`` and
    cuDNN's deterministic mode (no benchmarking of algorithms). ``warn_only=True``: an op that has
    no deterministic CUDA kernel warns instead of stopping the run. The ON-LSTM paths on CUDA
    have one exception, the levels' ``torch.cumsum`` of the reference cell and of ``impl="cpu"``
    (PyTorch flags every floating-point CUDA cumsum; over a row of ``L`` levels it is a
    one-block scan, in a fixed order); the default CUDA path (Triton) sums the levels inside its
    own kernels.
    """
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def rng_state(device: torch.device) -> dict[str, Any]:
    """The generators' states for a checkpoint (tensors only: ``weights_only``-loadable): the
    CPU one, and on CUDA the training device's (one process trains on one device; under DDP every
    rank's device generator was seeded alike and advanced alike, so rank 0's stands for all)."""
    state: dict[str, Any] = {"torch_rng": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda_rng"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(saved: dict[str, Any], device: torch.device) -> None:
    """Restore :func:`rng_state`'s states; the CUDA one only on CUDA (a run saved on a GPU resumes
    on a CPU, or the other way round, with a fresh CUDA generator: then not exactly)."""
    torch.set_rng_state(saved["torch_rng"])
    if device.type == "cuda" and saved.get("cuda_rng") is not None:
        torch.cuda.set_rng_state(saved["cuda_rng"], device)
