"""What a training sets in its own process before it builds anything: memory, threads, number
formats. One call (:func:`configure`), made by :class:`~treelm.train.trainer.Trainer` right after
its config is read.

* memory: freed blocks stay in the process (:func:`treelm.heap.keep`), and large ones come back
  from a caching allocator in front of PyTorch's (:mod:`treelm.kernels.cpu_cache`) instead of
  from malloc's search of its heap; both left alone where the user chose malloc's behaviour
  (:func:`treelm.heap.user_chose`, e.g. ``TREELM_HEAP=release``);
* ``train.threads`` (PyTorch's intra-op threads) and ``train.flush_denormal``;
* ``train.deterministic``: PyTorch's deterministic algorithms, before anything touches CUDA
  (cuBLAS reads its environment once; :func:`treelm.train.reproducible.use_deterministic`).
"""

from __future__ import annotations

import torch

from treelm import heap
from treelm.kernels import cpu_cache
from treelm.train.config import TrainConfig
from treelm.train.reproducible import use_deterministic


def configure(tc: TrainConfig) -> None:
    """Set this process up for a training with ``tc`` (module docstring)."""
    heap.keep()     # freed memory stays for the next step: no fresh pages each step
    if not heap.user_chose():
        cpu_cache.install()     # and large blocks come back without malloc's search
    if tc.threads:
        torch.set_num_threads(tc.threads)
    torch.set_flush_denormal(tc.flush_denormal)
    if tc.deterministic:
        use_deterministic()
