"""Data-parallel training: one process per GPU (or per CPU task), on one node or several.

A SLURM job of `nodes × tasks_per_node` tasks joins one process group (rendezvous from the SLURM
variables: the first host of the job is the master, the port follows from the job id). Every rank
draws the same global batch and the same augmentations from the epoch's generator and trains on its
own slice; what the official code draws once per process and step (a CutMix box, a mixup lambda) comes
from the rank's own generator (`rank_generator`). Gradients go through torch's DistributedDataParallel
(bucketed all-reduce overlapped with backward, `no_sync` inside accumulation cycles, unused parameters found per step): the method's
training step is wrapped as a module's forward (`TrainingStep`). Keys for memory banks are gathered
from all ranks before enqueueing (`semcl.models.gather_from_all_ranks`). BN statistics stay per rank
(no SyncBN, no buffer broadcast), as in the official code, and momentum key encoders (PaCo, SupCon,
HSA) use MoCo's shuffle-BN (`semcl.models.shuffled_forward`). Rank 0 alone writes checkpoints and
metrics; the RNG states of every rank go into the checkpoint (`gather_rng_states`).

A rank's GPU follows one rule, whatever CUDA_VISIBLE_DEVICES SLURM left (`rank_device`).
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import logging
import os
import warnings
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn

log = logging.getLogger("semcl.distributed")

# how long a collective may wait for a peer before the job gives up (cluster profile collective_timeout_s)
TIMEOUT_ENV = "SEMCL_COLLECTIVE_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 1800


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


class DeviceError(RuntimeError):
    """The GPUs this process sees cannot serve its local rank."""


def rank_device(local_rank: int, local_world_size: int) -> torch.device:
    """The GPU of local rank `local_rank` among `local_world_size` tasks of its node.

    SLURM and submitit leave one of three views: every GPU of the node visible to every task
    (CUDA_VISIBLE_DEVICES lists them all, or is unset), one GPU per task (--gpu-bind, --gpus-per-task,
    or submitit's own narrowing to the local rank), or none. The rule: one visible GPU is cuda:0; at
    least as many as the node's tasks is cuda:<local rank>; anything else is an error, never a guess."""
    visible = torch.cuda.device_count()
    if visible == 1:
        return torch.device("cuda", 0)
    if visible >= local_world_size and local_rank < visible:
        return torch.device("cuda", local_rank)
    shown = os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")
    raise DeviceError(f"local rank {local_rank} of {local_world_size} tasks on this node sees {visible} GPU(s) "
                      f"(CUDA_VISIBLE_DEVICES={shown}); ask SLURM for one GPU per task")


def collective_timeout() -> datetime.timedelta:
    return datetime.timedelta(seconds=float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)))


# what SLURM sets in a job that was given GPUs (--gres/--gpus*); any one non-empty and not "0" means GPUs
GPU_VARIABLES = ("SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS", "SLURM_GPUS_PER_TASK",
                 "SLURM_GPUS_PER_NODE")
# a rendezvous inherited from the submitting shell (srun passes its environment on) must not replace the job's own
RENDEZVOUS_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


def slurm_count(name: str, default: int = 1) -> int:
    """A positive whole number SLURM sets (SLURM_NTASKS, SLURM_CPUS_PER_TASK); DeviceError naming the variable
    when it is something else (a wrapper script that exported it by hand), instead of a traceback in the job."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise DeviceError(f"${name} = {text!r}: expected a positive whole number (as SLURM sets it)")
    return int(text)


def require_given_gpus() -> None:
    """A job SLURM gave GPUs to refuses to train when CUDA shows none (CUDA_VISIBLE_DEVICES empty, "-1" or an
    unknown UUID; a driver that did not load): training on the CPU would take days and record a CPU run."""
    given = {k: os.environ[k] for k in GPU_VARIABLES if os.environ.get(k, "").strip() not in ("", "0")}
    if given and torch.cuda.device_count() == 0:
        seen = ", ".join(f"{k}={v}" for k, v in given.items())
        raise DeviceError(f"this job was given GPUs ({seen}) but CUDA sees none (CUDA_VISIBLE_DEVICES="
                          f"{os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')!r}); refusing to train on the CPU")


def shutdown() -> None:
    """Leave the process group at the end of a job (NCCL warns at exit otherwise)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def init_from_slurm() -> torch.device | None:
    """In a SLURM job with several tasks, join the process group; returns this rank's device
    (None for a single-task job: the caller picks the device)."""
    if slurm_count("SLURM_NTASKS") <= 1 or is_distributed():
        return None
    import submitit

    for key in RENDEZVOUS_VARIABLES:  # the port then follows from the job id: packed jobs never share one
        os.environ.pop(key, None)
    # never narrow CUDA_VISIBLE_DEVICES here: rank_device reads what the scheduler left
    env = submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)
    if torch.cuda.is_available():
        device = rank_device(env.local_rank, env.local_world_size)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", init_method="env://", rank=env.rank, world_size=env.world_size,
                                timeout=collective_timeout(), device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", init_method="env://", rank=env.rank, world_size=env.world_size,
                                timeout=collective_timeout())
    log.info("rank %d of %d (local %d of %d) on %s, master %s:%s", env.rank, env.world_size, env.local_rank,
             env.local_world_size, device, env.master_addr, env.master_port)
    return device


