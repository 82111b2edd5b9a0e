"""Linear probes on cached per-stage features (HSA Fig. 3: discriminative power of each stage).

For each stage s, one linear layer ``W_s f_s + b_s`` is trained with cross-entropy on the frozen,
pooled stage features ``f_s`` (computed once, deterministic view): SGD with momentum, weight decay,
the step schedule ``lr * gamma ** #{m in milestones : m <= epoch}`` and the last epoch's test top-1
reported -- the cached-feature form (``augment=False``) of :func:`semcl.evals.linear_probe.linear_probe`.
The draws of one generator seeded with ``seed`` (initialisation, then one permutation per epoch)
are those of ``linear_probe``, so on the same features both give the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from semcl.evals.linear_probe import lr_at_epoch


def probe_on_features(
    train_feats: torch.Tensor,
    train_labels: torch.Tensor,
    test_feats: torch.Tensor,
    test_labels: torch.Tensor,
    *,
    num_classes: int,
    epochs: int,
    lr: float,
    batch_size: int,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    milestones: Sequence[int] = (),
    gamma: float = 0.1,
    seed: int = 0,
) -> float:
    """Test top-1 (percent) of a linear classifier trained on ``train_feats [N, D]`` after the last epoch."""
    if train_feats.ndim != 2 or test_feats.ndim != 2 or train_feats.shape[1] != test_feats.shape[1]:
        raise ValueError(f"features must be [N, D] with one D, got {tuple(train_feats.shape)} and "
                         f"{tuple(test_feats.shape)}")
    gen = torch.Generator().manual_seed(seed)
    dim = train_feats.shape[1]
    bound = 1.0 / math.sqrt(dim)  # nn.Linear's default init, drawn from our generator
    weight = torch.empty(num_classes, dim).uniform_(-bound, bound, generator=gen).requires_grad_()
    bias = torch.empty(num_classes).uniform_(-bound, bound, generator=gen).requires_grad_()
    opt = torch.optim.SGD([weight, bias], lr=lr, momentum=momentum, weight_decay=weight_decay)
    y_train, y_test = train_labels.long(), test_labels.long()
    n = train_feats.shape[0]
    for epoch in range(epochs):
        for group in opt.param_groups:
            group["lr"] = lr_at_epoch(epoch, lr, milestones, gamma)
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]
            loss = F.cross_entropy(F.linear(train_feats[idx], weight, bias), y_train[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    with torch.no_grad():
        pred = F.linear(test_feats, weight, bias).argmax(dim=1)
    return 100.0 * int((pred == y_test).sum()) / test_feats.shape[0]


def stage_feature_table(
    stage_fn: Callable[[torch.Tensor], dict[str, torch.Tensor]],
    images,
    transform,
    stages: Sequence[str],
    batch_size: int = 256,
) -> dict[str, torch.Tensor]:
    """``{stage: [N, D_s]}`` float32 CPU features of every image, in order; ``images`` is a uint8 tensor
    or a file-backed set, decoded one batch at a time (the deterministic ``transform`` draws nothing)."""
    gen = torch.Generator().manual_seed(0)
    parts: dict[str, list[torch.Tensor]] = {s: [] for s in stages}
    with torch.no_grad():
        for start in range(0, images.shape[0], batch_size):
            out = stage_fn(transform(images[start:start + batch_size], gen))
            missing = [s for s in stages if s not in out]
            if missing:
                raise ValueError(f"stage_features has no stage(s) {', '.join(missing)} (has {', '.join(out)})")
            for s in stages:
                parts[s].append(out[s].float().cpu())
    return {s: torch.cat(v) for s, v in parts.items()}
