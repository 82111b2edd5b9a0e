"""Momentum (key) encoder and the queue of past keys used by MoCo-style losses."""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
from torch import nn


def momentum_copy(module: nn.Module) -> nn.Module:
    """Deep-copy ``module`` as a key encoder whose parameters take no gradient.

    The copy starts identical to the online encoder (MoCo's initialisation) and is
    then only changed by :func:`momentum_update_`, never by the optimiser.
    """
    target = copy.deepcopy(module)
    for p in target.parameters():
        p.requires_grad_(False)
    return target


@torch.no_grad()
def momentum_update_(target: nn.Module, online: nn.Module, m: float) -> None:
    """EMA step: ``target_p <- m * target_p + (1 - m) * online_p`` for every parameter.

    Done as one fused multi-tensor ``torch._foreach_lerp_`` over the whole parameter
    lists (lerp with weight ``1 - m`` is algebraically this EMA) instead of a Python loop
    of ~160 small kernel launches for a ResNet-50; lerp reads each tensor once,
    where a separate mul + add would make two passes over the target weights.

    Only *parameters* are averaged. Buffers (BN running mean/var, counters) are left
    alone: as in the official RINCE CIFAR code, the key encoder's BN statistics come
    from its own train-mode forward passes on the key views.

    The parameter lists are rebuilt on every call (~0.2 ms per ResNet-50 encoder on
    CPU): never stale after ``load_state_dict(assign=True)``, ``.to()`` or a replaced
    submodule, and no process-wide hooks are needed.

    Args:
        target: key encoder, typically made by :func:`momentum_copy`.
        online: the encoder trained by the optimiser; same architecture as target.
        m: momentum in [0, 1]; 1 keeps ``target`` unchanged, 0 copies ``online``.
    """
    if not 0.0 <= m <= 1.0:
        raise ValueError(f"momentum m must lie in [0, 1], got {m}")
    t_params, o_params = list(target.parameters()), list(online.parameters())
    if len(t_params) != len(o_params):
        raise ValueError(f"target has {len(t_params)} parameters but online has {len(o_params)}")
    if t_params:
        torch._foreach_lerp_(t_params, o_params, 1.0 - m)


class MemoryBank(nn.Module):
    """Fixed-size FIFO of past keys and their labels (the MoCo queue).

    Buffers (so ``state_dict()`` / ``load_state_dict()`` restore the bank exactly,
    and ``.to(device)`` moves it):

    * ``features`` [size, dim] float32 -- initialised to random Gaussian rows
      normalised to unit length, like the official RINCE queue;
    * ``labels`` [size] int64 -- ``-1`` marks a slot that has never been written;
    * ``ptr`` int64 scalar -- the slot the next key goes to.

    Ordering: the official RINCE CIFAR code prepends the newest keys (shifting the
    queue), while its ImageNet code writes at a ring pointer. The losses only use
    the *set* of queued keys (and their labels), never their order, so this single
    ring buffer reproduces both.
    """

    features: torch.Tensor
    labels: torch.Tensor
    ptr: torch.Tensor

    def __init__(self, size: int, dim: int, *, generator: torch.Generator | None = None) -> None:
        super().__init__()
        if size <= 0 or dim <= 0:
            raise ValueError(f"size and dim must be positive, got size={size}, dim={dim}")
        init = torch.randn(size, dim, generator=generator)
        self.register_buffer("features", nn.functional.normalize(init, dim=1))
        self.register_buffer("labels", torch.full((size,), -1, dtype=torch.long))
        self.register_buffer("ptr", torch.zeros((), dtype=torch.long))

    @property
    def size(self) -> int:
        return self.features.shape[0]

    @property
    def dim(self) -> int:
        return self.features.shape[1]

    @property
    def filled(self) -> int:
        """Number of slots written so far, i.e. with label != -1 (syncs with the device).

        Assumes real labels are non-negative; unlabeled callers should enqueue a
        dummy label such as 0, not -1, or this undercounts.
        """
        return int((self.labels != -1).sum())

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor, labels: torch.Tensor) -> None:
        """Write ``keys`` [B, dim] and ``labels`` [B] at ``ptr``, wrapping around.

        The write is an in-place ``index_copy_`` with indices ``(ptr + arange(B)) %
        size``: no reallocation, wrap-around in a single op, and no ``ptr.item()``
        so a GPU run does not stall on a host sync every step. ``B <= size`` keeps
        the indices distinct, which makes the scatter deterministic.
        """
        if keys.dim() != 2 or keys.shape[1] != self.dim:
            raise ValueError(f"keys must have shape [B, {self.dim}], got {list(keys.shape)}")
        batch = keys.shape[0]
        if labels.shape != (batch,):
            raise ValueError(f"labels must have shape [{batch}], got {list(labels.shape)}")
        if batch > self.size:
            raise ValueError(f"cannot enqueue {batch} keys into a bank of size {self.size}")
        if batch == 0:
            return
        idx = (self.ptr + torch.arange(batch, device=self.ptr.device)) % self.size
        self.features.index_copy_(0, idx, keys.detach().to(self.features.dtype))
        self.labels.index_copy_(0, idx, labels.detach().to(self.labels.dtype))
        self.ptr.copy_((self.ptr + batch) % self.size)


