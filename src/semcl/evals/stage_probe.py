"""Linear probes on the pooled features after each backbone stage (HSA Fig. 3: discriminative power of each stage).

For each stage s one linear layer ``W_s f_s + b_s`` is trained with cross-entropy on the frozen, pooled
stage features ``f_s``; all stages train together, as the official per-layer probes do (haohang96/CSML
@be34e84 main_lincls.py:321-358, MulClassifier: one frozen forward per batch, the per-stage losses summed,
one SGD step). Their parameters are disjoint, so this is the same arithmetic as one probe per stage fed the
same batches. SGD with momentum and weight decay, the step schedule ``lr * gamma ** #{m in milestones :
m <= epoch}`` (:func:`semcl.evals.linear_probe.lr_at_epoch`), the last epoch's test top-1 reported.

Two sources of a batch's features, one training loop:

* streaming (:class:`StreamingFeatures`, the official way and the one for large sets): every batch is
  decoded, transformed (with ``augment`` the probe recipe's random crop + flip, drawn from the probe's
  generator) and sent through the frozen backbone. Memory: the heads and one batch of features.
* cached (:class:`CachedFeatures`, small in-memory sets without augmentation): the same deterministic view
  of every image encoded once. The deterministic transform draws nothing, so both sources give the same
  numbers on the same features (tested); :func:`cache_fits` keeps the cache under :data:`CACHE_LIMIT_BYTES`.

Determinism: one generator seeded with ``seed`` draws every head's initialisation (stages in order), then
per epoch one permutation and, streaming with ``augment``, the augmentations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

import torch
import torch.nn.functional as F

from semcl.evals.linear_probe import lr_at_epoch

StageFn = Callable[[torch.Tensor], dict[str, torch.Tensor]]
CACHE_LIMIT_BYTES = 1 << 30  # float32 features of train + test, all stages: above this the probes stream
BYTES = 4  # float32


def cache_bytes(dims: dict[str, int], n_images: int) -> int:
    """Host bytes of a float32 feature cache of ``n_images`` at every stage."""
    return n_images * sum(dims.values()) * BYTES


def cache_fits(dims: dict[str, int], n_images: int) -> bool:
    return cache_bytes(dims, n_images) <= CACHE_LIMIT_BYTES


def probe_device_bytes(dims: dict[str, int], num_classes: int, batch_size: int) -> int:
    """Device bytes the probes add beyond the frozen backbone's forward: every head's weight, gradient and
    momentum buffer, plus one batch of pooled features (and its gradient-free logits)."""
    params = sum((d + 1) * num_classes for d in dims.values())
    return BYTES * (3 * params + batch_size * (sum(dims.values()) + 2 * num_classes * len(dims)))


def probe_gpu_bytes(method, x: torch.Tensor, num_classes: int, batch_size: int) -> int:
    """Device bytes of the on-the-fly probes at ``batch_size``, from one image ``x`` [1, C, H, W] at the run's
    input size: the frozen method's state, every stage map of a batch (stage_outputs keeps them all until
    the pooling), and :func:`probe_device_bytes` of the probes' widths; the host holds one decoded batch."""
    from semcl.models.stages import stage_outputs

    with torch.no_grad():
        dims = {s: int(f.shape[1]) for s, f in method.stage_features(x).items()}
        backbone = dict(method.named_children()).get("backbone")  # a registered module; a few methods have none
        maps = sum(m.numel() for m in stage_outputs(backbone, x).values()) if backbone is not None else 0
    state = sum(t.numel() * t.element_size() for t in method.state_dict().values() if hasattr(t, "numel"))
    return state + BYTES * maps * batch_size + probe_device_bytes(dims, num_classes, batch_size)


