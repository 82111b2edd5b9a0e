"""What one epoch of a run processes, as every estimate counts it: the networks the method declares it runs
(MethodSpec.networks) and the training set's size."""

from __future__ import annotations

from semcl.config import RunConfig
from semcl.data.longtail_rule import longtail_counts
from semcl.data.registry import DATASETS
from semcl.methods.registry import METHODS
from semcl.methods.spec import Networks


def networks(cfg: RunConfig) -> Networks:
    """What the run trains and runs forward, as its method declares it."""
    return METHODS[cfg.method.name].networks(cfg.method, cfg.model)


def train_samples(cfg: RunConfig) -> int:
    """Training samples of one epoch: the dataset's training split, capped per class, the synthetic stand-in's
    size, cut long-tailed by n_i = int(n_max * IF**(-i / (C - 1))) (semcl.data.longtail_rule)."""
    info = DATASETS.get(cfg.data.name)
    n = info.num_train if info else 50_000
    if cfg.data.train_per_class and info:
        n = min(n, cfg.data.train_per_class * info.num_classes)
    if cfg.data.synthetic:
        n = cfg.data.synthetic_train_per_class * (info.num_classes if info else 100)
    if cfg.data.imbalance_factor and info:
        n_max = cfg.data.lt_max_per_class or n // info.num_classes
        n = sum(longtail_counts(n_max, info.num_classes, cfg.data.imbalance_factor))
    return n
