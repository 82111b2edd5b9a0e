"""Cross-entropy baselines that use the class hierarchy (RINCE Table 2, docs/papers/rince.md §c.10).

- Label smoothing within the superclass: the target keeps 1 − α on the true class and spreads α
  uniformly over the *other* classes of its superclass (the 4 siblings on CIFAR-100). A class
  without siblings (alone in its superclass, or with an unknown superclass -1) keeps the one-hot
  target: there is nowhere in its superclass to put the mass.
- Two heads: L = (1 − λ)·CE(fine logits, y) + λ·CE(superclass logits, coarse(y)).

`fine_to_coarse` is the int64 [C] superclass of each class (DataInfo.fine_to_coarse); -1 marks a
class whose superclass is unknown (absent from a subset).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _check_hierarchy(fine_to_coarse: torch.Tensor | None, labels: torch.Tensor) -> torch.Tensor:
    if fine_to_coarse is None:
        raise ValueError("this loss needs the superclass of each class (fine_to_coarse), got None: "
                         "the dataset has no superclass labels")
    f2c = fine_to_coarse.to(device=labels.device, dtype=torch.int64)
    if f2c.dim() != 1:
        raise ValueError(f"fine_to_coarse must be 1-d, got shape {tuple(f2c.shape)}")
    return f2c


def superclass_siblings(fine_to_coarse: torch.Tensor) -> torch.Tensor:
    """bool [C, C]: True where two *different* classes share a known superclass."""
    f2c = fine_to_coarse.to(torch.int64)
    same = (f2c[:, None] == f2c[None, :]) & (f2c[:, None] >= 0)
    return same & ~torch.eye(len(f2c), dtype=torch.bool, device=f2c.device)


def superclass_smoothed_targets(labels: torch.Tensor, fine_to_coarse: torch.Tensor | None, alpha: float,
                                dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Soft targets [B, C]: 1 − α on the label, α / n_siblings on each sibling of its superclass, 0 elsewhere.

    A class without siblings keeps its full mass 1 (one-hot row). Every row sums to 1.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    f2c = _check_hierarchy(fine_to_coarse, labels)
    labels = labels.to(torch.int64)
    sib = superclass_siblings(f2c)[labels].to(dtype)  # [B, C]
    n_sib = sib.sum(dim=1, keepdim=True)  # [B, 1]
    has_sib = (n_sib > 0).to(dtype)
    # scatter, not F.one_hot: that reads the labels' range back on the CPU path (semcl.runtime.host_sync)
    one_hot = torch.zeros(labels.shape[0], len(f2c), dtype=dtype, device=labels.device).scatter_(1, labels[:, None], 1.0)
    return one_hot * (1.0 - alpha * has_sib) + sib * (alpha / n_sib.clamp(min=1))


def superclass_label_smoothing_loss(logits: torch.Tensor, labels: torch.Tensor, fine_to_coarse: torch.Tensor | None,
                                    alpha: float) -> torch.Tensor:
    """Mean over the batch of −Σ_c q_c log softmax(logits)_c with q = superclass_smoothed_targets."""
    if logits.dim() != 2:
        raise ValueError(f"logits must be [B, C], got shape {tuple(logits.shape)}")
    if fine_to_coarse is not None and logits.shape[1] != len(fine_to_coarse):
        raise ValueError(f"logits have {logits.shape[1]} classes but fine_to_coarse has {len(fine_to_coarse)}")
    # targets in at least float32 (also under autocast, where the soft-target CE runs in float32)
    targets = superclass_smoothed_targets(labels, fine_to_coarse, alpha, dtype=torch.promote_types(logits.dtype, torch.float32))
    return F.cross_entropy(logits, targets)


def two_heads_loss(fine_logits: torch.Tensor, coarse_logits: torch.Tensor, labels: torch.Tensor,
                   fine_to_coarse: torch.Tensor | None, weight: float) -> dict[str, torch.Tensor]:
    """{"loss": (1 − λ)·CE_fine + λ·CE_superclass, "loss_fine", "loss_coarse"} with λ = `weight`.

    A sample whose class has no known superclass (-1) adds no superclass term (its term is 0 and the
    batch mean still divides by B); on CIFAR-100 and Fashion-MNIST every class has one.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight (lambda) must be in [0, 1], got {weight}")
    f2c = _check_hierarchy(fine_to_coarse, labels)
    coarse = f2c[labels.to(torch.int64)]  # the superclass head must have max(fine_to_coarse) + 1 outputs
    loss_fine = F.cross_entropy(fine_logits, labels)
    known = coarse >= 0
    per_sample = F.cross_entropy(coarse_logits, coarse.clamp(min=0), reduction="none")
    loss_coarse = (per_sample * known).sum() / max(len(labels), 1)
    return {"loss": (1.0 - weight) * loss_fine + weight * loss_coarse, "loss_fine": loss_fine.detach(),
            "loss_coarse": loss_coarse.detach()}
