"""Class-conditional Gaussian OOD scores and AUROC against hand and library references."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal
from sklearn.metrics import roc_auc_score
from sklearn.mixture import GaussianMixture

from semcl.evals.ood import auroc, class_gaussian_auroc, class_gaussian_scores

EPS = 1e-6
S = math.sqrt(0.5)

# Class 0: (2,0), (0,3), (-0.5,0) -> normalised (1,0), (0,1), (-1,0).
#   mean (0, 1/3); deviations (1,-1/3), (0,2/3), (-1,-1/3)
#   var_x = (1 + 0 + 1)/3 = 2/3, var_y = (1/9 + 4/9 + 1/9)/3 = 2/9,
#   cov_xy = (1*(-1/3) + 0*(2/3) + (-1)*(-1/3))/3 = 0  ->  cov = diag(2/3, 2/9)
# Class 1: (0,-3), (3,-3), (-3,-3) -> (0,-1), (s,-s), (-s,-s) with s = 1/sqrt(2).
#   mean (0, m1) with m1 = -(1 + 2s)/3; x-variance (0 + 1/2 + 1/2)/3 = 1/3;
#   y-deviations 2(s-1)/3, (1-s)/3, (1-s)/3 -> y-variance 2(1-s)^2/9; covariance 0.
TRAIN = np.array([[2.0, 0.0], [0.0, 3.0], [-0.5, 0.0], [0.0, -3.0], [3.0, -3.0], [-3.0, -3.0]])
LABELS = np.array([0, 0, 0, 1, 1, 1])
MU = [np.array([0.0, 1 / 3]), np.array([0.0, -(1 + 2 * S) / 3])]
VAR = [np.array([2 / 3, 2 / 9]) + EPS, np.array([1 / 3, 2 * (1 - S) ** 2 / 9]) + EPS]


def _diag_log_density(x: np.ndarray, c: int) -> float:
    """log N(x; mu_c, diag(var_c)) = -0.5 (2 log 2pi + sum log var + sum (x-mu)^2/var)."""
    d = x - MU[c]
    return -0.5 * (2 * math.log(2 * math.pi) + np.log(VAR[c]).sum() + (d * d / VAR[c]).sum())


def test_two_class_scores_match_hand_computation_and_scipy() -> None:
    # (0,5) -> (0,1): class 0 wins; (1,-1) -> (s,-s): a class-1 training point.
    points = np.array([[0.0, 5.0], [1.0, -1.0], [-0.2, 0.1]])
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    got = class_gaussian_scores(TRAIN, LABELS, points)
    hand = [max(_diag_log_density(x, 0), _diag_log_density(x, 1)) for x in unit]
    # Point 0 by hand: class 0 has d = (0, 2/3), Mahalanobis (4/9)/(2/9 + 1e-6) ~ 2.
    d0 = (4 / 9) / (2 / 9 + EPS)
    assert hand[0] == pytest.approx(-0.5 * (2 * math.log(2 * math.pi) + math.log(VAR[0][0] * VAR[0][1]) + d0))
    np.testing.assert_allclose(got, hand, rtol=1e-10)
    scipy_ref = [
        max(multivariate_normal(MU[c], np.diag(VAR[c])).logpdf(x) for c in (0, 1))  # noqa: B023
        for x in unit
    ]
    np.testing.assert_allclose(got, scipy_ref, rtol=1e-10)
    assert got.dtype == np.float64


def test_scores_match_one_component_gaussian_mixture_per_class() -> None:
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(3, 5)) * 3
    labels = np.repeat(np.arange(3), 40)
    train = centres[labels] + rng.normal(size=(120, 5))
    test = rng.normal(size=(25, 5)) * 2
    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)  # noqa: E731
    per_class = []
    for c in range(3):
        gm = GaussianMixture(n_components=1, covariance_type="full", reg_covar=1e-6, random_state=0)
        gm.fit(unit(train[labels == c]))
        per_class.append(gm.score_samples(unit(test)))
    expected = np.max(per_class, axis=0)
    got = class_gaussian_scores(torch.from_numpy(train).float(), torch.from_numpy(labels), test)
    # float32 train features: agreement to float32 input precision only.
    np.testing.assert_allclose(got, expected, rtol=1e-4)
    got64 = class_gaussian_scores(train, labels, test, chunk_size=4)
    np.testing.assert_allclose(got64, expected, rtol=1e-9)
    # Chunking changes only BLAS blocking in the triangular solve (last-bit effects).
    np.testing.assert_allclose(got64, class_gaussian_scores(train, labels, test, chunk_size=1000), rtol=1e-13)


def test_auroc_hand_cases_with_ties() -> None:
    assert auroc([3.0, 2.0], [1.0, 0.0]) == 1.0
    assert auroc([0.0], [1.0]) == 0.0
    # Pairs (p, n): (1,1) tie = 0.5, (1,0) = 1, (2,1) = 1, (2,0) = 1 -> 3.5 / 4.
    assert auroc([1.0, 2.0], [1.0, 0.0]) == 0.875
    assert auroc(np.array([5, 5]), torch.tensor([5])) == 0.5
    # (2,1)=1, (2,2)=.5, (2,3)=0, (4,*)=1+1+1 -> 4.5 / 6 = 0.75
    assert auroc([2.0, 4.0], [1.0, 2.0, 3.0]) == 0.75


def test_auroc_matches_sklearn_on_tied_integer_scores() -> None:
    rng = np.random.default_rng(2)
    pos, neg = rng.integers(0, 6, size=50), rng.integers(-1, 4, size=70)
    y = np.r_[np.ones(50), np.zeros(70)]
    assert auroc(pos, neg) == pytest.approx(roc_auc_score(y, np.r_[pos, neg]), abs=1e-12)


def test_class_gaussian_auroc_in_vs_out() -> None:
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(2), 50)
    centres = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    train = centres[labels] + 0.05 * rng.normal(size=(100, 3))
    inside = centres[np.arange(30) % 2] + 0.05 * rng.normal(size=(30, 3))
    outside = np.array([0.0, 0.0, 1.0]) + 0.05 * rng.normal(size=(20, 3))
    value = class_gaussian_auroc(train, labels, inside, outside)
    assert value == 1.0
    swapped = class_gaussian_auroc(train, labels, outside, inside)
    assert swapped == 0.0
    scores_in = class_gaussian_scores(train, labels, inside)
    scores_out = class_gaussian_scores(train, labels, outside)
    assert value == auroc(scores_in, scores_out)


def test_bad_arguments_raise_value_error() -> None:
    with pytest.raises(ValueError):
        auroc([], [1.0])
    with pytest.raises(ValueError):
        auroc([np.nan], [1.0])
    with pytest.raises(ValueError):
        class_gaussian_scores(TRAIN, LABELS[:-1], TRAIN)
    with pytest.raises(ValueError):
        class_gaussian_scores(TRAIN, LABELS.astype(float), TRAIN)
    with pytest.raises(ValueError):
        class_gaussian_scores(TRAIN, LABELS, np.ones((2, 3)))


def test_small_classes_woodbury_path_matches_direct_gaussians():
    """Classes with fewer samples than dimensions take the low-rank path; it must equal the
    full-covariance log-density (biased covariance + 1e-6 I) computed directly."""
    from scipy.stats import multivariate_normal

    from semcl.evals.ood import class_gaussian_scores

    rng = np.random.default_rng(3)
    d, sizes = 16, [5, 5, 7, 2]
    train = rng.normal(size=(sum(sizes), d))
    labels = np.repeat(np.arange(len(sizes)), sizes)
    feats = rng.normal(size=(9, d))
    unit = train / np.linalg.norm(train, axis=1, keepdims=True)
    q = feats / np.linalg.norm(feats, axis=1, keepdims=True)
    ref = np.full(len(q), -np.inf)
    for c in range(len(sizes)):
        x = unit[labels == c]
        mu = x.mean(axis=0)
        cov = (x - mu).T @ (x - mu) / len(x) + 1e-6 * np.eye(d)
        ref = np.maximum(ref, multivariate_normal(mu, cov).logpdf(q))
    got = class_gaussian_scores(train, labels, feats)
    np.testing.assert_allclose(got, ref, rtol=1e-9)
