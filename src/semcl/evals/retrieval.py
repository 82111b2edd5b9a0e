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

from semcl.evals._inputs import feature_matrix

ArrayLike = torch.Tensor | np.ndarray




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
            ``8 * chunk_size * N`` bytes in float32 (similarities and their sorted copy;
            twice that in float64) on top of normalised copies of both feature sets.
            The result does not depend on it (see the note on chunking in the code).
        return_curve: also return the mean PR curve.

    Returns:
        ``{"R@k": ..., "AP": ...}`` with values in ``[0, 1]``; with ``return_curve``,
        ``(scores, {"precision": P, "recall": R})`` where ``P[i - 1]``, ``R[i - 1]``
        are the float64 mean precision and recall at cutoff ``i``.
    """
    q = feature_matrix(queries, "queries")
    db = feature_matrix(database, "database")
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
    n_q_total, n_db = q.shape[0], db.shape[0]
    q_lab_np = q_lab.cpu().numpy()
    db_lab_np = db_lab.cpu().numpy()

    # Database items of each label, in index order; n_q = how many share the query's label.
    db_order = np.argsort(db_lab_np, kind="stable")
    uniq, first, counts = np.unique(db_lab_np[db_order], return_index=True, return_counts=True)
    members = {int(u): db_order[f : f + c] for u, f, c in zip(uniq, first, counts, strict=True)}
    slot = np.searchsorted(uniq, q_lab_np).clip(max=uniq.size - 1)
    n_rel = np.where(uniq[slot] == q_lab_np, counts[slot], 0).astype(np.int64)

    # How the mean curve is built without ranking every database item of every query:
    # a query's hit curve hits_q(i) only changes at the ranks of its n_q relevant items, so
    # the sums over queries that P_i and R_i need are cumulative histograms of those ranks.
    # The rank of relevant item j (0-based, ties in database-index order, as a stable sort
    # would put them) is  #{k : s_k > s_j} + #{k < j : s_k == s_j}.  The first count comes
    # from a binary search in the row's sorted similarities (a values-only sort, which
    # NumPy runs with SIMD and which is much faster than an argsort with a stable index
    # payload); the second is 0 unless s_j occurs more than once in the row, which is
    # rare with float features and is then counted exactly (see _tied_before).
    #
    # Queries are visited grouped by n_q. Within a group the recall numerator
    # sum_q hits_q(i) is an exact integer; it is divided by n_q once per group, in a
    # fixed order. Hence all accumulation is independent of chunk_size and results
    # are bit-identical across chunkings. The one caveat: BLAS may round the
    # similarity product differently for different chunk shapes (last bit), which
    # could only reorder items whose similarities agree to within one ulp.
    order = np.argsort(n_rel, kind="stable")
    n_sorted = n_rel[order]
    rel_total = np.zeros(n_db, dtype=np.int64)  # sum_q [rank i relevant for q]
    rel_group = np.zeros(n_db, dtype=np.int64)  # same, current group of equal n_q
    recall_sum = np.zeros(n_db, dtype=np.float64)
    cutoffs = np.array([min(k, n_db) for k in ks], dtype=np.int64)
    hit_counts = np.zeros(len(ks), dtype=np.int64)
    order_t = torch.from_numpy(order).to(device)

    for start in range(0, n_q_total, chunk_size):
        idx = order_t[start : start + chunk_size]
        sims = (q[idx] @ db.T).cpu().numpy()
        ascending = np.sort(sims, axis=1)
        ranks: list[np.ndarray] = []
        for row, qi in enumerate(order[start : start + chunk_size].tolist()):
            rel_idx = members.get(int(q_lab_np[qi]))
            if rel_idx is None:
                ranks.append(np.empty(0, dtype=np.int64))
                continue
            vals = sims[row, rel_idx]
            below_or_equal = np.searchsorted(ascending[row], vals, side="right")
            rank = n_db - below_or_equal  # items strictly more similar
            equal = below_or_equal - np.searchsorted(ascending[row], vals, side="left")
            tied = equal > 1
            if tied.any():
                rank[tied] += _tied_before(sims[row], rel_idx[tied])
            ranks.append(rank)
            hit_counts += rank.min() < cutoffs
        del sims, ascending
        n_chunk = n_sorted[start : start + chunk_size]
        values, begins, sizes = np.unique(n_chunk, return_index=True, return_counts=True)
        for n_val, begin, size in zip(values.tolist(), begins.tolist(), sizes.tolist(), strict=True):
            if n_val == 0:
                continue  # no relevant items: nothing to count, recall is 0
            col = np.bincount(np.concatenate(ranks[begin : begin + size]), minlength=n_db)
            rel_total += col
            rel_group += col
            end = start + begin + size
            if end == n_q_total or int(n_sorted[end]) != n_val:
                # Cumulating the summed relevance gives sum_q hits_q(i) for the group.
                recall_sum += np.cumsum(rel_group) / n_val
                rel_group[:] = 0

    ranks_1 = np.arange(1, n_db + 1, dtype=np.float64)
    precision = np.cumsum(rel_total) / ranks_1 / n_q_total
    recall = recall_sum / n_q_total
    ap = float(((recall[1:] - recall[:-1]) * precision[1:]).sum())

    scores = {f"R@{k}": int(hits) / n_q_total for k, hits in zip(ks, hit_counts, strict=True)}
    scores["AP"] = ap
    if not return_curve:
        return scores
    return scores, {"precision": precision, "recall": recall}


def _tied_before(row: np.ndarray, items: np.ndarray) -> np.ndarray:
    """For each index j in ``items``: #{k < j : row[k] == row[j]} (exact, O(N log N) at most).

    The candidates are every entry whose value equals one of the items' values; ordering
    them by (value, index) puts each tie group in index order, so an item's offset from
    the start of its group is the number of equal entries before it.
    """
    cand = np.flatnonzero(np.isin(row, row[items]))  # ascending indices
    cand_vals = row[cand]
    by_value = np.lexsort((cand, cand_vals))
    sorted_vals = cand_vals[by_value]
    offset = np.empty(cand.size, dtype=np.int64)
    offset[by_value] = np.arange(cand.size) - np.searchsorted(sorted_vals, sorted_vals, side="left")
    return offset[np.searchsorted(cand, items)]