def stage_probe_gpu_gb(method, cfg, images, context_gb: float) -> float:
    """The preflight's estimate of the per-stage probes' evaluation peak in GiB at the run's probe batch,
    from the first image of ``images`` (the stand-in's test split at the real input size) and the real
    dataset's class count, plus ``context_gb`` for the CUDA context."""
    from semcl.data import stats
    from semcl.data.registry import DATASETS
    from semcl.data.views.build import build_augment

    mean, std = stats(cfg.data.name)
    x = build_augment("test", size=images.shape[-1], mean=mean, std=std)(images[:1], torch.Generator())
    device = next(method.parameters()).device
    return probe_gpu_bytes(method, x.to(device), DATASETS[cfg.data.name].num_classes,
                           cfg.probe.batch_size) / 2**30 + context_gb


class CachedFeatures:
    """``{stage: [N, D_s]}`` features computed once; a batch is their rows (draws nothing)."""

    def __init__(self, table: dict[str, torch.Tensor]):
        self.table = table

    def batch(self, idx: torch.Tensor, gen: torch.Generator) -> dict[str, torch.Tensor]:
        return {s: t[idx] for s, t in self.table.items()}


class StreamingFeatures:
    """A batch's features from the frozen backbone: ``stage_fn(transform(images[idx], gen))``."""

    def __init__(self, stage_fn: StageFn, images, transform, stages: Sequence[str]):
        self.stage_fn, self.images, self.transform, self.stages = stage_fn, images, transform, list(stages)

    def batch(self, idx: torch.Tensor, gen: torch.Generator) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            out = self.stage_fn(self.transform(self.images[idx], gen))
        missing = [s for s in self.stages if s not in out]
        if missing:
            raise ValueError(f"stage_features has no stage(s) {', '.join(missing)} (has {', '.join(out)})")
        return {s: out[s].detach().float() for s in self.stages}


def stage_feature_table(stage_fn: StageFn, images, transform, stages: Sequence[str],
                        batch_size: int = 256) -> dict[str, torch.Tensor]:
    """``{stage: [N, D_s]}`` float32 CPU features of every image, in order; ``images`` is a uint8 tensor or
    a file-backed set, decoded one batch at a time (the deterministic ``transform`` draws nothing)."""
    src = StreamingFeatures(stage_fn, images, transform, stages)
    gen = torch.Generator().manual_seed(0)
    parts: dict[str, list[torch.Tensor]] = {s: [] for s in stages}
    for start in range(0, images.shape[0], batch_size):
        for s, f in src.batch(torch.arange(start, min(start + batch_size, images.shape[0])), gen).items():
            parts[s].append(f.cpu())
    return {s: torch.cat(v) for s, v in parts.items()}


def _init_heads(dims: dict[str, int], num_classes: int, init: str, gen: torch.Generator, device):
    heads = {}
    for s, dim in dims.items():
        if init == "normal":  # MoCo's lincls and the official per-layer probes: N(0, 0.01), bias 0
            w, b = torch.empty(num_classes, dim).normal_(0.0, 0.01, generator=gen), torch.zeros(num_classes)
        elif init == "uniform":  # nn.Linear's default, drawn from our generator
            bound = 1.0 / math.sqrt(dim)
            w = torch.empty(num_classes, dim).uniform_(-bound, bound, generator=gen)
            b = torch.empty(num_classes).uniform_(-bound, bound, generator=gen)
        else:
            raise ValueError(f"init must be 'uniform' or 'normal', got {init!r}")
        heads[s] = (w.to(device).requires_grad_(), b.to(device).requires_grad_())
    return heads


def _batches(n: int, batch_size: int) -> Iterator[torch.Tensor]:
    for start in range(0, n, batch_size):
        yield torch.arange(start, min(start + batch_size, n))


