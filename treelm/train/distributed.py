"""Multi-process training through ``torchrun`` and ``torch.distributed`` (DDP).

``torchrun --nproc_per_node=N -m treelm.cli train ...`` (or the ``treelm`` script) sets
``WORLD_SIZE``/``RANK``/``LOCAL_RANK``; :func:`setup` then joins the process group (gloo on CPU,
NCCL on GPU). Each rank trains on its own share of the task's data (the task shards it, e.g. a
contiguous 1/N of the LM stream) so every rank takes the same number of steps; DDP averages
gradients.
Rank 0 alone writes the run directory.

On CUDA each process trains on its own GPU, ``cuda:LOCAL_RANK``: more processes on a machine than
it has GPUs is an error (one line, before joining the group) that suggests ``train.device=cpu``
(gloo, any number of processes) or fewer processes. Under ``train.device=auto`` the same holds:
``auto`` picks CUDA wherever there is a GPU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from treelm.errors import TreelmError


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def launched_rank() -> int:
    """This process's rank as ``torchrun`` set it (0 outside torchrun): who prints results."""
    return int(os.environ.get("RANK", "0"))


def setup(device: torch.device) -> Dist:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
    if device.type == "cuda":
        local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        gpus = torch.cuda.device_count()
        if local > gpus:
            raise TreelmError(
                f"{local} processes on this machine but {gpus} CUDA device"
                f"{'' if gpus == 1 else 's'}: one process per GPU (torchrun --nproc_per_node="
                f"{gpus}), or train.device=cpu to train on the CPU (gloo)")
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return Dist(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def any_rank(flag: bool, d: Dist) -> bool:
    """True on every rank if ``flag`` is true on any (so that all ranks stop together)."""
    if not d.enabled:
        return flag
    t = torch.tensor([1.0 if flag else 0.0])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def barrier(d: Dist) -> None:
    if d.enabled:
        dist.barrier()


def gather_objects(obj: object, d: Dist) -> list[object]:
    if not d.enabled:
        return [obj]
    out: list[object] = [None] * d.world
    dist.all_gather_object(out, obj)
    return out


def teardown(d: Dist) -> None:
    """Leave the process group together: a rank destroying it while another still talks to it
    can abort the process (gloo)."""
    if d.enabled and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
