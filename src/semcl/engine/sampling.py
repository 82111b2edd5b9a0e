"""The order in which one epoch visits the training images: instance or class-balanced sampling.

An epoch always has n positions (n = training images), so steps per epoch and the schedule do not
depend on the sampler; Kang et al.'s loop also stops each epoch after n // batch_size steps, although
their ClassAwareSampler is longer (largest class size x classes).
"""

from __future__ import annotations

import torch

MODES = ("instance", "class_balanced")


def epoch_order(labels: torch.Tensor, num_classes: int, generator: torch.Generator, mode: str) -> torch.Tensor:
    """int64 [n] image indices for one epoch, drawn from `generator` alone.

    instance: a permutation of the n images (each image once per epoch).
    class_balanced: every position draws a class uniformly among the classes that have images,
    then an image uniformly within that class (with replacement), so every class is seen equally
    often in expectation. Kang et al.'s ClassAwareSampler instead cycles through a shuffled class
    list, takes 4 consecutive images per class visit, and walks each class's images in reshuffled
    order without replacement: the same class marginal, but ours lets a batch's class counts vary
    (binomially) and may repeat an image within an epoch.
    """
    n = len(labels)
    if mode == "instance":
        return torch.randperm(n, generator=generator)  # exactly the loop's historical order
    if mode != "class_balanced":
        raise ValueError(f"unknown sampling mode {mode!r}; known: {', '.join(MODES)}")
    counts = torch.bincount(labels, minlength=num_classes)
    present = torch.nonzero(counts).flatten()
    if len(present) == 0:
        return torch.empty(0, dtype=torch.long)
    by_class = torch.argsort(labels, stable=True)  # image indices grouped by class, ascending
    starts = torch.cumsum(counts, 0) - counts
    cls = present[torch.randint(len(present), (n,), generator=generator)]
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    # u * count can round up to count itself for u just below 1: clamp to the last image
    within = torch.minimum((u * counts[cls]).long(), counts[cls] - 1)
    return by_class[starts[cls] + within]