def train_stage_probes(
    train, train_labels: torch.Tensor, test, test_labels: torch.Tensor, *,
    dims: dict[str, int], num_classes: int, epochs: int, lr: float, batch_size: int, momentum: float = 0.9,
    weight_decay: float = 0.0, milestones: Sequence[int] = (), gamma: float = 0.1, seed: int = 0,
    init: str = "uniform", device: torch.device | str = "cpu", checkpoint=None, eval_batch_size: int = 256,
) -> dict[str, float]:
    """``{stage: test top-1 (percent)}`` after the last epoch of probes trained together.

    ``train`` / ``test`` are feature sources (:class:`CachedFeatures` or :class:`StreamingFeatures`) of the
    training and test images; ``dims`` the stages in order with their input widths. ``checkpoint`` (load /
    save of a dict, or None) keeps the state after each finished epoch, so a requeued evaluation resumes.
    """
    gen = torch.Generator().manual_seed(seed)
    heads = _init_heads(dims, num_classes, init, gen, device)
    opt = torch.optim.SGD([p for wb in heads.values() for p in wb], lr=lr, momentum=momentum,
                          weight_decay=weight_decay)
    y_train = train_labels.long().to(device)
    n, first = int(train_labels.shape[0]), 0
    if checkpoint is not None and (state := checkpoint.load()) is not None:
        if list(state["dims"]) != list(dims) or int(state["epochs"]) != epochs:
            raise ValueError(f"{checkpoint.path}: a stage-probe checkpoint of other stages or another schedule; "
                             "delete it")
        with torch.no_grad():
            for s, (w, b) in heads.items():
                w.copy_(state["heads"][s][0].to(device))
                b.copy_(state["heads"][s][1].to(device))
        opt.load_state_dict(state["optimizer"])
        gen.set_state(state["generator"])
        first = int(state["epoch"])
    for epoch in range(first, epochs):
        for group in opt.param_groups:
            group["lr"] = lr_at_epoch(epoch, lr, milestones, gamma)
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]
            feats = train.batch(idx, gen)
            y = y_train[idx.to(device)]
            loss = sum(F.cross_entropy(F.linear(feats[s].to(device), w, b), y) for s, (w, b) in heads.items())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if checkpoint is not None and epoch + 1 < epochs:
            checkpoint.save({"epoch": epoch + 1, "epochs": epochs, "dims": dict(dims), "optimizer": opt.state_dict(),
                             "generator": gen.get_state(),
                             "heads": {s: (w.detach().cpu(), b.detach().cpu()) for s, (w, b) in heads.items()}})
    correct = dict.fromkeys(dims, 0)
    y_test = test_labels.long().to(device)
    with torch.no_grad():
        for idx in _batches(int(test_labels.shape[0]), eval_batch_size):
            feats = test.batch(idx, gen)  # the test view draws nothing
            for s, (w, b) in heads.items():
                # argmax takes the first maximum, so tied logits resolve deterministically
                correct[s] += int((F.linear(feats[s].to(device), w, b).argmax(1) == y_test[idx.to(device)]).sum())
    return {s: 100.0 * c / test_labels.shape[0] for s, c in correct.items()}


def probe_on_features(
    train_feats: torch.Tensor, train_labels: torch.Tensor, test_feats: torch.Tensor, test_labels: torch.Tensor, *,
    num_classes: int, epochs: int, lr: float, batch_size: int, momentum: float = 0.9, weight_decay: float = 0.0,
    milestones: Sequence[int] = (), gamma: float = 0.1, seed: int = 0, init: str = "uniform",
) -> float:
    """Test top-1 (percent) of one linear probe on cached features ``[N, D]`` (``linear_probe``'s draws)."""
    if train_feats.ndim != 2 or test_feats.ndim != 2 or train_feats.shape[1] != test_feats.shape[1]:
        raise ValueError(f"features must be [N, D] with one D, got {tuple(train_feats.shape)} and "
                         f"{tuple(test_feats.shape)}")
    out = train_stage_probes(CachedFeatures({"x": train_feats}), train_labels, CachedFeatures({"x": test_feats}),
                             test_labels, dims={"x": train_feats.shape[1]}, num_classes=num_classes, epochs=epochs,
                             lr=lr, batch_size=batch_size, momentum=momentum, weight_decay=weight_decay,
                             milestones=milestones, gamma=gamma, seed=seed, init=init)
    return out["x"]
