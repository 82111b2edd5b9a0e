"""Sharded kNN mining (semcl.data.semantics.knn_shards): the chunk size a memory budget gives, the single-process table
unchanged against the code before sharding, 2 gloo ranks giving the single-process table bit for bit (ties
and N not divisible by the ranks included), and a stop between chunks."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from semcl.data.semantics import knn_shards
from semcl.data.semantics.knn_shards import query_chunk, sharded_knn_table
from semcl.data.semantics.neighbours import knn_table
from semcl.runtime import distributed

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py

N, K = 23, 5


def _tied(n: int = N, seed: int = 0) -> torch.Tensor:
    """Features in {-1, 0, 1}^4 (no zero rows) plus a duplicate of row 0: many cosines are equal, so the
    order of ties decides which neighbours make the table."""
    f = torch.randint(-1, 2, (n - 1, 4), generator=torch.Generator().manual_seed(seed)).float()
    f[f.abs().sum(1) == 0] = 1.0
    return torch.cat([f, f[:1]])


def _knn_before_sharding(features: torch.Tensor, k: int, query_chunk: int, key_chunk: int) -> torch.Tensor:
    """semcl.data.semantics.neighbours._knn_torch as it was before sharded mining (commit 5685ff8), verbatim."""
    v = F.normalize(features.float(), dim=1)
    n = v.shape[0]
    out = torch.empty(n, k, dtype=torch.long, device=v.device)
    for q0 in range(0, n, query_chunk):
        q = v[q0:q0 + query_chunk]
        rows = torch.arange(q0, q0 + q.shape[0], device=v.device)
        best_s = torch.full((q.shape[0], 0), float("-inf"), device=v.device)
        best_i = torch.empty((q.shape[0], 0), dtype=torch.long, device=v.device)
        for c0 in range(0, n, key_chunk):
            s = q @ v[c0:c0 + key_chunk].T
            cols = torch.arange(c0, c0 + s.shape[1], device=v.device)
            own = rows[(rows >= c0) & (rows < c0 + s.shape[1])]
            s[own - q0, own - c0] = float("-inf")
            s_top, i_top = s.topk(min(k, s.shape[1]), dim=1)
            if best_s.shape[1] == 0:
                best_s, best_i = s_top, cols[i_top]
                continue
            cand_s = torch.cat([best_s, s_top], dim=1)
            cand_i = torch.cat([best_i, cols[i_top]], dim=1)
            best_s, pos = cand_s.topk(min(k, cand_s.shape[1]), dim=1)
            best_i = cand_i.gather(1, pos)
        out[q0:q0 + q.shape[0]] = best_i
    return out


def _budget(rows: int, keys: int = N) -> int:
    """The budget that gives `rows` query rows against blocks of `keys` columns of the N-row bank (8 bytes per
    similarity: two float32 blocks)."""
    return rows * 8 * min(keys, N)


def test_the_budget_sets_the_query_chunk():
    assert query_chunk(2 * 2**30, 1_281_167) == 4096  # ImageNet at the CPU default: 2 GiB / (8 B x 65536)
    assert query_chunk(2**30, 1_281_167) == 2048
    assert query_chunk(2 * 2**30, 1000) == 4096  # never above the grid of the official tables
    assert query_chunk(8 * 100 * 7 + 799, 100) == 7  # 800 bytes a row (100 keys, two float32 blocks)
    assert query_chunk(10, 100) == 1  # one row at least, whatever the budget
    assert query_chunk(8 * 10 * 3, 1000, key_chunk=10) == 3  # key blocks of 10 columns


def test_the_table_is_the_one_mined_before_sharding_ties_included():
    feats = _tied()
    v = F.normalize(feats, dim=1)
    s = (v @ v.T).fill_diagonal_(float("-inf")).sort(dim=1, descending=True).values
    assert (s[:, K - 1] == s[:, K]).sum() >= 5  # ties at the k-th place: their order decides the table
    for q, c in [(4096, 65536), (1, 65536), (4, 7), (5, 3), (23, 1)]:
        old = _knn_before_sharding(feats, K, q, c)
        assert torch.equal(knn_table(feats, K, query_chunk=q, key_chunk=c), old), (q, c)
        assert torch.equal(sharded_knn_table(feats.clone(), K, budget_bytes=_budget(q, c), key_chunk=c), old), (q, c)
    # the default budget on the CPU: the old default grid (4096 x 65536)
    assert torch.equal(sharded_knn_table(feats.clone(), K), _knn_before_sharding(feats, K, 4096, 65536))


def test_a_stop_between_chunks_abandons_the_mining(monkeypatch):
    done = []
    real = knn_shards.knn_rows
    monkeypatch.setattr(knn_shards, "knn_rows", lambda v, q0, q1, *a: done.append((q0, q1)) or real(v, q0, q1, *a))
    asked = []
    table = sharded_knn_table(_tied(), K, budget_bytes=_budget(5), stop=lambda: asked.append(1) or len(asked) == 3)
    assert table is None and done == [(0, 5), (5, 10)] and len(asked) == 3  # asked before the third chunk
    done.clear()
    assert sharded_knn_table(_tied(), K, budget_bytes=_budget(5), stop=lambda: False) is not None
    assert done == [(0, 5), (5, 10), (10, 15), (15, 20), (20, 23)]


def test_fast_computes_the_block_in_tf32_and_restores_the_setting():
    seen = []
    real = knn_shards.knn_rows

    def spy(*a):
        seen.append(torch.get_float32_matmul_precision())
        return real(*a)

    knn_shards.knn_rows, before = spy, torch.get_float32_matmul_precision()
    try:
        sharded_knn_table(_tied(), K, fast=True)
        sharded_knn_table(_tied(), K)
    finally:
        knn_shards.knn_rows = real
    assert seen == ["high", before] and torch.get_float32_matmul_precision() == before


# (rows per chunk, key columns per block): 6 chunks (3 a rank); 5 chunks (rank 1: 2 and an idle turn);
# one chunk (rank 1 idle); single-row chunks over 3 key blocks
CASES = [(4, 65536), (5, 65536), (4096, 65536), (1, 10)]


def _worker(rank: int, init: str, out: str) -> None:
    torch.set_num_threads(1)  # the parent's kernels, so the same blocks give the same bits
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    feats = _tied()
    tables = [sharded_knn_table(feats.clone(), K, budget_bytes=_budget(r, c), key_chunk=c) for r, c in CASES]
    # rank 1 wants to stop at its second question: both ranks stop there, one chunk done each
    done, asked = [], []
    real = knn_shards.knn_rows
    knn_shards.knn_rows = lambda v, q0, q1, *a: done.append(q0) or real(v, q0, q1, *a)
    stopped = sharded_knn_table(feats.clone(), K, budget_bytes=_budget(4), stop=lambda: distributed.any_rank(
        asked.append(1) or (rank == 1 and len(asked) == 2), torch.device("cpu")))
    torch.save({"tables": tables, "stopped": stopped, "done": done, "asked": len(asked)}, f"{out}/rank{rank}.pt")
    dist.destroy_process_group()


def test_two_gloo_ranks_gather_the_single_process_table(tmp_path):
    mp.spawn(_worker, args=(f"file://{tmp_path}/init", str(tmp_path)), nprocs=2, join=True)
    feats = _tied()
    expected = [knn_table(feats, K, query_chunk=r, key_chunk=c) for r, c in CASES]
    for rank in (0, 1):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        for (r, c), table, want in zip(CASES, got["tables"], expected, strict=True):
            assert table.shape == (N, K) and torch.equal(table, want), (rank, r, c)
        assert got["stopped"] is None and got["asked"] == 2
        assert got["done"] == [[0], [12]][rank]  # chunk 0 on rank 0, chunk 3 (rows 12-15) on rank 1
