"""Data-parallel training across the GPUs of one node (one process per GPU, as submitit starts them).

Every rank draws the same global batch and the same augmentations from the epoch's generator and
trains on its own slice; gradients are averaged with one all-reduce over a flat buffer after
backward (what DistributedDataParallel does, without wrapping the method, whose `training_step`
is not a `forward`). Keys for memory banks are gathered from all ranks before enqueueing
(`semcl.models.gather_from_all_ranks`), so every rank's bank holds the whole global batch.
Rank 0 alone writes checkpoints and metrics; BN statistics stay per rank (no SyncBN), as in the
official single-node code, and momentum key encoders (PaCo, SupCon) use MoCo's shuffle-BN
(`semcl.models.shuffled_forward`).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def init_from_slurm() -> torch.device | None:
    """In a SLURM job with several tasks, join the process group; returns this rank's device."""
    if int(os.environ.get("SLURM_NTASKS", "1")) <= 1 or is_distributed():
        return None
    import submitit

    env = submitit.helpers.TorchDistributedEnvironment().export()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend=backend, init_method="env://", rank=env.rank, world_size=env.world_size)
    if torch.cuda.is_available():
        torch.cuda.set_device(env.local_rank)
        return torch.device("cuda", env.local_rank)
    return torch.device("cpu")


def local_slice(n: int) -> slice:
    """This rank's part of a global batch of n (n must divide evenly)."""
    w = world_size()
    if n % w:
        raise ValueError(f"global batch {n} does not split over {w} ranks")
    per = n // w
    return slice(rank() * per, (rank() + 1) * per)


@torch.no_grad()
def average_gradients_(params: list[torch.nn.Parameter]) -> None:
    """All-reduce the mean gradient over ranks, through one flat buffer (one collective per step)."""
    if not is_distributed():
        return
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= world_size()
    torch._foreach_copy_(grads, [f.view_as(g) for f, g in zip(flat.split([g.numel() for g in grads]), grads,
                                                               strict=True)])


def barrier() -> None:
    if is_distributed():
        dist.barrier()
