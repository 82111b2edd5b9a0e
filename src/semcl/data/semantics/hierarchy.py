"""Class similarity → ranked positives, as RINCE uses them.

RINCE orders positives by how similar their class is to the anchor's: rank 1 is the
most similar level (the anchor's own class), rank 2 the next level (e.g. a sibling in
the same superclass), ...; rank 0 marks a negative. The pipeline is

    similarity matrix [C, C] → rank_matrix → candidate_ranks(anchors, candidates)
"""

from __future__ import annotations

import torch


def superclass_similarity(fine_to_coarse: torch.Tensor, sibling_sim: float = 0.75) -> torch.Tensor:
    """Similarity ``[C, C]``: 1 on the diagonal, ``sibling_sim`` within a superclass, else 0.

    This is the official CIFAR-100 rank construction. A class whose superclass is
    unknown (``-1``, e.g. absent from a subset) is similar only to itself.
    """
    f2c = fine_to_coarse.to(torch.int64)
    if f2c.dim() != 1:
        raise ValueError(f"fine_to_coarse must be 1-d, got shape {tuple(f2c.shape)}")
    same = (f2c[:, None] == f2c[None, :]) & (f2c[:, None] >= 0)
    sim = torch.where(same, sibling_sim, 0.0)
    sim.fill_diagonal_(1.0)
    return sim


def threshold_similarity(name_sim: torch.Tensor, threshold: float) -> torch.Tensor:
    """Similarity ``[C, C]`` from a class-name similarity (e.g. WordNet) and a threshold.

    Official ImageNet-100 construction: a class is at distance 0 from itself, 1 from
    classes whose name similarity is at least ``threshold``, and far from the rest; the
    similarity is ``1 − 0.25·dist`` up to distance 1 (so 0.75 for similar classes) and 0
    beyond.
    """
    if name_sim.dim() != 2 or name_sim.shape[0] != name_sim.shape[1]:
        raise ValueError(f"name_sim must be square, got shape {tuple(name_sim.shape)}")
    far = 2.0  # any distance > 1 maps to similarity 0
    dist = torch.where(name_sim >= threshold, 1.0, far)
    dist.fill_diagonal_(0.0)
    return torch.where(dist <= 1.0, 1.0 - 0.25 * dist, 0.0)


def rank_matrix(class_sim: torch.Tensor) -> tuple[torch.Tensor, list[float]]:
    """Ranks ``[C, C]`` (int64) and the similarity level of each rank.

    The distinct positive similarity values, sorted descending, become ranks 1..R
    (``levels[r - 1]`` is the similarity of rank ``r``); zero or negative similarity is
    rank 0 (negative). E.g. superclass similarity gives levels ``[1.0, 0.75]``.
    """
    if class_sim.dim() != 2 or class_sim.shape[0] != class_sim.shape[1]:
        raise ValueError(f"class_sim must be square, got shape {tuple(class_sim.shape)}")
    levels = torch.unique(class_sim[class_sim > 0]).flip(0)  # unique sorts ascending
    ranks = torch.zeros(class_sim.shape, dtype=torch.int64, device=class_sim.device)
    for r, level in enumerate(levels, start=1):
        ranks[class_sim == level] = r
    return ranks, [float(v) for v in levels]


def candidate_ranks(rank_mat: torch.Tensor, anchor_labels: torch.Tensor,
                    candidate_labels: torch.Tensor) -> torch.Tensor:
    """Rank ``[B, N]`` of each candidate with respect to each anchor.

    A candidate labelled ``-1`` is an unfilled memory-bank slot and counts as a
    negative (rank 0). This follows the official code, whose queue starts as random
    keys labelled -1 and fills up during training: those keys must only ever repel.
    """
    anchors = anchor_labels.to(device=rank_mat.device, dtype=torch.int64)
    cands = candidate_labels.to(device=rank_mat.device, dtype=torch.int64)
    valid = cands >= 0
    ranks = rank_mat[anchors[:, None], cands.clamp(min=0)[None, :]]
    return ranks * valid[None, :]
