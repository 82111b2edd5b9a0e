"""The training step's peak memory at the row's real per-GPU batch, measured under fake tensors.

A copy of the checked method (its weights, buffers, queues) is made of fake tensors
(torch._subclasses.fake_tensor: shapes and dtypes, no storage, no arithmetic) and runs one step at the batch
per GPU of the entry: forward under the row's autocast, backward, the row's optimiser step. A counter of live
storages (semcl.preflight.live_bytes: what torch's MemTracker totals, at less cost per op) follows every allocation
and free of that step, so the peak
holds parameters, gradients, optimiser state, activations and temporaries as the real step allocates them, the
optimiser's step taken as on CUDA (multi-tensor, where torch picks: `_as_on_cuda`).

The fakes live on the CPU: on a machine without a GPU, fake CUDA tensors run forward but not backward (the
autograd engine asks for a CUDA context). Bytes per element are the same on both devices; the CUDA autocast's
op list is not the CPU's, so fp16 rows run under the CPU's bf16 autocast (2 bytes an element either way).
The optimiser's state is made before the measured step (fakes of the real optimiser's after a real step, else a
fake step on zero gradients), as it is at any step but the first, and the previous step's gradients are resident
until the forward ends, as the engine frees them (semcl.engine.train.Stepper). Not counted: the CUDA context,
cuDNN workspaces and allocator fragmentation (the check's CONTEXT_GB), the DDP gradient buckets of a multi-GPU
job, the next batch already on the GPU.

HSA's kNN mining (at each refresh) holds the features of every training image on every rank: while they are
encoded and gathered, the shards and their concatenation (2 * N * D float32), then during the search the
features, their normalised copy and one similarity block at a time. The search runs faked at the real N and D
(its chunk loop allocates as the real one does); the encoding phase is the formula above, since a fake forward
over a million images is too slow for a preflight.

What cannot run faked (an op whose output shape depends on values: nonzero, unique, boolean masks; a `.item()`
that steers Python) raises here; the check then reports the row's estimate from its small real step (the
formula of semcl.preflight.check) and says why.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass

import torch

from semcl.preflight.live_bytes import LiveBytes


@dataclass
class FakePeak:
    step_bytes: int  # the training step's peak (weights, grads, optimiser state, activations, temporaries)
    mining_bytes: int | None = None  # peak during HSA's kNN mining (the persistent state included); None: no mining
    seconds: float = 0.0

    @property
    def peak_bytes(self) -> int:
        return max(self.step_bytes, self.mining_bytes or 0)


def _resized(t, size0: int):
    """A tensor like `t` with `size0` rows (a batch dimension), made in the active mode (under fake mode: a
    fake); anything else passes through."""
    if isinstance(t, torch.Tensor):
        return torch.empty((size0, *t.shape[1:]), dtype=t.dtype)
    if isinstance(t, (list, tuple)):
        return type(t)(_resized(x, size0) for x in t)
    return t


def fake_batch(batch, size: int, indices: torch.Tensor):
    """The step's batch at `size` samples per GPU (call under fake mode): views, labels and partner views of
    that many rows; `indices` (real CPU positions, read by some methods' banks; not on the GPU)."""
    def copy_of(g):  # the real step's generators stay where that step left them
        return None if g is None else torch.Generator().set_state(g.get_state())

    return dataclasses.replace(
        batch, views=_resized(batch.views, size), labels=_resized(batch.labels, size), indices=indices,
        generator=copy_of(batch.generator), rank_generator=copy_of(batch.rank_generator),
        partner_views=_resized(batch.partner_views, size) if batch.partner_views else batch.partner_views)


def step_peak(method, cfg, batch, size: int, warm: torch.optim.Optimizer | None = None) -> int:
    """Peak bytes of one training step of a fake copy of `method` at `size` samples per GPU (module docstring).
    `batch`: a real batch of the row (its views' image size and structure). `warm`: the real optimiser of
    `method` after a step, whose state the fake one takes as fakes (else a fake step on zero gradients makes it)."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily

    from semcl.runtime.host_sync import like_an_accelerator

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fake = fake_copy(method, mode, {})
    with mode:
        opt = fake.configure_optimizer(cfg.optim)
    if opt is None:
        return 0
    _as_on_cuda(opt)
    if not _state_from(warm, opt, dict(zip(method.parameters(), fake.parameters(), strict=True)), mode):
        with mode:
            warm_optimizer(opt)
    # the previous step's gradients: the engine frees them after the forward, just before the backward
    # (semcl.engine.train.Stepper), so the forward's activations peak with them resident
    with mode:
        for group in opt.param_groups:
            for p in group["params"]:
                if p.requires_grad and p.grad is None:
                    p.grad = torch.zeros_like(p)
    amp = getattr(cfg.optim, "amp", None)
    tracker = LiveBytes(kind=FakeTensor)  # the real host work of `prepare` below is not the GPU's
    tracker.track_external(fake, opt)
    fake.train()
    indices = batch.indices.repeat(-(-size // max(1, len(batch.indices))))[:size]  # the real ones, repeated
    # the accelerator's code paths (no host reads: a fake tensor has no values to read), as on the GPU it models
    with mode, tracker, like_an_accelerator():
        big = fake_batch(batch, size, indices)  # allocated inside the tracked step: the batch's bytes are on the GPU too
        with unset_fake_temporarily():  # the host work runs real, on the real method (its samplers, its tables)
            inputs = method.prepare(big)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp is not None):
            loss = fake.loss(inputs)["loss"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        fake.after_backward()
        opt.step()
    return tracker.peak


def _as_on_cuda(opt) -> None:
    """The optimiser's step as torch picks it for CUDA parameters: the multi-tensor (foreach) one wherever the
    implementation is left to torch (group "foreach" None, not fused), which on the CPU picks the per-parameter
    loop. The multi-tensor step holds what the loop does not (SGD's weight-decayed gradients: a whole copy of the
    gradients; Adam's square roots of its second moments), so a GPU's peak has them."""
    for group in opt.param_groups:
        if group.get("foreach", False) is None and not group.get("fused") and not group.get("differentiable"):
            group["foreach"] = True


def fake_copy(module, mode, memo: dict):
    """A deep copy of `module` whose tensors are fakes of `mode` (what a deepcopy under FakeCopyMode makes), except
    the tensors `memo` maps already. Parameters and buffers are made fake first, into the memo: a copy through
    FakeCopyMode's clone hook took 3x the conversion itself (a KD resnet110 -> resnet32 method, 868 tensors: 0.28 s
    vs 0.09 s, the most of a KD memory check after the step); tensors held elsewhere (a plain attribute, a list)
    still go through FakeCopyMode."""
    from torch._subclasses.fake_tensor import FakeCopyMode

    memo = dict(memo)
    for t in (*module.parameters(), *module.buffers()):  # a Parameter's fake is a Parameter (requires_grad kept)
        if id(t) not in memo:
            memo[id(t)] = mode.from_tensor(t, static_shapes=True)
    with FakeCopyMode(mode):
        return copy.deepcopy(module, memo)


def _state_from(real, opt, fakes: dict, mode) -> bool:
    """Give `opt` (over the fakes of `fakes`' parameters; called outside the fake mode) the fakes of `real`'s
    state, where `real` holds state for every trainable parameter of its groups and its groups match `opt`'s; False
    (nothing set) otherwise. A faked warm step dispatches ~4 ops per parameter tensor through the fake mode; the
    real state is at hand (a whole check's) or made by a real step in milliseconds (check._memory_only)."""
    if real is None or len(real.param_groups) != len(opt.param_groups):
        return False
    pairs = []
    for mine, theirs in zip(real.param_groups, opt.param_groups, strict=True):
        if len(mine["params"]) != len(theirs["params"]):
            return False
        for p, q in zip(mine["params"], theirs["params"], strict=True):
            if fakes.get(p) is not q:
                return False
            if p.requires_grad:
                if not real.state.get(p):
                    return False
                pairs.append((p, q))
    def taken(v):
        if not isinstance(v, torch.Tensor):
            return copy.deepcopy(v)
        if v.dim() == 0:  # a counter (Adam's step), whose value the update reads: a fake that keeps it, as made there
            value = v.item()
            with mode:
                return torch.tensor(value, dtype=v.dtype)
        return mode.from_tensor(v, static_shapes=True)

    for p, q in pairs:
        opt.state[q] = {k: taken(v) for k, v in real.state[p].items()}
    return True


def warm_optimizer(opt) -> None:
    """The optimiser's state as at any step after the first: one step on zero gradients (under fake mode)."""
    for group in opt.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
    opt.step()
    opt.zero_grad(set_to_none=True)


def mining_search(method) -> tuple[int, int, str] | None:
    """(D, k, backend) of the kNN search the method runs over every training image at each refresh, as its spec
    declares (semcl.methods.spec.StandIn.mining); None: no such search."""
    from semcl.methods.registry import method_spec

    return method_spec(method.cfg.method.name).stand_in.mining_of(method)


def mining_peak(method, n: int, persistent: int) -> int | None:
    """Peak bytes during a kNN mining over `n` training images (module docstring; mining_search), with
    `persistent` bytes (weights, grads, optimiser state) resident; None where the method does not mine."""
    search = mining_search(method)
    if search is None:
        return None
    d, k, backend = search
    encode = 2 * n * d * 4  # the shards (or the per-batch list) and their concatenation, float32
    if backend != "torch":  # faiss searches on the CPU
        return persistent + encode
    return persistent + max(encode, knn_peak(n, d, k))


def knn_peak(n: int, d: int, k: int, query_chunk: int | None = None, key_chunk: int | None = None) -> int:
    """Peak bytes of semcl.data.semantics.neighbours.knn_table on [n, d] float32 features (the features included; chunks:
    the search's defaults unless given). Only the features, their normalised copy and the [n, k] table grow with n;
    the blocks do not once n holds two key blocks. So the search runs faked at min(n, 2 key blocks) (a faked
    pass at ImageNet's 1.28 M took minutes of Python on 2 cores) and the rest is added at 2 * d * 4 + k * 8 bytes
    a row."""
    import inspect

    from torch._subclasses.fake_tensor import FakeTensorMode

    from semcl.data.semantics.neighbours import knn_table

    defaults = inspect.signature(knn_table).parameters
    qc = query_chunk or defaults["query_chunk"].default
    kc = key_chunk or defaults["key_chunk"].default
    m = min(n, 2 * max(kc, qc))
    tracker = LiveBytes()
    with FakeTensorMode(), tracker:
        knn_table(torch.empty(m, d), k, query_chunk=qc, key_chunk=kc)
    return tracker.peak + (n - m) * (2 * d * 4 + k * 8)


def fake_peak(method, cfg, opt, batch, size: int, n_train: int) -> FakePeak:
    """The step's peak and, for a mining method, the mining's (FakePeak); `opt`: the real optimiser after a step
    (its state's bytes are the slots the mining finds resident; the fake step starts from fakes of that state)."""
    t0 = time.time()
    step = step_peak(method, cfg, batch, size, warm=opt)
    persistent = _persistent_bytes(method, opt)
    mining = mining_peak(method, n_train, persistent)
    return FakePeak(step, mining, time.time() - t0)


def _persistent_bytes(method, opt) -> int:
    """What stays on the GPU between steps: the state (weights, buffers, queues), the trainable parameters'
    gradients (set to None only at the next step) and the optimiser's state."""
    state = sum(t.numel() * t.element_size() for t in method.state_dict().values() if hasattr(t, "numel"))
    grads = sum(p.numel() * p.element_size() for p in method.parameters() if p.requires_grad)
    slots = sum(t.numel() * t.element_size() for s in (opt.state.values() if opt is not None else ())
                for t in s.values() if isinstance(t, torch.Tensor))
    return state + grads + slots