def local_slice(n: int) -> slice:
    """This rank's part of a global batch of n (n must divide evenly)."""
    w = world_size()
    if n % w:
        raise ValueError(f"global batch {n} does not split over {w} ranks")
    per = n // w
    return slice(rank() * per, (rank() + 1) * per)


def rank_step_seed(seed: int, epoch: int, step: int, rank: int) -> int:
    """A 63-bit seed of (run seed, epoch, step, rank): the first 8 bytes of sha256("seed/epoch/step/rank")."""
    digest = hashlib.sha256(f"{seed}/{epoch}/{step}/{rank}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def rank_generator(seed: int, epoch: int, step: int) -> torch.Generator | None:
    """This rank's own generator for one step, None with one process (`Batch.mixing_generator`).

    The official runs draw a CutMix box (CSML) or a mixup lambda (MAE) in each DDP process from that
    process's own RNG, so every rank mixes with its own; here the draw comes from a fresh generator of (seed,
    epoch, step, rank): reproducible, the same after a resume, and independent of the loader workers. One
    process keeps drawing from the epoch's generator, so single-process runs compute exactly as before."""
    if not is_distributed():
        return None
    return torch.Generator().manual_seed(rank_step_seed(seed, epoch, step, rank()))


class TrainingStep(nn.Module):
    """A method's device step (`loss` of what `prepare` gave, semcl.methods.base) as a module's forward, so
    DistributedDataParallel can wrap it."""

    def __init__(self, method: nn.Module):
        super().__init__()
        self.method = method

    def forward(self, inputs) -> torch.Tensor:
        return self.method.loss(inputs)["loss"]


def wrap(method: nn.Module) -> nn.Module | None:
    """DistributedDataParallel over the method's training step when there are several ranks, else None.

    broadcast_buffers=False keeps per-rank BN statistics. The official trainers leave DDP's default True
    (PCL @ fe56535 GPaCo/LT/paco_imagenet.py:228, CSML @ be34e84 main_moco.py:321; only PCL's mmseg trainer,
    GPaCo/Seg/mmseg/apis/train.py:66, passes False): True copies rank 0's buffers to the other ranks before each
    forward, so rank 0's own running statistics, the ones its checkpoint saves, are the same either way, and every
    rank normalises its training batch with that batch's statistics in both. find_unused_parameters
    lets a method leave a head or a stage out of a step (DDP then checks that the ranks agree instead of
    hanging on buffers of different lengths); it also keeps the gradient buckets in their first layout (DDP
    rebuilds them after the first step only without it), so a run resumed inside an epoch all-reduces in the
    same layout as the uninterrupted one, bit for bit at any number of ranks. DDP broadcasts rank 0's
    parameters once here (buffers are not broadcast with broadcast_buffers=False); both are equal already
    (same seed, same checkpoint)."""
    if not is_distributed():
        return None
    device = next((p.device for p in method.parameters()), torch.device("cpu"))
    with warnings.catch_warnings():
        # torch 2.14 deprecates broadcast_buffers and itself advises keeping broadcast_buffers=False for
        # rank-local buffers until init_sync_buffers exists
        warnings.filterwarnings("ignore", message=".*broadcast_buffers.*", category=FutureWarning)
        return nn.parallel.DistributedDataParallel(
            TrainingStep(method), device_ids=[device] if device.type == "cuda" else None, broadcast_buffers=False,
            find_unused_parameters=True, gradient_as_bucket_view=True)


def sync_context(ddp: nn.Module | None, sync: bool):
    """Inside an accumulation cycle (sync False) gradients stay local: DDP's no_sync."""
    if ddp is None or sync:
        return contextlib.nullcontext()
    return ddp.no_sync()


def any_rank(flag: bool, device: torch.device) -> bool:
    """True on every rank when `flag` is true on any (one small all-reduce; a no-op alone)."""
    if not is_distributed():
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def min_over_ranks(value: int, device: torch.device) -> int:
    """The smallest of every rank's `value` on every rank (one small all-reduce; `value` alone)."""
    if not is_distributed():
        return value
    t = torch.tensor([value], dtype=torch.long, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return int(t.item())


def gather_rows(t: torch.Tensor) -> torch.Tensor:
    """Every rank's `t` (the same shape on all) stacked along dim 0 in rank order, into one buffer (no
    per-rank copies to concatenate: HSA's gathered feature bank is gigabytes); `t` itself alone."""
    if not is_distributed():
        return t
    out = torch.empty((world_size() * t.shape[0], *t.shape[1:]), dtype=t.dtype, device=t.device)
    dist.all_gather_single(out, t.contiguous())
    return out


# Batches between two stop votes of several ranks (StopVote). A signal is acted on within 2 * VOTE_EVERY batches
# (rounded up to whole accumulation cycles): a few seconds for the slowest rows' steps, well inside the 120 s
# between SLURM's requeue signal and the time limit (cluster profile signal_delay_s). Fewer batches would leave
# the host less room to run ahead of the device before it waits on a vote's event.
VOTE_EVERY = 4


class StopVote:
    """Whether every rank checkpoints at this cycle boundary (a requeue signal, or rank 0's timer, on any rank),
    agreed without a host read per step.

    One process: its own flag, at every boundary (nothing to agree with). Several: a vote every `every` batches of
    the epoch (the same boundaries on every rank): each rank's flag is all-reduced (max) on the device and copied
    to host memory behind an event, without waiting; the next vote reads that copy (by then the device finished it
    long ago) and, when any rank's flag was set, every rank checkpoints there, and nothing new is cast until the
    vote after. `reset` at an epoch's end drops a vote in flight: the epoch-end checkpoint covers it, and each
    rank acts on its own pending signal there."""

    def __init__(self, device: torch.device, accum: int = 1, every: int = VOTE_EVERY) -> None:
        self.device = device
        self.every = accum * -(-every // accum)  # whole accumulation cycles
        self._flag: torch.Tensor | None = None  # the vote in flight: its host copy ...
        self._event = None  # ... and, on a GPU, the event after which that copy is complete

    def agree(self, batches_done: int, flag: Callable[[], bool]) -> bool:
        """At the cycle boundary after `batches_done` batches of the epoch: True on every rank, at the same
        boundary, when this is where to checkpoint. `flag()` is this rank's wish, asked only when a vote is cast."""
        if not is_distributed():
            return flag()
        if batches_done % self.every:
            return False
        if self._flag is not None:
            if self._event is not None:
                self._event.synchronize()
            agreed = bool(self._flag.item())  # a host tensor: no device read
            self._flag = self._event = None
            if agreed:
                return True
        self._cast(flag())
        return False

    def _cast(self, flag: bool) -> None:
        t = torch.full((1,), 1.0 if flag else 0.0, device=self.device)  # a fill: no copy from the host
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if t.device.type == "cuda":
            self._flag = torch.empty(1, pin_memory=True)
            self._flag.copy_(t, non_blocking=True)
            self._event = torch.cuda.Event()
            self._event.record()
        else:
            self._flag = t

    def reset(self) -> None:
        self._flag = self._event = None


def gather_rng_states(state: dict) -> list[dict] | None:
    """Every rank's RNG states (a collective: all ranks call it together); None alone."""
    if not is_distributed():
        return None
    out: list = [None] * world_size()
    dist.all_gather_object(out, state)
    return out


def barrier() -> None:
    if is_distributed():
        dist.barrier()


FAULT_TYPES: tuple[type[BaseException], ...] = tuple(
    t for t in (getattr(dist, "DistError", None), getattr(dist, "DistBackendError", None),
                getattr(dist, "DistNetworkError", None), getattr(dist, "DistStoreError", None)) if t is not None)


def is_peer_fault(err: BaseException) -> bool:
    """A collective that failed because a peer died or stopped answering (not a bug of this rank)."""
    if isinstance(err, FAULT_TYPES):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and any(s in text for s in (
        "connection closed by peer", "connection reset by peer", "timed out", "broken pipe",
        "nccl communicator was aborted", "watchdog caught collective operation timeout"))
