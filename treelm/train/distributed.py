"""Multi-process training through ``torchrun`` and ``torch.distributed`` (DDP).

``torchrun --nproc_per_node=N -m treelm.cli train ...`` (or the ``treelm`` script) sets
``WORLD_SIZE``/``RANK``/``LOCAL_RANK``; :func:`setup` then joins the process group (gloo on CPU,
NCCL on GPU). Each rank trains on its own share of the task's data (the task shards it, e.g. a
contiguous 1/N of the LM stream) so every rank takes the same number of steps; DDP averages
gradients.
Rank 0 alone writes the run directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


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


def setup(device: torch.device) -> Dist:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
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
