"""Retrieval metrics against hand-computed rankings and a brute-force NumPy reference."""

import math

import numpy as np
import pytest
import torch

from semcl.evals.retrieval import retrieval_scores

S = math.sqrt(0.5)

# Database on the unit circle (two items deliberately not unit length, to check the
# L2 normalisation): index, direction, label
#   0: ( 1,   0 )      A=0
#   1: (cos30, sin30)  B=1
#   2: ( 0,   1 )      A
#   3: (-5,   0 )      B   -> (-1, 0)
#   4: ( 0,  -2 )      A   -> (0, -1)
DB = np.array([[1.0, 0.0], [math.cos(math.pi / 6), 0.5], [0.0, 1.0], [-5.0, 0.0], [0.0, -2.0]])
DB_LABELS = np.array([0, 1, 0, 1, 0])

# Queries and their cosine similarities to db 0..4:
#   q0 = (1, 0),   A: [1, .866, 0, -1, 0]        ranking 0,1,2,4,3 (2 before 4: tie, index
#                                                order)   relevance [1,0,1,1,0], n=3
#   q1 = (0, 2),   B: [0, .5, 1, 0, -1]          ranking 2,1,0,3,4 (tie 0 before 3)
#                                                          relevance [0,1,0,1,0], n=2
#   q2 = (-1, -1), A: [-.707, -.966, -.707, .707, .707]
#                                                ranking 3,4,0,2,1 (two ties)
#                                                          relevance [0,1,1,1,0], n=3
QUERIES = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, -1.0]])
Q_LABELS = np.array([0, 1, 0])

# hits_q(i), i = 1..5:  q0 1,1,2,3,3   q1 0,1,1,2,2   q2 0,1,2,3,3
# precision hits/i:     q0 1,1/2,2/3,3/4,3/5   q1 0,1/2,1/3,1/2,2/5   q2 0,1/2,2/3,3/4,3/5
# recall hits/n:        q0 1/3,1/3,2/3,1,1     q1 0,1/2,1/2,1,1       q2 0,1/3,2/3,1,1
MEAN_P = [1 / 3, 1 / 2, 5 / 9, 2 / 3, 8 / 15]
MEAN_R = [1 / 9, 7 / 18, 11 / 18, 1.0, 1.0]
# AP = sum_{i>=2} (R_i - R_{i-1}) P_i
#    = (5/18)(1/2) + (4/18)(5/9) + (7/18)(2/3) + 0 = 45/324 + 40/324 + 84/324
AP_HAND = 169 / 324
# Including the i=1 step R_1 P_1 = 1/27 would give 181/324; mean of per-query APs
# (precision at each relevant rank) is (29/36 + 1/2 + 23/36) / 3 = 35/54.
AP_FROM_I1 = 181 / 324
MEAN_PER_QUERY_AP = 35 / 54


def test_hand_case_recall_at_k_and_mean_curve_ap() -> None:
    scores, curve = retrieval_scores(QUERIES, Q_LABELS, DB, DB_LABELS, ks=(1, 2, 10), return_curve=True)
    # R@1: only q0's top item is relevant -> 1/3. R@2: every query has a hit by rank 2.
    # R@10 > N is clamped to N = 5.
    assert list(scores) == ["R@1", "R@2", "R@10", "AP"]
    assert scores["R@1"] == pytest.approx(1 / 3, abs=1e-12)
    assert scores["R@2"] == pytest.approx(1.0, abs=1e-12)
    assert scores["R@10"] == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(curve["precision"], MEAN_P, atol=1e-12)
    np.testing.assert_allclose(curve["recall"], MEAN_R, atol=1e-12)
    assert curve["precision"].dtype == np.float64
    assert scores["AP"] == pytest.approx(AP_HAND, abs=1e-12)
    assert abs(scores["AP"] - AP_FROM_I1) > 0.03
    assert abs(scores["AP"] - MEAN_PER_QUERY_AP) > 0.1


