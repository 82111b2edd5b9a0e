"""Long-tailed training subsets by the CIFAR-LT rule of the PaCo/GPaCo code (LDAM-DRW convention).

Class i of C (original label order, no class shuffling) keeps

    n_i = int(n_max * (1 / IF) ** (i / (C - 1)))

images, with IF = n_max / n_min the imbalance factor (the official code passes its inverse,
`imb_factor` 0.01 for IF 100) and n_max = images per class of the balanced set (500 on CIFAR-100).
`int` truncates, exactly as the official code does. Selection: one NumPy RandomState seeded once
(seed 0 in the official code) shuffles each class's indices in turn, in class order, and keeps the
first n_i -- so the subset of class i depends on every earlier class's draw, as in the original.
"""

from __future__ import annotations

import numpy as np
import torch

from semcl.data.longtail_rule import longtail_counts  # noqa: F401  (the rule lives torch-free for the planner)
from semcl.errors import DataError


def longtail_indices(labels: torch.Tensor, counts: list[int], seed: int = 0) -> torch.Tensor:
    """Sorted row indices of the long-tailed subset of a set with these labels."""
    y = labels.cpu().numpy()
    rng = np.random.RandomState(seed)  # the legacy generator np.random.seed(0) drives
    keep = []
    for cls, n in enumerate(counts):
        idx = np.where(y == cls)[0]
        if len(idx) < n:
            raise DataError(f"long-tail: class {cls} has {len(idx)} images, the rule asks for {n}")
        rng.shuffle(idx)
        keep.append(idx[:n])
    return torch.from_numpy(np.sort(np.concatenate(keep))).long()


def longtail_subset_indices(labels: torch.Tensor, num_classes: int, imbalance_factor: float,
                            n_max: int | None = None, seed: int | None = None) -> torch.Tensor:
    """The LT rule applied to a balanced set; n_max defaults to its images per class."""
    if n_max is None:
        n_max = int(torch.bincount(labels, minlength=num_classes).min())
    return longtail_indices(labels, longtail_counts(n_max, num_classes, imbalance_factor),
                            0 if seed is None else seed)
