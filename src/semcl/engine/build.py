"""A run's method, built the one way the job and the preflight share: the method class and the runs it builds
on, the training and test splits by the dataset rules, the method on its device with its dependencies loaded.
The job (semcl.engine.job) then trains and evaluates it; the preflight (semcl.preflight.check) drives one step."""

from __future__ import annotations

from pathlib import Path

import torch

from semcl.data import load, select_per_class
from semcl.data.longtail import longtail_subset_indices
from semcl.engine.dependencies import dependencies
from semcl.methods.base import DataInfo, Dependency
from semcl.methods.registry import method_spec
from semcl.models.layout import apply_memory_format
from semcl.registry.plan import Run
from semcl.runtime import distributed
from semcl.runtime.precision import configure_backend
from semcl.store import Store


def method_class(run: Run, store: Store, cfg) -> tuple[type, list[Dependency]]:
    """The row's Method class and the finished runs it builds on (a base run, a teacher, ensemble members)."""
    spec = method_spec(cfg.method.name)
    return spec.load(), dependencies(run, store, spec.depends)


def data_splits(cfg, root: Path):
    """(train, test) as a run trains and evaluates on them: a fixed per-class subset and the long-tailed cut
    (the same for every seed, so seeds vary only the training randomness), the test set's limit."""
    d = cfg.data
    train_set = load(d.name, root, "train", d.image_size)
    if d.train_per_class:
        train_set = train_set.subset(select_per_class(train_set.labels, d.train_per_class, seed=0))
    if d.imbalance_factor:  # long-tailed cut by the CIFAR-LT rule
        train_set = train_set.subset(longtail_subset_indices(
            train_set.labels, train_set.num_classes, d.imbalance_factor, d.lt_max_per_class, d.lt_seed))
    test_set = load(d.name, root, d.test_split or "test", d.image_size)
    if d.test_limit:
        test_set = test_set.subset(torch.arange(min(d.test_limit, len(test_set.labels))))
    return train_set, test_set


def data_info(train_set) -> DataInfo:
    """What a method is told about its training set: classes, channels, hierarchy, per-class counts, names."""
    counts = torch.bincount(train_set.labels, minlength=train_set.num_classes)
    return DataInfo(train_set.num_classes, train_set.images.shape[1], train_set.fine_to_coarse, counts,
                    tuple(train_set.class_names))


def build_method(cls: type, cfg, info: DataInfo, deps: list[Dependency], device: torch.device, seed: int):
    """The method on `device` in its memory format, its dependencies loaded; under DDP a method that draws per
    rank gets its own stream (rank 0 keeps the plain one)."""
    configure_backend(cfg, device)
    method = apply_memory_format(cls(cfg, info).to(device), cfg.model.memory_format)
    if deps:  # a second stage's base run, a teacher (same seed)
        method.load_dependencies(deps)
    if distributed.is_distributed() and method_spec(cfg.method.name).rank_seeded:
        torch.manual_seed(seed + distributed.rank())
    return method
