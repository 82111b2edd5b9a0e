"""Hierarchical triplet loss (Ge et al., "Deep Metric Learning with Hierarchical Triplet Loss", ECCV 2018),
as RINCE's baseline uses it (docs/papers/rince.md §c.10): the ground-truth class -> superclass -> root hierarchy
replaces Ge et al.'s learned class tree.

Ge et al.'s definitions, as recalled (their paper is not among the project's paper texts; the equations below
are written from memory of it and could not be checked against the text):

* class distance (their tree's node distance), mean squared distance between the samples of two classes::

      d(p, q) = 1 / (n_p n_q) · Σ_{i ∈ p, j ∈ q} ||r_i − r_j||²

* intra-class distance of class y, mean over the ordered pairs of distinct samples::

      s_y = 1 / (n_y (n_y − 1)) · Σ_{i ≠ j ∈ y} ||r_i − r_j||²

* violate margin of a triplet (a, p, n), y_a = y_p ≠ y_n::

      α = β + d_{H(y_a, y_n)} − s_{y_a},   β = 0.1

  with d_{H(y_a, y_n)} the threshold (merge distance) of the tree level H at which y_a and y_n merge.
  Ge et al.'s thresholds are evenly spaced, d_l = l (4 − d_0) / L + d_0 (d_0 the mean intra-class
  distance; 4 = the largest squared distance on the unit sphere), which is why d and s are squared.

* loss over the Z triplets of the mini-batch (every (a, p, n) with y_p = y_a, p ≠ a, y_n ≠ y_a)::

      L = 1 / (2 Z) · Σ_{(a, p, n)} [ ||x_a − x_p|| − ||x_a − x_n|| + α ]_+

  (Euclidean, not squared, distances inside the hinge; the factor 1/2 as recalled.)

Our choices (assumed; none is given by RINCE):

* Two levels from the ground truth: H = 1 when y_a and y_n share a superclass, H = 2 (root) otherwise.
  Their thresholds are the mean class distance over the class pairs merged at that level, i.e. the
  merge distance of an average-linkage tree built on the given hierarchy::

      d_1 = mean_{p ≠ q, coarse(p) = coarse(q)} d(p, q),   d_2 = mean_{coarse(p) ≠ coarse(q)} d(p, q)

  (unweighted over ordered class pairs; a level with no pair gets 0 and is then never used). A class
  whose superclass is unknown (fine_to_coarse −1) shares a superclass with no class.
* Statistics from class means: for unit vectors the two distances above are exact functions of the
  class means μ (no pairwise pass)::

      d(p, q) = 2 − 2 μ_p · μ_q,     s_y = n_y / (n_y − 1) · (2 − 2 ||μ_y||²)   (s_y = 0 for n_y < 2)

* ``squared=True`` puts squared distances in the hinge too, so α is in the units of the hinge; its
  expected value over a class pair is then β + d_H − d(y_a, y_n). Not the default (Ge et al. use
  Euclidean distances there).
* The nearest class of p (anchor-neighbour sampling) is argmin_{q ≠ p} d(p, q), the tree's distance.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class ClassStatistics(NamedTuple):
    distance: torch.Tensor  # [C, C] d(p, q); meaningful where both classes are valid
    intra: torch.Tensor  # [C] s_y (0 for classes with fewer than 2 samples)
    thresholds: torch.Tensor  # [2] (d_1 same superclass, d_2 root)
    valid: torch.Tensor  # bool [C]: the class has samples


def same_superclass(fine_to_coarse: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """bool, broadcast over a and b (class indices): both classes have the same known superclass."""
    ca, cb = fine_to_coarse[a], fine_to_coarse[b]
    return (ca == cb) & (ca >= 0)


def class_statistics(sums: torch.Tensor, counts: torch.Tensor, fine_to_coarse: torch.Tensor) -> ClassStatistics:
    """d(p, q), s_y and the level thresholds from per-class sums [C, D] and counts [C] of unit vectors."""
    counts = counts.to(sums.dtype)
    valid = counts > 0
    mu = sums / counts.clamp(min=1)[:, None]
    distance = 2 - 2 * mu @ mu.T
    n = counts
    intra = torch.where(n >= 2, n / (n - 1).clamp(min=1) * (2 - 2 * (mu * mu).sum(1)), torch.zeros_like(n))
    classes = torch.arange(len(counts), device=sums.device)
    pair = valid[:, None] & valid[None, :] & (classes[:, None] != classes[None, :])
    same = same_superclass(fine_to_coarse.to(sums.device), classes[:, None], classes[None, :])
    thresholds = torch.stack([_masked_mean(distance, pair & same), _masked_mean(distance, pair & ~same)])
    return ClassStatistics(distance, intra, thresholds, valid)


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x over mask; 0 for an empty mask. The count stays a tensor: no host read (semcl.runtime.host_sync)."""
    return (x * mask).sum() / mask.sum().clamp_min(1)


