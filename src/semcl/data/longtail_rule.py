"""The long-tail rule of the PaCo/GPaCo CIFAR-LT code (semcl.data.longtail has the selection): images per
class, standard library only so that `semcl plan`'s estimate counts a long-tailed training set without torch."""

from __future__ import annotations

from semcl.errors import DataError


def longtail_counts(n_max: int, num_classes: int, imbalance_factor: float) -> list[int]:
    """Images per class, n_max for class 0 down to int(n_max / IF) for the last."""
    if imbalance_factor < 1 or n_max < 1 or num_classes < 2:
        raise DataError(f"long-tail: need imbalance_factor >= 1, n_max >= 1 and >= 2 classes, got "
                        f"{imbalance_factor}, {n_max}, {num_classes}")
    ratio = 1.0 / imbalance_factor
    # Python floats and int(), like the official list comprehension (not numpy rounding)
    return [int(n_max * ratio ** (i / (num_classes - 1.0))) for i in range(num_classes)]
