"""Robustness metrics of GPaCo Sec. IV-C (docs/papers/paco.md §f): top-1 on a class subset and the two mCE forms.

E[c][s] is the top-1 error (%) under corruption c at severity s = 1..5.

* unnormalised mCE (README "mCE"):   mCE = (1/|C|) * sum_c (1/5) * sum_s E[c][s]
* AlexNet-normalised mCE ("rel. mCE" in the README; Hendrycks & Dietterich's mCE):
      CE_c = sum_s E[c][s] / sum_s E_AlexNet[c][s],   mCE = 100 * (1/|C|) * sum_c CE_c
  with E_AlexNet given as AlexNet's *mean* error per corruption (fraction), so
  sum_s E_AlexNet[c][s] = 5 * 100 * alexnet[c]. This is not Hendrycks' "relative mCE", which
  subtracts the clean error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch


def top1(logits: torch.Tensor, labels: torch.Tensor, classes: torch.Tensor | None = None) -> float:
    """Top-1 accuracy (%) of `logits` [N, K]; with `classes` (int64 [M] logit columns, e.g. the 200
    ImageNet-R classes) the argmax runs over those columns alone and `labels` index into `classes`."""
    if classes is not None:
        logits = logits[:, classes]
    return 100.0 * float((logits.argmax(1) == labels).float().mean())


def mce_unnormalised(errors: Mapping[str, Sequence[float]]) -> float:
    """Mean over corruptions of the mean error (%) over severities."""
    if not errors:
        raise ValueError("no corruption errors")
    return sum(sum(e) / len(e) for e in errors.values()) / len(errors)


def mce_alexnet(errors: Mapping[str, Sequence[float]], alexnet: Mapping[str, float]) -> float:
    """100 * mean over corruptions of sum_s E[c][s] / sum_s E_AlexNet[c][s] (AlexNet: mean error, fraction)."""
    if not errors:
        raise ValueError("no corruption errors")
    missing = sorted(set(errors) - set(alexnet))
    if missing:
        raise ValueError(f"no AlexNet error for corruption {missing[0]!r}")
    return 100.0 * sum(sum(e) / (len(e) * 100.0 * alexnet[c]) for c, e in errors.items()) / len(errors)
