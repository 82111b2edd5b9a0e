"""kNN positive mining: hand-made neighbourhoods, self-exclusion with duplicates, chunk invariance,
faiss = torch, and the per-sample uniform draw."""

from __future__ import annotations

import math

import pytest
import torch

from semcl.data.semantics.neighbours import draw_neighbours, knn_table

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py


def _circle(degrees: list[float], norms: list[float]) -> torch.Tensor:
    rad = [math.radians(d) for d in degrees]
    return torch.tensor([[r * math.cos(a), r * math.sin(a), 0.0] for a, r in zip(rad, norms, strict=True)])


def test_known_neighbours_on_a_circle():
    # angles 0, 10, 25, 90, 100, 180 degrees; cosine ranks by angular distance, norms must not matter
    feats = _circle([0, 10, 25, 90, 100, 180], [1.0, 3.0, 0.5, 2.0, 7.0, 1.5])
    expected = torch.tensor([[1, 2], [0, 2], [1, 0], [4, 2], [3, 2], [4, 3]])
    table = knn_table(feats, 2)
    assert table.dtype == torch.int64 and table.shape == (6, 2)
    assert torch.equal(table, expected)


def test_self_is_never_a_neighbour_even_with_duplicates():
    feats = torch.ones(5, 4)                                   # five identical features
    table = knn_table(feats, 4)
    for i in range(5):
        assert sorted(table[i].tolist()) == [j for j in range(5) if j != i]
    # two twin pairs plus a far point: each twin's nearest neighbour is its twin, never itself
    feats = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [-1.0, -0.1]])
    table = knn_table(feats, 1, query_chunk=2, key_chunk=3)
    assert table[:, 0].tolist()[:4] == [1, 0, 3, 2]
    assert (table != torch.arange(5)[:, None]).all()


def _brute_force(feats: torch.Tensor, k: int) -> torch.Tensor:
    v = torch.nn.functional.normalize(feats.double(), dim=1)
    s = v @ v.T
    s.fill_diagonal_(float("-inf"))
    return s.argsort(dim=1, descending=True)[:, :k]


@pytest.mark.parametrize("query_chunk,key_chunk", [(1, 1), (5, 3), (7, 100), (37, 37), (100, 8)])
def test_chunk_sizes_do_not_change_the_table(query_chunk, key_chunk):
    feats = torch.randn(37, 8, generator=torch.Generator().manual_seed(0))
    table = knn_table(feats, 5, query_chunk=query_chunk, key_chunk=key_chunk)
    assert torch.equal(table, _brute_force(feats, 5))


def test_faiss_backend_gives_the_torch_table():
    pytest.importorskip("faiss")
    feats = torch.randn(60, 16, generator=torch.Generator().manual_seed(1)) * 3.0
    assert torch.equal(knn_table(feats, 7, backend="faiss"), knn_table(feats, 7))
    dup = torch.ones(4, 3)
    table = knn_table(dup, 3, backend="faiss")
    for i in range(4):
        assert sorted(table[i].tolist()) == [j for j in range(4) if j != i]


def test_bad_inputs():
    with pytest.raises(ValueError, match="more than k=3"):
        knn_table(torch.randn(3, 2), 3)
    with pytest.raises(ValueError, match="unknown kNN backend"):
        knn_table(torch.randn(5, 2), 1, backend="annoy")


def test_draw_neighbours_is_uniform_and_follows_the_generator():
    table = torch.tensor([[1, 2, 3], [2, 3, 0], [3, 0, 1], [0, 1, 2]])
    drawn = draw_neighbours(table, torch.Generator().manual_seed(5))
    cols = torch.randint(3, (4,), generator=torch.Generator().manual_seed(5))
    assert torch.equal(drawn, table[torch.arange(4), cols])
    # a subset of samples by training-set position
    idx = torch.tensor([3, 1])
    sub = draw_neighbours(table, torch.Generator().manual_seed(5), idx)
    assert torch.equal(sub, table[idx, cols[:2]])
    # uniform over the k columns: 30000 draws of row 0, each column within 3 sd of 1/3
    big = table[[0] * 30000]
    counts = torch.bincount(draw_neighbours(big, torch.Generator().manual_seed(0)), minlength=4)
    sd = math.sqrt(30000 * (1 / 3) * (2 / 3))
    assert counts[0] == 0 and all(abs(int(c) - 10000) < 3 * sd for c in counts[1:])