def nearest_classes(distance: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """int64 [C]: for each valid class the other valid class with the smallest d(p, q) (lowest index on
    ties); −1 for an invalid class or when no other class is valid."""
    c = len(valid)
    allowed = valid[None, :] & ~torch.eye(c, dtype=torch.bool, device=distance.device)
    d = distance.masked_fill(~allowed, float("inf"))
    nearest = d.argmin(dim=1)
    known = valid & allowed.any(dim=1)
    return torch.where(known, nearest, torch.full_like(nearest, -1))


def violate_margins(labels: torch.Tensor, fine_to_coarse: torch.Tensor, thresholds: torch.Tensor,
                    intra: torch.Tensor, beta: float) -> torch.Tensor:
    """[B, B] α[a, n] = β + d_{H(y_a, y_n)} − s_{y_a} (only read where y_n ≠ y_a)."""
    level = torch.where(same_superclass(fine_to_coarse, labels[:, None], labels[None, :]), 0, 1)
    return beta + thresholds[level] - intra[labels][:, None]


def hierarchical_triplet_loss(z: torch.Tensor, labels: torch.Tensor, margins: torch.Tensor, *,
                              squared: bool = False) -> torch.Tensor:
    """1 / (2 Z) Σ_{a, p, n} [d(a, p) − d(a, n) + margins[a, n]]_+ over every triplet of the batch.

    d is the Euclidean (``squared``: squared Euclidean) distance between rows of z [B, D]; Z is the
    number of triplets (anchor a, positive p ≠ a of its class, negative n of another class). Zero
    (with a zero gradient) when the batch has no triplet.

    Computed without the [B, B, B] tensor: for an anchor, with x_p = d(a, p) and y_n = d(a, n) − α_an,
    Σ_n [x_p − y_n]_+ = k_p x_p − Σ_{first k_p sorted y} y, k_p = #{n : y_n < x_p} (a sort, a cumulative
    sum and a binary search per anchor); the gradient is the hinge's, with 0 at the kink.
    """
    z = z.float() if z.dtype in (torch.float16, torch.bfloat16) else z
    margins = margins.to(z.dtype)
    sq = ((z * z).sum(1)[:, None] + (z * z).sum(1)[None, :] - 2 * z @ z.T).clamp(min=0)
    # sqrt's gradient at 0 is infinite: clamped entries (the diagonal) get none, and no hinge reads them
    dist = sq if squared else sq.clamp(min=1e-12).sqrt()
    same = labels[:, None] == labels[None, :]
    pos = same & ~torch.eye(len(labels), dtype=torch.bool, device=z.device)
    neg = ~same
    # Z stays a tensor (no host read); without a triplet every pair term below is 0 (no positive, or no negative:
    # k = 0 and an empty prefix), so the loss is 0 with a zero gradient
    num = (pos.sum(1) * neg.sum(1)).sum()
    y = (dist - margins).masked_fill(~neg, float("inf"))  # non-negatives sort last and are never counted
    y_sorted, _ = y.sort(dim=1)
    beyond = torch.arange(len(y), device=z.device)[None, :] >= neg.sum(1, keepdim=True)
    prefix = torch.cat([y.new_zeros(len(y), 1), y_sorted.masked_fill(beyond, 0).cumsum(dim=1)], dim=1)
    x = dist.contiguous()
    k = torch.searchsorted(y_sorted.detach().contiguous(), x.detach(), right=False)  # #{n : y_n < x}
    per_pair = k.to(z.dtype) * x - prefix.gather(1, k)
    return (per_pair * pos).sum() / (2 * num).clamp_min(1)
