"""The doctor's short per-rank measurements: rendezvous and device, CPUs and loader workers, all-reduce
bandwidth, and the results folder's free space and write speed. Each returns a JSON-ready dict."""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

import torch
import torch.distributed as dist

from semcl.runtime import distributed


def rendezvous(device: torch.device, join_s: float) -> dict:
    """Who this rank is, where it runs and on what; `all` (rank 0's copy) lists every rank's, so the page
    can tell two ranks sharing one GPU apart from a correct layout."""
    me = {"rank": distributed.rank(), "slurm_procid": int(os.environ.get("SLURM_PROCID", "0")),
          "world_size": distributed.world_size(), "device": str(device),
          "host": os.environ.get("SLURMD_NODENAME") or socket.gethostname(),  # one machine may hold two slurmd
          "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
          "join_s": round(join_s, 3)}
    everyone: list = [None] * distributed.world_size()
    if distributed.is_distributed():
        dist.all_gather_object(everyone, me)
    else:
        everyone = [me]
    return {**me, "all": everyone}


def cpus(device: torch.device) -> dict:
    """The CPUs the scheduler gave this task and the loader workers a GPU run would start with them."""
    from semcl.data.views.file_views import loader_workers

    per_task = os.environ.get("SLURM_CPUS_PER_TASK", "")
    return {"affinity": len(os.sched_getaffinity(0)), "cpus_per_task": int(per_task) if per_task.isdigit() else None,
            "threads": torch.get_num_threads(),
            # what the engine starts on a GPU with these CPUs (on the CPU it decodes in the training process)
            "loader_workers_gpu": loader_workers(torch.device("cuda")), "loader_workers_here": loader_workers(device)}


def all_reduce_bandwidth(device: torch.device, sizes_mb: tuple[float, ...], repeats: int = 3) -> dict:
    """A timed all_reduce of each size (float32), after one warm-up: the bus bandwidth NCCL's tests report,
    2 (n - 1) / n x bytes / seconds, and whether the sum came out right (every rank adds rank + 1)."""
    n = distributed.world_size()
    rows, correct = [], True
    for mb in sizes_mb:
        count = int(mb * 2**20) // 4
        t = torch.full((count,), float(distributed.rank() + 1), device=device)
        dist.all_reduce(t)  # warm-up: the first call of a size sets up buffers
        t.fill_(float(distributed.rank() + 1))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        distributed.barrier()
        start = time.perf_counter()
        for _ in range(repeats):
            dist.all_reduce(t)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds = (time.perf_counter() - start) / repeats
        # after `repeats` sums of the ranks' values: n(n+1)/2 x n^(repeats-1)
        want = n * (n + 1) / 2 * n ** (repeats - 1)
        correct = correct and bool(torch.all(t == want).item())
        rows.append({"mb": mb, "seconds": round(seconds, 6),
                     "bus_gb_s": round(2 * (n - 1) / n * count * 4 / seconds / 1e9, 4) if n > 1 else None})
    return {"sizes": rows, "correct": correct}


def results_disk(folder: Path, write_mb: int) -> dict:
    """Free space of the results folder's disk, and the speed of writing `write_mb` MB there (fsync'd)."""
    free = shutil.disk_usage(folder).free
    path = folder / f".doctor-write-{os.getpid()}"
    block = os.urandom(2**20)
    start = time.perf_counter()
    try:
        with open(path, "wb") as f:
            for _ in range(write_mb):
                f.write(block)
            f.flush()
            os.fsync(f.fileno())
        seconds = time.perf_counter() - start
    finally:
        path.unlink(missing_ok=True)
    return {"free_gb": round(free / 2**30, 2), "write_mb": write_mb, "write_mb_s": round(write_mb / seconds, 1)}
