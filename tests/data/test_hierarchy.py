"""Class similarity and rank construction on a hand-made 5-class hierarchy."""

from __future__ import annotations

import pytest
import torch

from semcl.data.semantics.hierarchy import candidate_ranks, rank_matrix, superclass_similarity, threshold_similarity

# Classes 0, 1 in superclass 0; 2, 3 in superclass 1; 4 alone in superclass 2.
F2C = torch.tensor([0, 0, 1, 1, 2])
S = 0.75
EXPECTED_SIM = torch.tensor([
    [1, S, 0, 0, 0],
    [S, 1, 0, 0, 0],
    [0, 0, 1, S, 0],
    [0, 0, S, 1, 0],
    [0, 0, 0, 0, 1],
])
EXPECTED_RANKS = torch.tensor([
    [1, 2, 0, 0, 0],
    [2, 1, 0, 0, 0],
    [0, 0, 1, 2, 0],
    [0, 0, 2, 1, 0],
    [0, 0, 0, 0, 1],
])


def test_superclass_similarity() -> None:
    torch.testing.assert_close(superclass_similarity(F2C), EXPECTED_SIM.float())
    sim = superclass_similarity(torch.tensor([0, -1, -1, 0]), sibling_sim=0.5)
    # Unknown superclasses (-1) are not siblings of each other.
    assert sim.tolist() == [[1, 0, 0, 0.5], [0, 1, 0, 0], [0, 0, 1, 0], [0.5, 0, 0, 1]]


def test_threshold_similarity() -> None:
    name_sim = torch.tensor([
        [1.0, 0.9, 0.2, 0.1, 0.0],
        [0.9, 1.0, 0.3, 0.1, 0.0],
        [0.2, 0.3, 1.0, 0.8, 0.5],
        [0.1, 0.1, 0.8, 1.0, 0.0],
        [0.0, 0.0, 0.5, 0.0, 0.3],  # a self-similarity below threshold is still rank 1
    ])
    torch.testing.assert_close(threshold_similarity(name_sim, 0.8), EXPECTED_SIM.float())
    with pytest.raises(ValueError, match="square"):
        threshold_similarity(torch.zeros(2, 3), 0.5)


def test_rank_matrix() -> None:
    ranks, levels = rank_matrix(superclass_similarity(F2C))
    assert ranks.dtype == torch.int64 and torch.equal(ranks, EXPECTED_RANKS)
    assert levels == [1.0, 0.75]
    ranks, levels = rank_matrix(torch.tensor([[1.0, 0.5, 0.25], [0.5, 1.0, 0.0], [0.25, 0.0, 1.0]]))
    assert levels == [1.0, 0.5, 0.25]
    assert ranks.tolist() == [[1, 2, 3], [2, 1, 0], [3, 0, 1]]


def test_candidate_ranks_with_unfilled_bank_slots() -> None:
    anchors = torch.tensor([0, 3])
    candidates = torch.tensor([1, -1, 0, 2, 4, -1])
    out = candidate_ranks(EXPECTED_RANKS, anchors, candidates)
    assert out.dtype == torch.int64
    assert out.tolist() == [[2, 0, 1, 0, 0, 0], [0, 0, 0, 2, 0, 0]]
