"""Classification accuracy: top-k and long-tail shot groups (many / medium / few).

All accuracies are percentages in ``[0, 100]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch

ArrayLike = torch.Tensor | np.ndarray


def _labels(y: ArrayLike, name: str) -> torch.Tensor:
    t = torch.as_tensor(y)
    if t.ndim != 1 or t.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer class indices, got {t.dtype}")
    return t.long()


def topk_accuracy(logits: ArrayLike, labels: ArrayLike, ks: Sequence[int] = (1, 5)) -> dict[int, float]:
    """Percentage of samples whose label is among the ``k`` highest logits, per ``k``.

    Ties are broken towards the lower class index, as ``torch.argmax`` and a stable
    descending sort do: the label's rank is the number of classes with a larger logit
    plus the number of lower-indexed classes with an equal one, and the sample counts
    as correct at ``k`` when that rank is below ``k``. This makes the result
    deterministic where ``torch.topk`` would pick arbitrarily among tied logits.

    Raises:
        ValueError: if shapes disagree, a label is out of range, or ``k`` exceeds the
            number of classes (top-k would then be trivially 100%).
    """
    scores = torch.as_tensor(logits)
    if scores.ndim != 2 or scores.shape[0] == 0:
        raise ValueError(f"logits must be a non-empty 2-D array [N, C], got {tuple(scores.shape)}")
    y = _labels(labels, "labels").to(scores.device)
    n, num_classes = scores.shape
    if y.shape[0] != n:
        raise ValueError(f"labels has {y.shape[0]} entries but logits has {n} rows")
    if int(y.min()) < 0 or int(y.max()) >= num_classes:
        raise ValueError(f"labels must lie in [0, {num_classes}), got {int(y.min())}..{int(y.max())}")
    ks = list(ks)
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"ks must be a non-empty sequence of positive ints, got {ks!r}")
    if max(ks) > num_classes:
        raise ValueError(f"k={max(ks)} exceeds the number of classes ({num_classes})")
    if scores.is_floating_point() and bool(torch.isnan(scores).any()):
        raise ValueError("logits contain NaN")

    true = scores.gather(1, y[:, None])
    lower_index = torch.arange(num_classes, device=scores.device)[None, :] < y[:, None]
    rank = (scores > true).sum(dim=1) + ((scores == true) & lower_index).sum(dim=1)
    return {k: 100.0 * int((rank < k).sum()) / n for k in ks}


def shot_group_accuracy(
    preds: ArrayLike,
    labels: ArrayLike,
    train_class_counts: ArrayLike,
    *,
    many: int = 100,
    few: int = 20,
    convention: Literal["paco", "oltr"] = "paco",
) -> dict[str, float]:
    """Accuracy split by how many training images each class has.

    Groups by the training count ``n`` of a class (defaults ``many=100, few=20``):

    * ``convention="paco"`` (PaCo/GPaCo code): many ``n > many``,
      medium ``few <= n <= many``, few ``n < few``.
    * ``convention="oltr"`` (OLTR code): many ``n >= many``,
      medium ``few < n < many``, few ``n <= few``.

    The two differ only for classes with exactly ``many`` or ``few`` images.

    Each group's value is the mean of the per-class accuracies of its classes (every
    class weighs the same, whatever its test-set size). Classes absent from the test
    set are skipped; a group with no evaluated class is NaN. ``"overall"`` is the
    plain sample accuracy over the whole test set, i.e. the usual top-1 (equal to the
    class mean on balanced test sets such as ImageNet-LT's).

    Args:
        preds: predicted class index per test sample ``[N]``.
        labels: true class index per test sample ``[N]``.
        train_class_counts: training images per class ``[C]``; labels index into it.

    Returns:
        ``{"many", "medium", "few", "overall"}`` in percent.
    """
    p = _labels(preds, "preds")
    y = _labels(labels, "labels")
    counts = _labels(train_class_counts, "train_class_counts")
    if p.shape[0] != y.shape[0]:
        raise ValueError(f"preds has {p.shape[0]} entries but labels has {y.shape[0]}")
    if int(counts.min()) < 0:
        raise ValueError("train_class_counts must be non-negative")
    num_classes = counts.shape[0]
    if int(y.min()) < 0 or int(y.max()) >= num_classes:
        raise ValueError(f"labels must lie in [0, {num_classes}) to index train_class_counts")
    if not 0 <= few <= many:
        raise ValueError(f"need 0 <= few <= many, got few={few}, many={many}")
    if convention not in ("paco", "oltr"):
        raise ValueError(f"convention must be 'paco' or 'oltr', got {convention!r}")

    correct = (p == y.to(p.device)).cpu()
    y = y.cpu()
    per_class_n = torch.bincount(y, minlength=num_classes)
    per_class_hits = torch.bincount(y, weights=correct.double(), minlength=num_classes)
    present = per_class_n > 0
    class_acc = torch.where(present, per_class_hits / per_class_n.clamp(min=1), 0.0)

    counts = counts.cpu()
    if convention == "paco":
        is_many, is_few = counts > many, counts < few
    else:
        is_many, is_few = counts >= many, counts <= few
    groups = {"many": is_many, "medium": ~is_many & ~is_few, "few": is_few}

    out: dict[str, float] = {}
    for name, member in groups.items():
        sel = member & present
        out[name] = 100.0 * float(class_acc[sel].mean()) if bool(sel.any()) else math.nan
    out["overall"] = 100.0 * int(correct.sum()) / correct.shape[0]
    return out
