"""HSA's kNN table mined in shards: each rank searches its part of the query rows against the whole feature
bank, and the ranks all-gather the ``[N, k]`` table, so every rank holds the same one.

Grid. The rows are cut into query chunks of R rows from row 0, the grid `knn_table(query_chunk=R)` runs
over, and each rank takes a contiguous run of whole chunks, ceil(chunks / world) of them (the last ranks may
have fewer). A chunk's rows are a function of the bank, the chunk and the key blocks alone
(`semcl.data.semantics.neighbours.knn_rows`), so the gathered table is the single-process table bit for bit, ties
included, wherever the processes run the same kernels (one device type, library and thread count).

Chunk size. R = min(QUERY_CHUNK, budget // bytes of one query row's blocks), agreed on every rank (the
smallest). The budget defaults to half of what the GPU's allocator can still hand out (free memory plus its
cached blocks: the rest is for fragmentation and the next epoch), CPU_BUDGET on the CPU. Any budget that
holds one 4096-row block (2 GiB at the default 65536 key columns, every CPU and any GPU with room) gives
R = QUERY_CHUNK, the grid tables were mined on before sharding: official-precision tables are unchanged. A
smaller budget changes the grid, which can only reorder similarities that agree to within fp32 rounding.

Stop. Before each chunk every rank asks `stop` (a collective under DDP: every rank calls it the same number
of times, also a rank that has run out of chunks); True abandons the mining (None), so the training loop can
checkpoint and act on a requeue signal. Mining is deterministic from the checkpointed state: a resumed run
mines again and gets the same table.

Precision. `fast` (optim.precision) runs the similarity products in TF32, which only rank; official keeps
full fp32.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from semcl.data.semantics.neighbours import KEY_CHUNK, QUERY_CHUNK, check_inputs, knn_rows, unit_rows
from semcl.runtime import distributed

GPU_FRACTION = 0.5  # of the GPU memory the allocator can still hand out
CPU_BUDGET = 2 * 2**30  # bytes: one 4096 x 65536 block, twice
BLOCKS_PER_ROW = 2  # a query row's similarity block and the top-k's working set, counted as a second block


def memory_budget(device: torch.device) -> int:
    """Bytes one query chunk's similarity blocks may take on `device` (module docstring)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(GPU_FRACTION * (free + cached))
    return CPU_BUDGET


def query_chunk(budget_bytes: int, n: int, key_chunk: int = KEY_CHUNK) -> int:
    """Query rows per chunk under `budget_bytes`: at least 1, at most QUERY_CHUNK (the grid of the official
    tables)."""
    per_row = BLOCKS_PER_ROW * 4 * min(n, key_chunk)  # float32 similarities
    return max(1, min(QUERY_CHUNK, budget_bytes // per_row))


@contextmanager
def _matmul_precision(fast: bool) -> Iterator[None]:
    """TF32 products inside the block under `fast`; the process's setting comes back after."""
    before = torch.get_float32_matmul_precision()
    if fast:
        torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


@torch.no_grad()
def sharded_knn_table(
    features: torch.Tensor,
    k: int,
    *,
    budget_bytes: int | None = None,
    key_chunk: int = KEY_CHUNK,
    fast: bool = False,
    stop: Callable[[], bool] | None = None,
) -> torch.Tensor | None:
    """The table of `semcl.data.semantics.neighbours.knn_table` (torch backend), this rank's query chunks computed here
    and the rest gathered from the other ranks (module docstring).

    Args:
        features: ``[N, D]`` features of the whole training set, the same on every rank. A float32 tensor
            is normalised in place (the bank is not held twice).
        k: neighbours per sample.
        budget_bytes: memory for one query chunk's blocks; None: `memory_budget` of the features' device.
        key_chunk: columns per similarity block.
        fast: TF32 similarity products (optim.precision fast).
        stop: asked before each chunk, on every rank alike; True abandons the mining.

    Returns:
        ``int64 [N, k]`` on the CPU, row i never i; None when `stop` abandoned it.
    """
    check_inputs(features, k)
    if key_chunk < 1:
        raise ValueError(f"key_chunk must be positive, got {key_chunk}")
    v = unit_rows(features, inplace=True)
    n, device = v.shape[0], v.device
    budget = memory_budget(device) if budget_bytes is None else budget_bytes
    rows = distributed.min_over_ranks(query_chunk(budget, n, key_chunk), device)
    chunks = math.ceil(n / rows)
    per_rank = math.ceil(chunks / distributed.world_size())
    first = distributed.rank() * per_rank
    part = torch.zeros(per_rank * rows, k, dtype=torch.long, device=device)  # the last ranks' tail: padding
    with _matmul_precision(fast):
        for j in range(per_rank):
            if stop is not None and stop():
                return None
            if first + j >= chunks:  # no chunk left here; the stop question above is still asked
                continue
            q0 = (first + j) * rows
            q1 = min(n, q0 + rows)
            part[j * rows:j * rows + q1 - q0] = knn_rows(v, q0, q1, k, key_chunk)
    # rank r's chunks sit at rows r * per_rank * rows on: the gathered rows are the grid's, padding after row n
    return distributed.gather_rows(part)[:n].cpu()