def test_query_without_relevant_items_counts_with_zero_recall() -> None:
    # A fourth query whose label (9) is absent from the database: n_q = 0, no hit,
    # recall 0. It adds 0 to every numerator and 1 to every denominator, so R@k scales
    # by 3/4 and P_i, R_i each by 3/4, hence AP by 9/16: 169/324 * 9/16 = 169/576.
    queries = np.vstack([QUERIES, [[0.3, 0.4]]])
    labels = np.append(Q_LABELS, 9)
    scores = retrieval_scores(queries, labels, DB, DB_LABELS, ks=(1, 2))
    assert scores["R@1"] == pytest.approx(1 / 4, abs=1e-12)
    assert scores["R@2"] == pytest.approx(3 / 4, abs=1e-12)
    assert scores["AP"] == pytest.approx(169 / 576, abs=1e-12)


def test_torch_and_numpy_inputs_agree_and_float32_works() -> None:
    ref = retrieval_scores(QUERIES, Q_LABELS, DB, DB_LABELS, ks=(1, 2))
    got = retrieval_scores(torch.from_numpy(QUERIES).float(), torch.tensor(Q_LABELS), DB, DB_LABELS, ks=(1, 2))
    assert got == pytest.approx(ref, abs=1e-6)


def _brute_force(q, ql, db, dbl, ks):
    """Full argsort per query, straight from the definitions (float64 NumPy)."""
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    dn = db / np.linalg.norm(db, axis=1, keepdims=True)
    order = np.argsort(-(qn @ dn.T), axis=1, kind="stable")  # ties: database index order
    rel = dbl[order] == ql[:, None]
    hits = np.cumsum(rel, axis=1)
    n_rel = (dbl[None, :] == ql[:, None]).sum(axis=1)
    ranks = np.arange(1, db.shape[0] + 1)
    p = (hits / ranks).mean(axis=0)
    r = np.where(n_rel[:, None] > 0, hits / np.maximum(n_rel, 1)[:, None], 0.0).mean(axis=0)
    out = {f"R@{k}": float(rel[:, :k].any(axis=1).mean()) for k in ks}
    out["AP"] = float(np.sum((r[1:] - r[:-1]) * p[1:]))
    return out, p, r


def test_chunk_size_invariance_and_brute_force_reference() -> None:
    rng = np.random.default_rng(0)
    q, db = rng.normal(size=(37, 8)), rng.normal(size=(53, 8))
    # Unbalanced labels, plus one query label (7) missing from the database.
    dbl = rng.choice(5, size=53, p=[0.4, 0.3, 0.15, 0.1, 0.05])
    ql = rng.integers(0, 5, size=37)
    ql[[3, 20]] = 7
    ks = (1, 3, 5, 20)
    expected, p_ref, r_ref = _brute_force(q, ql, db, dbl, ks)
    first, first_curve = retrieval_scores(q, ql, db, dbl, ks, chunk_size=1, return_curve=True)
    assert first == pytest.approx(expected, abs=1e-12)
    np.testing.assert_allclose(first_curve["precision"], p_ref, atol=1e-12)
    np.testing.assert_allclose(first_curve["recall"], r_ref, atol=1e-12)
    for chunk in (2, 7, 36, 37, 512):
        scores, curve = retrieval_scores(q, ql, db, dbl, ks, chunk_size=chunk, return_curve=True)
        assert scores == first  # bit-identical, not just close
        assert np.array_equal(curve["precision"], first_curve["precision"])
        assert np.array_equal(curve["recall"], first_curve["recall"])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ks": ()},
        {"ks": (0,)},
        {"ks": (1, 1)},
        {"chunk_size": 0},
        {"database_labels": np.zeros(4, dtype=int)},
        {"query_labels": np.zeros(3)},
        {"database": np.ones((5, 3))},
        {"queries": np.array([[np.nan, 0.0], [0, 1], [1, 1]])},
    ],
)
def test_bad_arguments_raise_value_error(kwargs) -> None:
    args = {
        "queries": QUERIES,
        "query_labels": Q_LABELS,
        "database": DB,
        "database_labels": DB_LABELS,
    }
    extra = {k: kwargs.pop(k) for k in list(kwargs) if k in ("ks", "chunk_size")}
    args.update(kwargs)
    with pytest.raises(ValueError):
        retrieval_scores(**args, **extra)
