"""Out-of-distribution detection with class-conditional Gaussians, and AUROC.

Protocol of RINCE's OOD evaluation: all features are L2-normalised; for every class
``c`` one Gaussian ``N(mu_c, Sigma_c)`` is fitted on that class's training features,

* ``mu_c = mean of x`` over the ``n_c`` training samples of class ``c``,
* ``Sigma_c = (1 / n_c) * sum (x - mu_c)(x - mu_c)^T + 1e-6 * I``

(biased covariance plus ``reg_covar``: exactly what a one-component
``sklearn.mixture.GaussianMixture(covariance_type="full", reg_covar=1e-6)`` converges
to), and a sample's score is ``max_c log N(x; mu_c, Sigma_c)``. In-distribution data
should score higher, so AUROC takes in-distribution as the positive class.

``log N(x) = -0.5 * (d log 2pi + log det Sigma_c + maha_c(x))`` with the Mahalanobis term
``maha_c(x) = (x - mu_c)^T Sigma_c^{-1} (x - mu_c)``. How it is computed (same value, two
routes; the fits, factors and determinants are always float64):

* ``n_c < d`` (the usual case: 500 images per class, 2048-d features): ``Sigma_c`` is
  ``eps * I`` plus a rank ``< n_c`` term, so by Woodbury with the small ``n_c x n_c``
  Cholesky factor ``n_c eps I + Z Z^T = L L^T`` (``Z`` the centred class features),
  ``maha_c = (|x - mu_c|^2 - |P (x - mu_c)|^2) / eps`` with ``P = L^{-1} Z`` and
  ``log det Sigma_c = (d - n_c) log eps + 2 sum log diag L - n_c log n_c``. Scoring costs
  one GEMM of the samples against ``P`` (``n_c`` rows instead of ``d``), batched over
  several classes; ``|x - mu_c|^2`` is accumulated in float64.
* ``n_c >= d``: ``Sigma_c = L L^T`` (``d x d``), ``maha_c = |L^{-1}(x - mu_c)|^2`` with
  ``L^{-1}`` formed once per class and applied by one float64 GEMM per chunk.

Precision: with float64 inputs everything runs in float64 (agreement with a direct
Cholesky solve to ~1e-12 relative). With float32 inputs the low-rank scoring GEMM runs in
float32: scores agree with the float64 computation to ~1e-6 relative (about
``|x - mu|^2`` in absolute Mahalanobis units, against values of order 1e4-1e6 here),
which is below what float32 features carry.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from semcl.evals._inputs import feature_matrix

ArrayLike = torch.Tensor | np.ndarray




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


# Low-rank classes are scored in blocks of about this many factor rows, so that the scoring GEMM
# has a wide right-hand side (one class of 100-500 rows alone runs at a fraction of GEMM speed).
_BLOCK_ROWS = 2048
_CACHE_ROWS = 512


def _fit_and_score(
    train: torch.Tensor,
    labels: torch.Tensor,
    sets: list[torch.Tensor],
    reg_covar: float,
    chunk_size: int,
) -> list[np.ndarray]:
    """Fit one Gaussian per class and return the max log-density for every set.

    Several sets share one pass over the classes, so the in- and out-distribution
    scores of an AUROC need each class's factor only once. See the module docstring for
    the two ways a class is scored (low-rank Woodbury form or inverse Cholesky factor).
    """
    dim = train.shape[1]
    device = train.device
    wide = any(t.dtype == torch.float64 for t in (train, *sets))
    gemm_dtype = torch.float64 if wide else torch.float32
    log_2pi_d = dim * math.log(2.0 * math.pi)
    order = torch.argsort(labels, stable=True)
    classes, counts = torch.unique_consecutive(labels[order], return_counts=True)
    bounds = [0, *torch.cumsum(counts, 0).tolist()]

    n_classes = len(classes)

    def block_feats(lo: int, hi: int) -> torch.Tensor:
        # Classes lo..hi-1, normalised in float64 a block at a time rather than the whole
        # train set up front, so no float64 copy of all training features is ever held.
        rows = train.index_select(0, order[bounds[lo] : bounds[hi]])
        return F.normalize(rows.double(), dim=1)

    # Blocks of consecutive classes with about _BLOCK_ROWS training rows: fitted with batched
    # ops when their classes have equal sizes, and scored with one GEMM per chunk.
    blocks, lo = [], 0
    while lo < n_classes:
        hi, rows = lo + 1, int(counts[lo])
        # a class with n_c >= D (full-rank covariance) always forms a block of its own
        while rows < _BLOCK_ROWS and hi < n_classes and max(int(counts[lo]), int(counts[hi])) < dim:
            rows += int(counts[hi])
            hi += 1
        blocks.append((lo, hi))
        lo = hi
    means = torch.empty(n_classes, dim, dtype=torch.float64, device=device)
    for lo, hi in blocks:
        sizes = counts[lo:hi].to(device)
        owner = torch.repeat_interleave(torch.arange(hi - lo, device=device), sizes)
        sums = torch.zeros(hi - lo, dim, dtype=torch.float64, device=device).index_add_(0, owner, block_feats(lo, hi))
        means[lo:hi] = sums / sizes[:, None]
    mean_sq = (means * means).sum(dim=1)

    # Every scored set, normalised once (in float64, then kept in the GEMM dtype), and
    # |x - mu_c|^2 for every sample and class in float64 via one [M, C] product.
    normed, dist_sq = [], []
    for x in sets:
        xs = torch.empty(x.shape, dtype=gemm_dtype, device=device)
        zz = torch.empty(x.shape[0], len(classes), dtype=torch.float64, device=device)
        for start in range(0, x.shape[0], chunk_size):
            x64 = F.normalize(x[start : start + chunk_size].to(device).double(), dim=1)
            xs[start : start + chunk_size] = x64
            zz[start : start + chunk_size] = (x64 * x64).sum(1, keepdim=True) - 2.0 * (x64 @ means.T) + mean_sq
        normed.append(xs)
        dist_sq.append(zz)
    bests = [torch.full((x.shape[0],), -math.inf, dtype=torch.float64, device=device) for x in sets]

    def score_low_rank(lo: int, hi: int, proj: torch.Tensor, shift: torch.Tensor, consts: torch.Tensor) -> None:
        # maha_c = (|z|^2 - |P_c z|^2) / eps for every class of the block, with one GEMM per chunk:
        # [chunk, D] @ [D, sum n_c], then the per-class sums of squares as one more (thin)
        # product with a 0/1 indicator of which factor row belongs to which class.
        weight = proj.to(gemm_dtype).T.contiguous()
        shift = shift.to(gemm_dtype)
        owner = torch.repeat_interleave(torch.arange(hi - lo, device=device), counts[lo:hi].to(device))
        indicator = F.one_hot(owner, hi - lo).to(gemm_dtype)
        for xs, zz, best in zip(normed, dist_sq, bests, strict=True):
            # Rows in slices of at most _CACHE_ROWS, so that the product, its square and the
            # indicator product stay in cache instead of streaming [chunk, 2048] through memory.
            step = min(chunk_size, _CACHE_ROWS)
            for start in range(0, xs.shape[0], step):
                y = torch.addmm(shift, xs[start : start + step], weight, beta=-1.0).square_()
                quad = (y @ indicator).double()  # [rows, classes of the block]
                maha = (zz[start : start + step, lo:hi] - quad).div_(reg_covar)
                log_p = maha.clamp_(min=0.0).add_(consts).mul_(-0.5)  # exact maha >= 0
                part = best[start : start + step]
                torch.maximum(part, log_p.amax(dim=1), out=part)

    def not_pd(c: int) -> ValueError:
        return ValueError(f"covariance of class {c} is not positive definite; raise reg_covar")

    eye = torch.eye(dim, dtype=torch.float64, device=device)
    for lo, hi in blocks:
        xb = block_feats(lo, hi)
        sizes = counts[lo:hi].tolist()
        n_c = sizes[0]
        if n_c < dim:
            if reg_covar <= 0.0:
                raise ValueError(f"covariance of class {int(classes[lo])} is singular ({n_c} samples in {dim} dims);"
                                 " raise reg_covar")
            # Woodbury with K = n eps I + Z Z^T = L L^T (n x n, Z = centred class features):
            #   Sigma^-1 = (I - Z^T K^-1 Z) / eps,  so  maha = (|z|^2 - |P z|^2) / eps, P = L^-1 Z;
            #   log det Sigma = (D - n) log eps + log det(K / n)  (Sylvester's identity).
            # P mu is kept too: then P z = P x - P mu, so the GEMM runs on the shared normalised x.
            if len(set(sizes)) == 1:  # equal class sizes: the whole block in batched ops
                centred = xb.view(hi - lo, n_c, dim) - means[lo:hi, None, :]
                gram = torch.bmm(centred, centred.transpose(1, 2))
                gram.diagonal(dim1=1, dim2=2).add_(n_c * reg_covar)
                chol, info = torch.linalg.cholesky_ex(gram)
                if bool((info != 0).any()):
                    raise not_pd(int(classes[lo + int(torch.nonzero(info)[0, 0])]))
                proj = torch.linalg.solve_triangular(chol, centred, upper=False)  # [k, n, D]; |P z| <= |z|
                shift = torch.bmm(proj, means[lo:hi, :, None]).reshape(-1)
                log_det = 2.0 * torch.log(torch.diagonal(chol, dim1=1, dim2=2)).sum(1)
                proj = proj.reshape(-1, dim)
            else:
                projs, shifts, dets = [], [], []
                for i, rows in enumerate(torch.split(xb, sizes)):
                    centred = rows - means[lo + i]
                    gram = centred @ centred.T
                    gram.diagonal().add_(rows.shape[0] * reg_covar)
                    chol, info = torch.linalg.cholesky_ex(gram)
                    if int(info) != 0:
                        raise not_pd(int(classes[lo + i]))
                    projs.append(torch.linalg.solve_triangular(chol, centred, upper=False))
                    shifts.append(projs[-1] @ means[lo + i])
                    dets.append(2.0 * torch.log(torch.diagonal(chol)).sum())
                proj, shift, log_det = torch.cat(projs), torch.cat(shifts), torch.stack(dets)
            n_t = counts[lo:hi].to(device=device, dtype=torch.float64)
            log_det = log_det + (dim - n_t) * math.log(reg_covar) - n_t * torch.log(n_t)
            score_low_rank(lo, hi, proj, shift, log_det + log_2pi_d)
            continue
        # n_c >= D: a block holds this one class (see the blocking above).
        centred = xb - means[lo]
        cov = centred.T @ centred / n_c + reg_covar * eye
        chol, info = torch.linalg.cholesky_ex(cov)
        if int(info) != 0:
            raise not_pd(int(classes[lo]))
        const = log_2pi_d + float(2.0 * torch.log(torch.diagonal(chol)).sum())
        # maha = |L^-1 z|^2 with z = x - mu formed explicitly: L^-1 can be large, so the
        # shift trick of the low-rank path would cancel badly. Float64 throughout.
        inv_t = torch.linalg.solve_triangular(chol, eye, upper=False).T.contiguous()
        mu = means[lo]
        for xs, best in zip(normed, bests, strict=True):
            for start in range(0, xs.shape[0], chunk_size):
                y = (xs[start : start + chunk_size].double() - mu) @ inv_t
                log_p = (y * y).sum(1).add_(const).mul_(-0.5)
                part = best[start : start + chunk_size]
                torch.maximum(part, log_p, out=part)
    return [best.cpu().numpy() for best in bests]


def _check_train(
    train_feats: ArrayLike, train_labels: ArrayLike, reg_covar: float, chunk_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    train = feature_matrix(train_feats, "train_feats")
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
    t = feature_matrix(x, name)
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
        chunk_size: samples scored at a time. Besides a normalised copy of ``feats``
            (float32, or float64 for float64 inputs) and ``M x C`` float64 distances to
            the class means, only one class's factors (or one block of low-rank ones, about
            ``2048 x D``) and a ``chunk_size x 2048`` product are alive: 100 classes x
            2048-d x 20k samples stays under 1 GB of work space.

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
