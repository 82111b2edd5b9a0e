"""Image retrieval by cosine similarity: recall@k and AP of the mean PR curve.

Protocol of RINCE's retrieval evaluation: the test set is the query set, the training
set is the database, and a database item is relevant to a query when it has the same
label (fine or coarse labels, whichever the caller passes). Features are L2-normalised
and every query ranks the whole database by cosine similarity.

Definitions, for a query ``q`` with ``n_q`` relevant database items and
``hits_q(i)`` relevant items among its first ``i`` results (``i = 1..N``):

* ``R@k`` = share of queries with at least one relevant item in their top ``k``
  (a hit rate, not precision@k); ``k > N`` is treated as ``k = N``.
* mean precision ``P_i = mean_q hits_q(i) / i`` and mean recall
  ``R_i = mean_q hits_q(i) / n_q``; both are averaged over *all* queries.
* ``AP = sum_{i=2..N} (R_i - R_{i-1}) * P_i``: area under the mean PR curve, with the
  sum starting at ``i = 2`` exactly as the official script computes it (the first
  step, ``R_1 * P_1``, is left out). This is not the mean of per-query APs.

Conventions the paper leaves open:

* Ties in similarity are ordered by database index (a stable sort), so results do not
  depend on the sorting backend.
* A query whose label does not occur in the database (``n_q = 0``) has recall 0 at
  every cutoff and no hit for any ``R@k``, and still counts in every mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, overload

import numpy as np
import torch
import torch.nn.functional as F

ArrayLike = torch.Tensor | np.ndarray


def _features(x: ArrayLike, name: str) -> torch.Tensor:
    t = torch.as_tensor(x)
    if t.ndim != 2 or t.shape[0] == 0 or t.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array [N, D], got shape {tuple(t.shape)}")
    if t.dtype != torch.float64:
        t = t.float()
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or inf")
    return t


def _labels(y: ArrayLike, n: int, name: str) -> torch.Tensor:
    t = torch.as_tensor(y)
    if t.ndim != 1 or t.shape[0] != n:
        raise ValueError(f"{name} must be 1-D with {n} entries, got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer labels, got {t.dtype}")
    return t.long()


def _check_ks(ks: Sequence[int]) -> list[int]:
    ks = list(ks)
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"ks must be a non-empty sequence of positive ints, got {ks!r}")
    if len(set(ks)) != len(ks):
        raise ValueError(f"ks must not repeat a value, got {ks!r}")
    return ks


@overload
def retrieval_scores(
    queries: ArrayLike,
    query_labels: ArrayLike,
    database: ArrayLike,
    database_labels: ArrayLike,
    ks: Sequence[int] = ...,
    *,
    chunk_size: int = ...,
    return_curve: Literal[False] = ...,
) -> dict[str, float]: ...


@overload
def retrieval_scores(
    queries: ArrayLike,
    query_labels: ArrayLike,
    database: ArrayLike,
    database_labels: ArrayLike,
    ks: Sequence[int] = ...,
    *,
    chunk_size: int = ...,
    return_curve: Literal[True],
) -> tuple[dict[str, float], dict[str, np.ndarray]]: ...


def retrieval_scores(
    queries: ArrayLike,
    query_labels: ArrayLike,
    database: ArrayLike,
    database_labels: ArrayLike,
    ks: Sequence[int] = (1, 5, 10, 20),
    *,
    chunk_size: int = 512,
    return_curve: bool = False,
) -> dict[str, float] | tuple[dict[str, float], dict[str, np.ndarray]]:
    """Recall@k and mean-PR-curve AP of cosine retrieval (see module docstring).

    Args:
        queries: query features ``[Q, D]`` (the test set), torch tensor or NumPy array.
        query_labels: integer labels ``[Q]``.
        database: database features ``[N, D]`` (the training set).
        database_labels: integer labels ``[N]``.
        ks: cutoffs for ``R@k``; the result keys follow their order.
        chunk_size: queries ranked at a time; the working memory is about
            ``16 * chunk_size * N`` bytes (similarities, sort output, relevance) on top
            of normalised copies of both feature sets. The result does not depend on
            it (see the note on chunking in the code).
        return_curve: also return the mean PR curve.

    Returns:
        ``{"R@k": ..., "AP": ...}`` with values in ``[0, 1]``; with ``return_curve``,
        ``(scores, {"precision": P, "recall": R})`` where ``P[i - 1]``, ``R[i - 1]``
        are the float64 mean precision and recall at cutoff ``i``.
    """
    q = _features(queries, "queries")
    db = _features(database, "database")
    if q.shape[1] != db.shape[1]:
        raise ValueError(f"queries have {q.shape[1]} dims but database has {db.shape[1]}")
    q_lab = _labels(query_labels, q.shape[0], "query_labels")
    db_lab = _labels(database_labels, db.shape[0], "database_labels")
    ks = _check_ks(ks)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")

    # Float64 inputs keep float64 similarities (useful for reference checks); anything
    # else is ranked in float32, which is what the features are stored in.
    dtype = torch.float64 if torch.float64 in (q.dtype, db.dtype) else torch.float32
    device = q.device
    q = F.normalize(q.to(dtype), dim=1)
    db = F.normalize(db.to(device=device, dtype=dtype), dim=1)
    q_lab, db_lab = q_lab.to(device), db_lab.to(device)
    n_q_total, n_db = q.shape[0], db.shape[0]

    # n_q: database items sharing each query's label (0 if the label is absent).
    uniq, counts = torch.unique(db_lab, return_counts=True)
    slot = torch.searchsorted(uniq, q_lab).clamp(max=uniq.numel() - 1)
    n_rel = torch.where(uniq[slot] == q_lab, counts[slot], torch.zeros_like(counts[slot]))

    # Visit queries grouped by n_q. Within a group the recall numerator
    # sum_q hits_q(i) is an exact integer; it is divided by n_q once per group, in a
    # fixed order. Hence all accumulation is independent of chunk_size and results
    # are bit-identical across chunkings. The one caveat: BLAS may round the
    # similarity product differently for different chunk shapes (last bit), which
    # could only reorder items whose similarities agree to within one ulp.
    order = torch.argsort(n_rel, stable=True)
    n_sorted = n_rel[order]
    rel_total = torch.zeros(n_db, dtype=torch.int64, device=device)  # sum_q rel_q(rank i)
    rel_group = torch.zeros(n_db, dtype=torch.int64, device=device)  # same, current group
    recall_sum = torch.zeros(n_db, dtype=torch.float64, device=device)
    hit_counts = [0] * len(ks)
    cutoffs = [min(k, n_db) for k in ks]

    for start in range(0, n_q_total, chunk_size):
        idx = order[start : start + chunk_size]
        sims = q[idx] @ db.T
        # Stable descending sort: equal similarities stay in database-index order.
        ranked = torch.sort(sims, dim=1, descending=True, stable=True).indices
        del sims
        # Gather a bool relevance matrix rather than int64 labels: 8x less memory.
        rel = (q_lab[idx, None] == db_lab[None, :]).gather(1, ranked)
        del ranked
        # R@k from the sorted list (not topk) so ties at the cutoff follow the same
        # stable order as the AP computation.
        for j, k in enumerate(cutoffs):
            hit_counts[j] += int(rel[:, :k].any(dim=1).sum())
        n_chunk = n_sorted[start : start + chunk_size]
        values, sizes = torch.unique_consecutive(n_chunk, return_counts=True)
        offset = 0
        for n_val, size in zip(values.tolist(), sizes.tolist(), strict=True):
            col = rel[offset : offset + size].sum(dim=0)  # int64 [N]
            offset += size
            rel_total += col
            if n_val == 0:
                continue  # no relevant items: recall is 0 and col is all zero
            rel_group += col
            end = start + offset
            if end == n_q_total or int(n_sorted[end]) != n_val:
                # Cumulating the summed relevance gives sum_q hits_q(i) for the group.
                recall_sum += torch.cumsum(rel_group, dim=0).double() / n_val
                rel_group.zero_()

    ranks = torch.arange(1, n_db + 1, dtype=torch.float64, device=device)
    precision = torch.cumsum(rel_total, dim=0).double() / ranks / n_q_total
    recall = recall_sum / n_q_total
    ap = float(((recall[1:] - recall[:-1]) * precision[1:]).sum())

    scores = {f"R@{k}": hits / n_q_total for k, hits in zip(ks, hit_counts, strict=True)}
    scores["AP"] = ap
    if not return_curve:
        return scores
    curve = {"precision": precision.cpu().numpy(), "recall": recall.cpu().numpy()}
    return scores, curve