def gather_from_all_ranks(t: torch.Tensor) -> torch.Tensor:
    """Concatenate ``t`` from every DDP rank along dim 0, in rank order.

    Used so the keys of *all* GPUs enter the queue, as in the official multi-GPU
    code. Identity when torch.distributed is not initialised or has one rank.
    Every rank must pass the same shape (use ``drop_last`` in the loader). No
    gradient flows back through the gather; keys never need one.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return t
    world = dist.get_world_size()
    if world == 1:
        return t
    t = t.contiguous()
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t)
    return torch.cat(parts, dim=0)


@torch.no_grad()
def shuffled_forward(fn, x: torch.Tensor) -> torch.Tensor:
    """``fn(x)`` with MoCo's shuffle-BN across DDP ranks: the global key batch is permuted (one
    permutation drawn on rank 0 and broadcast), each rank runs ``fn`` on its share of the shuffled
    batch, and the outputs are gathered and put back in order, so no key's BatchNorm statistics come
    from its own query's GPU slice. Returns this rank's rows, like ``fn(x)``. Identity wrapper (just
    ``fn(x)``) without torch.distributed or with one rank: one process has no batch to shuffle across.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return fn(x)
    rank = dist.get_rank()
    x_all = gather_from_all_ranks(x)
    perm = torch.randperm(x_all.shape[0], device=x_all.device) if rank == 0 else \
        torch.empty(x_all.shape[0], dtype=torch.long, device=x_all.device)
    dist.broadcast(perm, src=0)
    n = x.shape[0]
    out_shuffled = gather_from_all_ranks(fn(x_all[perm[rank * n:(rank + 1) * n]]))
    out = torch.empty_like(out_shuffled)
    out[perm] = out_shuffled  # row i of the shuffled batch is image perm[i]
    return out[rank * n:(rank + 1) * n]


class MomentumQueue:
    """MoCo's key side, shared by every queue-based method: momentum copies of online modules, queues
    of keys with their labels, and the official update order.

    `copy(online)` makes a key encoder (MoCo's initialisation: identical, no gradients), `bank(...)` a
    queue; `update()` takes one EMA step of every copy towards its online module; `stage(labels, **keys)`
    holds this step's keys (queues are read by the step's graph, so they are written only after
    backward), and `flush()` enqueues them, gathered over DDP ranks so every rank's queue receives the
    keys of the whole global batch.

    It holds references only: the method registers the copies and queues under names of its choosing,
    so they are in its `state_dict` and move with `.to()`.
    """

    def __init__(self, momentum: float | None) -> None:
        self.momentum = momentum  # None: queues without key encoders (GPaCo's one-encoder setup)
        self._pairs: list[tuple[nn.Module, nn.Module]] = []
        self._banks: dict[str, MemoryBank] = {}
        self._pending: tuple[torch.Tensor, dict[str, torch.Tensor]] | None = None

    def copy(self, online: nn.Module) -> nn.Module:
        if self.momentum is None:
            raise ValueError("MomentumQueue(momentum=None) keeps no key encoders")
        target = momentum_copy(online)
        self._pairs.append((target, online))
        return target

    def bank(self, size: int, dim: int, name: str = "keys") -> MemoryBank:
        if name in self._banks:
            raise ValueError(f"queue {name!r} exists already")
        self._banks[name] = MemoryBank(size, dim)
        return self._banks[name]

    @torch.no_grad()
    def update(self) -> None:
        for target, online in self._pairs:
            momentum_update_(target, online, self.momentum)

    def stage(self, labels: torch.Tensor, **keys: torch.Tensor) -> None:
        """Hold this step's keys for each named queue (default name: keys) until `flush`."""
        unknown = sorted(set(keys) - set(self._banks))
        if unknown:
            raise ValueError(f"no queue named {unknown[0]!r} (queues: {', '.join(self._banks)})")
        self._pending = (labels.detach(), {k: v.detach() for k, v in keys.items()})

    def flush(self) -> None:
        if self._pending is None:
            return
        labels, keys = self._pending
        labels = gather_from_all_ranks(labels)
        for name, k in keys.items():
            self._banks[name].enqueue(gather_from_all_ranks(k), labels)
        self._pending = None
