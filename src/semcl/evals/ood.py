"""Out-of-distribution detection with class-conditional Gaussians, and AUROC.

Protocol of RINCE's OOD evaluation: all features are L2-normalised; for every class
``c`` one Gaussian ``N(mu_c, Sigma_c)`` is fitted on that class's training features,

* ``mu_c = mean of x`` over the ``n_c`` training samples of class ``c``,
* ``Sigma_c = (1 / n_c) * sum (x - mu_c)(x - mu_c)^T + 1e-6 * I``

(biased covariance plus ``reg_covar``: exactly what a one-component
``sklearn.mixture.GaussianMixture(covariance_type="full", reg_covar=1e-6)`` converges
to), and a sample's score is ``max_c log N(x; mu_c, Sigma_c)``. In-distribution data
should score higher, so AUROC takes in-distribution as the positive class.

All Gaussian algebra runs in float64 through a Cholesky factor ``Sigma_c = L L^T``:
``log N(x) = -0.5 * (d log 2pi + log det Sigma_c + |L^{-1}(x - mu_c)|^2)`` with
``log det Sigma_c = 2 sum log diag L``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

ArrayLike = torch.Tensor | np.ndarray


def _features(x: ArrayLike, name: str) -> torch.Tensor:
    t = torch.as_tensor(x)
    if t.ndim != 2 or t.shape[0] == 0 or t.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array [N, D], got shape {tuple(t.shape)}")
    if not t.is_floating_point():
        t = t.float()
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or inf")
    return t


def _scores_1d(x: ArrayLike, name: str) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    a = np.asarray(x, dtype=np.float64).ravel()
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if np.isnan(a).any():
        raise ValueError(f"{name} contains NaN")
    return a


def auroc(pos_scores: ArrayLike, neg_scores: ArrayLike) -> float:
    """Area under the ROC curve, positives expected to score higher.

    Mann-Whitney form: ``AUROC = (#{p > n} + 0.5 * #{p == n}) / (n_pos * n_neg)``
    over all positive/negative pairs, so ties count one half. Pair counts are exact
    integers (one binary search per positive), so the result is independent of input
    order and costs ``O((n_pos + n_neg) log n_neg)``.
    """
    pos = _scores_1d(pos_scores, "pos_scores")
    neg = np.sort(_scores_1d(neg_scores, "neg_scores"))
    below = np.searchsorted(neg, pos, side="left")  # negatives strictly below each p
    at_most = np.searchsorted(neg, pos, side="right")  # negatives <= p
    wins = int(below.sum())
    ties = int((at_most - below).sum())
    # Python ints: the numerator and denominator are exact, one rounding at the end.
    return (2 * wins + ties) / (2 * pos.size * neg.size)


def _fit_and_score(
    train: torch.Tensor,
    labels: torch.Tensor,
    sets: list[torch.Tensor],
    reg_covar: float,
    chunk_size: int,
) -> list[np.ndarray]:
    """Fit one Gaussian per class and return the max log-density for every set.

    Several sets share one pass over the classes, so the in- and out-distribution
    scores of an AUROC need each ``D x D`` Cholesky factor only once.
    """
    dim = train.shape[1]
    log_2pi_d = dim * math.log(2.0 * math.pi)
    bests = [torch.full((x.shape[0],), -math.inf, dtype=torch.float64) for x in sets]
    eye = torch.eye(dim, dtype=torch.float64, device=train.device)
    for c in torch.unique(labels).tolist():
        # Normalise per class in float64 rather than the whole train set up front, so
        # no float64 copy of all training features is ever held.
        xc = F.normalize(train[labels == c].double(), dim=1)
        mu = xc.mean(dim=0)
        centred = xc - mu
        cov = centred.T @ centred / xc.shape[0] + reg_covar * eye
        chol, info = torch.linalg.cholesky_ex(cov)
        if int(info) != 0:
            raise ValueError(f"covariance of class {c} is not positive definite; raise reg_covar")
        log_det = 2.0 * torch.log(torch.diagonal(chol)).sum()
        for x, best in zip(sets, bests, strict=True):
            for start in range(0, x.shape[0], chunk_size):
                chunk = x[start : start + chunk_size].to(chol.device)
                z = F.normalize(chunk.double(), dim=1) - mu
                # Solve L w = (x - mu)^T; |w|^2 is the Mahalanobis distance without
                # forming Sigma^{-1}, which would be slower and less accurate.
                w = torch.linalg.solve_triangular(chol, z.T, upper=False)
                log_p = -0.5 * (log_2pi_d + log_det + (w * w).sum(dim=0))
                part = best[start : start + chunk_size]
                torch.maximum(part, log_p.cpu(), out=part)
    return [best.numpy() for best in bests]


def _check_train(
    train_feats: ArrayLike, train_labels: ArrayLike, reg_covar: float, chunk_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    train = _features(train_feats, "train_feats")
    labels = torch.as_tensor(train_labels)
    if labels.ndim != 1 or labels.shape[0] != train.shape[0]:
        raise ValueError(f"train_labels must be 1-D with {train.shape[0]} entries, got shape {tuple(labels.shape)}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"train_labels must hold integer labels, got {labels.dtype}")
    if not reg_covar >= 0.0:
        raise ValueError(f"reg_covar must be >= 0, got {reg_covar!r}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    return train, labels.to(train.device)


def _check_set(x: ArrayLike, name: str, dim: int) -> torch.Tensor:
    t = _features(x, name)
    if t.shape[1] != dim:
        raise ValueError(f"{name} have {t.shape[1]} dims but train_feats have {dim}")
    return t


def class_gaussian_scores(
    train_feats: ArrayLike,
    train_labels: ArrayLike,
    feats: ArrayLike,
    *,
    reg_covar: float = 1e-6,
    chunk_size: int = 4096,
) -> np.ndarray:
    """Max over classes of the class-Gaussian log-density of each row of ``feats``.

    Args:
        train_feats: training features ``[N, D]`` the Gaussians are fitted on.
        train_labels: integer class labels ``[N]``; every label present gets a Gaussian.
        feats: features to score ``[M, D]``.
        reg_covar: added to the covariance diagonal (RINCE/sklearn default 1e-6).
        chunk_size: samples scored at a time. Classes are visited one by one and only
            one ``D x D`` factor is alive, so 100 classes x 2048-d x 20k samples stays
            well under 2 GB (about 64 MB for covariance and factor plus
            ``3 * chunk_size * D * 8`` bytes of work space).

    Returns:
        float64 scores ``[M]`` (higher = more in-distribution).
    """
    train, labels = _check_train(train_feats, train_labels, reg_covar, chunk_size)
    x = _check_set(feats, "feats", train.shape[1])
    return _fit_and_score(train, labels, [x], reg_covar, chunk_size)[0]


def class_gaussian_auroc(
    train_feats: ArrayLike,
    train_labels: ArrayLike,
    in_feats: ArrayLike,
    out_feats: ArrayLike,
    *,
    reg_covar: float = 1e-6,
    chunk_size: int = 4096,
) -> float:
    """AUROC of class-Gaussian scores with in-distribution features as the positives."""
    train, labels = _check_train(train_feats, train_labels, reg_covar, chunk_size)
    x_in = _check_set(in_feats, "in_feats", train.shape[1])
    x_out = _check_set(out_feats, "out_feats", train.shape[1])
    scores_in, scores_out = _fit_and_score(train, labels, [x_in, x_out], reg_covar, chunk_size)
    return auroc(scores_in, scores_out)
