"""Nearest-neighbour positives over a whole training set (HSA / CsMl, docs/papers/hsa.md §c.2).

Every ``refresh`` epochs HSA encodes all N training images with a deterministic view, L2-normalises the
features and keeps, for each image, its k most cosine-similar *other* images as an ``int64 [N, k]`` table.
During the epoch each sample draws one of its k neighbours uniformly as its extra positive.

Similarity: s_ij = <v_i, v_j> / (|v_i| |v_j|); the official code runs an exact L2 search on unit vectors
(faiss ``IndexFlatL2``), which ranks identically since |v_i - v_j|^2 = 2 - 2 s_ij.

Self-removal: the official code searches k + 1 and drops column 0, assuming it is the query itself; with
duplicate features that column can be a twin, leaving the query in its own list. Here self is excluded by
*index* (the diagonal is masked before the top-k), so image i is never its own neighbour, while an exact
duplicate j != i is a legitimate (maximally similar) neighbour.

Ties between equal similarities are broken as torch.topk orders them inside one similarity block (faiss:
as faiss does). That order is a fixed function of the block, so whoever computes the same blocks gets the
same table: the query-chunk grid is part of the computation, and sharded mining keeps it
(semcl.data.semantics.knn_shards).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

BACKENDS = ("torch", "faiss")
# the similarity block of the torch backend: rows (queries) x columns (keys). The query chunk is also the
# grid that sharded mining keeps (semcl.data.semantics.knn_shards), so every process computes the same blocks.
QUERY_CHUNK, KEY_CHUNK = 4096, 65536


def check_inputs(features: torch.Tensor, k: int) -> None:
    if features.ndim != 2:
        raise ValueError(f"features must be [N, D], got shape {tuple(features.shape)}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if features.shape[0] <= k:
        raise ValueError(f"need more than k={k} samples to find k neighbours, got N={features.shape[0]}")


@torch.no_grad()
def knn_table(
    features: torch.Tensor,
    k: int,
    *,
    backend: str = "torch",
    query_chunk: int = QUERY_CHUNK,
    key_chunk: int = KEY_CHUNK,
) -> torch.Tensor:
    """Indices of each sample's k most cosine-similar other samples, nearest first.

    Args:
        features: ``[N, D]`` features of the whole training set (any scale; normalised here).
        k: neighbours per sample (paper 10, official code 5).
        backend: ``"torch"`` (chunked matrix products on ``features.device``) or ``"faiss"`` (exact
            ``IndexFlatIP`` on the CPU; needs faiss-cpu).
        query_chunk, key_chunk: rows / columns of each similarity block; peak memory is one
            ``[query_chunk, key_chunk]`` float32 block. The table does not depend on them beyond the order of
            similarities that agree to within fp32 rounding (module docstring).

    Returns:
        ``int64 [N, k]`` on the CPU; row i never contains i.
    """
    check_inputs(features, k)
    if backend == "torch":
        table = _knn_torch(features, k, query_chunk, key_chunk)
    elif backend == "faiss":
        table = _knn_faiss(features, k)
    else:
        raise ValueError(f"unknown kNN backend {backend!r}; known: {', '.join(BACKENDS)}")
    return table.cpu()


def unit_rows(features: torch.Tensor, *, inplace: bool = False) -> torch.Tensor:
    """Rows scaled to unit L2 norm in float32, the same arithmetic as ``F.normalize`` (bit for bit);
    `inplace` divides a float32 `features` in place, so a gathered bank is not held twice."""
    v = features.float()
    denom = v.norm(2, 1, keepdim=True).clamp_min(1e-12)
    return v.div_(denom) if inplace and v is features else v / denom


def knn_rows(v: torch.Tensor, q0: int, q1: int, k: int, key_chunk: int = KEY_CHUNK) -> torch.Tensor:
    """The k most similar other rows of unit-norm `v` for query rows ``q0:q1``, nearest first: one query
    chunk of the table, ``int64 [q1 - q0, k]`` on `v`'s device. Peak memory is one ``[q1 - q0, key_chunk]``
    block of similarities; a row's result depends on `v`, its chunk ``q0:q1`` and `key_chunk` alone, so any
    process that runs the same chunk gets the same rows (semcl.data.semantics.knn_shards)."""
    n = v.shape[0]
    q = v[q0:q1]
    rows = torch.arange(q0, q0 + q.shape[0], device=v.device)
    best_s = torch.full((q.shape[0], 0), float("-inf"), device=v.device)
    best_i = torch.empty((q.shape[0], 0), dtype=torch.long, device=v.device)
    for c0 in range(0, n, key_chunk):
        s = q @ v[c0:c0 + key_chunk].T                      # [R, C] cosine similarities
        cols = torch.arange(c0, c0 + s.shape[1], device=v.device)
        # self, by index: the rows of this query chunk whose own column falls in this key block (an
        # indexed write, not an [R, C] comparison, which cost as much as the top-k)
        # (the overlap of two index ranges, computed in Python: no value-dependent shape, so the preflight
        # runs this search on fake tensors, semcl.preflight.fake)
        own = rows[max(q0, c0) - q0:max(min(q0 + q.shape[0], c0 + s.shape[1]), max(q0, c0)) - q0]
        s[own - q0, own - c0] = float("-inf")
        # merge this block's candidates with the running best k (top-k of a union = top-k of the
        # per-part top-ks), so memory stays one block whatever N is
        s_top, i_top = s.topk(min(k, s.shape[1]), dim=1)
        if best_s.shape[1] == 0:  # the first block: nothing to merge with
            best_s, best_i = s_top, cols[i_top]
            continue
        cand_s = torch.cat([best_s, s_top], dim=1)
        cand_i = torch.cat([best_i, cols[i_top]], dim=1)
        best_s, pos = cand_s.topk(min(k, cand_s.shape[1]), dim=1)
        best_i = cand_i.gather(1, pos)
    return best_i


def _knn_torch(features: torch.Tensor, k: int, query_chunk: int, key_chunk: int) -> torch.Tensor:
    if query_chunk < 1 or key_chunk < 1:
        raise ValueError(f"chunk sizes must be positive, got query_chunk={query_chunk}, key_chunk={key_chunk}")
    v = unit_rows(features)
    n = v.shape[0]
    out = torch.empty(n, k, dtype=torch.long, device=v.device)
    for q0 in range(0, n, query_chunk):
        out[q0:q0 + query_chunk] = knn_rows(v, q0, min(n, q0 + query_chunk), k, key_chunk)
    return out


def _knn_faiss(features: torch.Tensor, k: int) -> torch.Tensor:
    try:
        import faiss
    except ImportError:
        raise ImportError("the faiss kNN backend needs faiss-cpu: pip install 'semcl[faiss]'") from None
    import numpy as np

    v = np.ascontiguousarray(F.normalize(features.float(), dim=1).cpu().numpy())
    index = faiss.IndexFlatIP(v.shape[1])                       # inner product on unit vectors = cosine
    index.add(v)
    _, found = index.search(v, k + 1)                           # k + 1: room for self
    n = v.shape[0]
    found_t = torch.from_numpy(found.astype(np.int64))
    is_self = found_t == torch.arange(n)[:, None]
    # drop self wherever it was returned; where a duplicate pushed it out, drop the last (k+1-th) column
    no_self = ~is_self.any(dim=1)
    is_self[no_self, k] = True
    return found_t[~is_self].view(n, k)


def draw_neighbours(
    table: torch.Tensor, generator: torch.Generator, indices: torch.Tensor | None = None
) -> torch.Tensor:
    """One neighbour per sample, uniform over its k table entries (docs/papers/hsa.md §c.2, official dataset).

    Args:
        table: ``int64 [N, k]`` from :func:`knn_table`.
        generator: CPU generator (the epoch's, so a resumed run draws the same neighbours).
        indices: samples to draw for (positions in the training set); all N when ``None``.

    Returns:
        ``int64`` tensor of neighbour indices, one per requested sample, on the table's device.
    """
    if table.ndim != 2 or table.shape[1] < 1:
        raise ValueError(f"table must be [N, k] with k >= 1, got shape {tuple(table.shape)}")
    rows = table if indices is None else table[indices.to(table.device)]
    col = torch.randint(table.shape[1], (rows.shape[0],), generator=generator).to(table.device)
    return rows.gather(1, col[:, None]).squeeze(1)


def pick_neighbours(table: torch.Tensor, m: int, row: int, generator: torch.Generator) -> list[int]:
    """`m` distinct neighbours of training image `row`, uniform over its k entries of `table` (the file
    loader's pick, one image at a time; semcl.data.views.file_views): m = 1 one uniform draw, else the first m
    of a uniform permutation of the k, as `HSA._several_neighbour_views` draws them for a batch."""
    k = table.shape[1]
    if not 1 <= m <= k:
        raise ValueError(f"cannot pick {m} distinct neighbours of {k}")
    if m == 1:
        return [int(table[row, int(torch.randint(k, (1,), generator=generator))])]
    return table[row, torch.rand(k, generator=generator).argsort()[:m]].tolist()
