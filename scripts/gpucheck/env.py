"""Section (a): what this machine is (torch, CUDA, cuDNN, NCCL, the GPU, its memory, bf16) and a 1-rank process
group on the backend and device a job uses (NCCL with device_id on a GPU, gloo on the CPU): barrier,
all_gather_object, one DDP step whose gradient must equal the plain module's."""

from __future__ import annotations

import platform
from pathlib import Path

import torch
import torch.distributed as dist


def versions(device: torch.device) -> dict:
    cuda = device.type == "cuda"
    out = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
           "nccl": None, "device": str(device), "gpu": None, "gpu_memory_gb": None, "bf16_native": None,
           "cpus": len(__import__("os").sched_getaffinity(0))}
    if cuda:
        from semcl.runtime.precision import bf16_supported

        props = torch.cuda.get_device_properties(device)
        nccl = torch.cuda.nccl.version()
        out.update(nccl=".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl), gpu=props.name,
                   gpu_memory_gb=round(props.total_memory / 2**30, 1), bf16_native=bf16_supported(device),
                   capability=".".join(map(str, torch.cuda.get_device_capability(device))))
    return out


def one_rank_group(device: torch.device, work: Path) -> dict:
    cuda = device.type == "cuda"
    backend = "nccl" if cuda else "gloo"
    work.mkdir(parents=True, exist_ok=True)
    kwargs = {"device_id": device} if cuda else {}
    dist.init_process_group(backend, init_method=f"file://{work / 'init'}", rank=0, world_size=1, **kwargs)
    try:
        dist.barrier()
        got: list = [None]
        dist.all_gather_object(got, {"rank": 0})
        torch.manual_seed(0)
        plain = torch.nn.Linear(8, 3).to(device)
        ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 3).to(device),
                                                        device_ids=[device] if cuda else None)
        ddp.module.load_state_dict(plain.state_dict())
        x = torch.randn(16, 8, device=device, generator=None)
        ddp(x).square().mean().backward()
        plain(x).square().mean().backward()
        same = all(torch.equal(a.grad, b.grad) for a, b in zip(ddp.module.parameters(), plain.parameters(), strict=True))
        t = torch.ones(4, device=device)
        dist.all_reduce(t)
        ok = got == [{"rank": 0}] and same and bool(torch.equal(t, torch.ones(4, device=device)))
        return {"backend": backend, "all_gather_object": got == [{"rank": 0}], "ddp_grad_equal": same,
                "all_reduce": bool(torch.equal(t, torch.ones(4, device=device))), "ok": ok}
    finally:
        dist.destroy_process_group()


def section(device: torch.device, work: Path) -> dict:
    out = versions(device)
    out["group"] = one_rank_group(device, work)
    out["ok"] = out["group"]["ok"] and (device.type != "cuda" or out["gpu"] is not None)
    return out
