"""Batch orders for one epoch of training images: instance, class-balanced, two-superclass or
anchor-neighbour sampling. A method picks its order in `Method.epoch_order` (semcl.methods.base).

An epoch always has n positions (n = training images), so steps per epoch and the schedule do not
depend on the sampler; Kang et al.'s loop also stops each epoch after n // batch_size steps, although
their ClassAwareSampler is longer (largest class size x classes).
"""

from __future__ import annotations

import torch


def class_balanced_order(labels: torch.Tensor, num_classes: int, generator: torch.Generator) -> torch.Tensor:
    """int64 [n] image indices, drawn from `generator` alone: every position draws a class uniformly
    among the classes that have images, then an image uniformly within that class (with replacement),
    so every class is seen equally often in expectation. Kang et al.'s ClassAwareSampler instead cycles
    through a shuffled class list, takes 4 consecutive images per class visit, and walks each class's
    images in reshuffled order without replacement: the same class marginal, but ours lets a batch's
    class counts vary (binomially) and may repeat an image within an epoch.
    """
    n = len(labels)
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


def two_superclass_order(labels: torch.Tensor, fine_to_coarse: torch.Tensor, batch_size: int,
                         generator: torch.Generator) -> torch.Tensor:
    """int64 [n] image indices whose consecutive blocks of `batch_size` (0..b-1, b..2b-1, ...) each
    hold images of at most two superclasses: FastAP's batches (Cakir et al., CVPR 2019; RINCE §c.10:
    "batches sample 2 categories (superclasses) then samples per category").

    Per block: 2 distinct superclasses drawn uniformly among those with training images (1 if only
    one has any); the first gets ceil(b / 2) positions, the second floor(b / 2); each fills them with
    its images in a fresh random order, without replacement while it has images left (a superclass
    smaller than its share is repeated in new random orders); the block is then shuffled, so every
    slice of it (a DDP rank's part) mixes both superclasses. Within a superclass every image is
    equally likely, so fine classes are drawn in proportion to their size (uniform over fine classes
    on CIFAR-100, where every class has 500 images). Superclasses are drawn uniformly, not by size:
    an epoch (n positions, the last block cut short) may repeat images and skip others. Images of
    classes without a superclass (fine_to_coarse -1) are never drawn.
    """
    n = len(labels)
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    coarse = fine_to_coarse.to(torch.int64)[labels]
    known = coarse >= 0
    if not bool(known.any()):
        raise ValueError("two_superclasses sampling: no training image has a known superclass")
    present = torch.unique(coarse[known])  # ascending
    members = [torch.nonzero(coarse == c).flatten() for c in present.tolist()]
    blocks = []
    for _ in range(-(-n // batch_size)):
        picked = torch.randperm(len(present), generator=generator)[:2].tolist()
        shares = [batch_size - batch_size // 2, batch_size // 2] if len(picked) == 2 else [batch_size]
        parts = []
        for k, share in zip(picked, shares, strict=True):
            pool = members[k]
            reps = -(-share // len(pool))
            parts.append(torch.cat([pool[torch.randperm(len(pool), generator=generator)] for _ in range(reps)])[:share])
        block = torch.cat(parts)
        blocks.append(block[torch.randperm(len(block), generator=generator)])
    if not blocks:
        return torch.empty(0, dtype=torch.long)
    return torch.cat(blocks)[:n]


def anchor_neighbour_order(labels: torch.Tensor, num_classes: int, batch_size: int, generator: torch.Generator, *,
                           l_prime: int, c: int, t: int, neighbour_of_class: torch.Tensor) -> torch.Tensor:
    """int64 [n] image indices whose consecutive blocks of `batch_size` are anchor-neighbour batches
    (Ge et al. 2018 as RINCE describes it, docs/papers/rince.md §c.10: batch = l′ + l′·c + t).

    Per block: l′ distinct anchor classes drawn uniformly among the classes with images, one image
    of each (uniform within the class); for each anchor class k, c images of its nearest class
    `neighbour_of_class[k]` (without replacement while that class has images left); then t images
    drawn from one epoch-wide random permutation (block s takes its entries s·t .. s·t + t − 1, so
    the random part does not repeat an image within an epoch). Layout of a block:
    [anchor_1, c neighbours of anchor_1, anchor_2, ..., c neighbours of anchor_l′, t random]: a
    contiguous slice (a DDP rank's part) keeps most anchors with their neighbours. An anchor class
    without a known neighbour (−1, e.g. before the first statistics) or whose neighbour has no image
    gets a uniformly drawn other class with images. The positions after the last whole block (never
    visited: the loop drops the last partial batch) hold further entries of the random permutation.
    """
    n = len(labels)
    if l_prime < 1 or c < 1 or t < 0 or l_prime + l_prime * c + t != batch_size:
        raise ValueError(f"anchor_neighbour sampling: l_prime + l_prime * c + t = {l_prime} + {l_prime} * {c} + {t} "
                         f"must equal the batch size {batch_size}")
    counts = torch.bincount(labels, minlength=num_classes)
    present = torch.nonzero(counts).flatten()
    if len(present) < max(l_prime, 2):
        raise ValueError(f"anchor_neighbour sampling: {len(present)} classes with images, needs at least "
                         f"max(l_prime, 2) = {max(l_prime, 2)}")
    neighbour_of_class = neighbour_of_class.to(torch.int64).cpu()
    by_class = torch.argsort(labels, stable=True)  # image indices grouped by class, ascending
    starts = torch.cumsum(counts, 0) - counts
    steps = n // batch_size
    randoms = torch.randperm(n, generator=generator)
    blocks = []
    for step in range(steps):
        anchors = present[torch.randperm(len(present), generator=generator)[:l_prime]]
        u = torch.rand(l_prime, generator=generator, dtype=torch.float64)
        anchor_images = by_class[starts[anchors] + torch.minimum((u * counts[anchors]).long(), counts[anchors] - 1)]
        # a uniformly drawn other class, used where the neighbour is unknown (always drawn: a fixed stream)
        r = torch.randint(len(present) - 1, (l_prime,), generator=generator)
        r = r + (r >= torch.searchsorted(present, anchors)).long()
        neighbours = neighbour_of_class[anchors]
        unknown = (neighbours < 0) | (counts[neighbours.clamp(min=0)] == 0)
        neighbours = torch.where(unknown, present[r], neighbours)
        parts = []
        for k in range(l_prime):
            cls = int(neighbours[k])
            size = int(counts[cls])
            reps = -(-c // size)
            within = torch.cat([torch.randperm(size, generator=generator) for _ in range(reps)])[:c]
            parts += [anchor_images[k:k + 1], by_class[starts[cls] + within]]
        parts.append(randoms[step * t:(step + 1) * t])
        blocks.append(torch.cat(parts))
    rest = n - steps * batch_size
    blocks.append(randoms[steps * t:steps * t + rest])
    return torch.cat(blocks)
