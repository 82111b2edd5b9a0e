"""The GPU of every rank of a multi-GPU SLURM job, on a CPU with a fake of CUDA.

The fake reads CUDA_VISIBLE_DEVICES once, at first use, as the driver does, and refuses an ordinal
beyond what it saw ("invalid device ordinal"). Each rank of a 1 x 8 and a 2 x 4 job is started from
the SLURM variables that rank gets, under each view SLURM can leave (every GPU of the node listed,
CUDA_VISIBLE_DEVICES unset, one GPU per task): every rank must land on its own physical GPU, and
join the process group with its SLURM rank and world size at the first host of the job."""

from __future__ import annotations

import pytest
import torch

from semcl.runtime import distributed

DIST_VARS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


class FakeCuda:
    """torch.cuda as one process of a node with `node_gpus` GPUs sees it."""

    def __init__(self, node_gpus: int, env: dict):
        self.node_gpus, self.env, self.visible, self.current = node_gpus, env, None, None

    def _visible(self) -> list[int]:
        if self.visible is None:  # fixed at first use, like the driver
            value = self.env.get("CUDA_VISIBLE_DEVICES")
            self.visible = list(range(self.node_gpus)) if value is None else [int(v) for v in value.split(",") if v]
        return self.visible

    def device_count(self) -> int:
        return len(self._visible())

    def is_available(self) -> bool:
        return self.device_count() > 0

    def set_device(self, device) -> None:
        index = torch.device(device).index
        if index >= self.device_count():
            raise RuntimeError(f"CUDA error: invalid device ordinal {index} (visible: {self.device_count()})")
        self.current = index

    def physical(self) -> int:
        return self._visible()[self.current]


def _start_rank(monkeypatch, nodes: int, per_node: int, procid: int, view: str):
    node, local = divmod(procid, per_node)
    env = {"SLURM_JOB_ID": "4242", "SLURM_NTASKS": str(nodes * per_node), "SLURM_JOB_NUM_NODES": str(nodes),
           "SLURM_NODEID": str(node), "SLURM_PROCID": str(procid), "SLURM_LOCALID": str(local),
           "SLURM_JOB_NODELIST": "gpu[001-002]" if nodes == 2 else "gpu001", "SUBMITIT_EXECUTOR": "slurm"}
    for key in DIST_VARS:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if view == "all":
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(str(i) for i in range(per_node)))
    elif view == "one":  # --gpu-bind=single / --gpus-per-task: the task's own GPU, renumbered 0
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", str(local))
    elif view == "unset":
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    import os

    fake = FakeCuda(per_node, os.environ)
    for name in ("device_count", "is_available", "set_device"):
        monkeypatch.setattr(torch.cuda, name, getattr(fake, name))
    joined = {}
    monkeypatch.setattr(distributed.dist, "init_process_group", lambda backend, **kw: joined.update(backend=backend, **kw))
    device = distributed.init_from_slurm()
    return device, fake, joined, dict(os.environ)


@pytest.mark.parametrize("view", ["all", "unset", "one"])
@pytest.mark.parametrize(("nodes", "per_node"), [(1, 8), (2, 4)])
def test_every_rank_gets_its_own_gpu(monkeypatch, nodes, per_node, view):
    seen = set()
    for procid in range(nodes * per_node):
        with monkeypatch.context() as m:
            device, fake, joined, env = _start_rank(m, nodes, per_node, procid, view)
            node, local = divmod(procid, per_node)
            assert device.type == "cuda" and device.index < fake.device_count()
            assert fake.current == device.index and joined["device_id"] == device
            assert fake.physical() == local  # the GPU of this task, not rank 0's
            seen.add((node, fake.physical()))
            assert (joined["backend"], joined["rank"], joined["world_size"]) == ("nccl", procid, nodes * per_node)
            assert joined["timeout"].total_seconds() == distributed.DEFAULT_TIMEOUT_S
            assert env["MASTER_ADDR"] == "gpu001" and env["LOCAL_RANK"] == str(local)
    assert len(seen) == nodes * per_node  # no GPU is shared


def test_no_gpu_visible_is_a_cpu_rank_over_gloo(monkeypatch):
    monkeypatch.setenv(distributed.TIMEOUT_ENV, "45")
    with monkeypatch.context() as m:
        m.setenv("CUDA_VISIBLE_DEVICES", "")
        device, fake, joined, _ = _start_rank(m, 2, 4, 5, "keep")
        assert fake.device_count() == 0
    assert device == torch.device("cpu") and joined["backend"] == "gloo" and joined["rank"] == 5
    assert joined["timeout"].total_seconds() == 45


def test_too_few_gpus_for_the_tasks_of_a_node_is_one_line(monkeypatch):
    with monkeypatch.context() as m:
        m.setenv("CUDA_VISIBLE_DEVICES", "0,1")
        with pytest.raises(distributed.DeviceError, match=r"local rank 3 of 4 tasks on this node sees 2 GPU\(s\) "
                                                          r"\(CUDA_VISIBLE_DEVICES=0,1\)"):
            _start_rank(m, 1, 4, 3, "keep")


def test_single_task_job_joins_nothing(monkeypatch):
    monkeypatch.setenv("SLURM_NTASKS", "1")
    assert distributed.init_from_slurm() is None and not distributed.is_distributed()
