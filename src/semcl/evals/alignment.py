"""Alignment and uniformity of L2-normalised features (Wang & Isola, ICML 2020, "Understanding Contrastive
Representation Learning through Alignment and Uniformity on the Hypersphere", Sec. 4.1, Eq. 4 and 5):

    alignment  = E_{(x, y) positive pair} ||f(x) - f(y)||_2^alpha                 (alpha = 2; lower = more aligned)
    uniformity = log E_{(x, y) any two samples} exp(-t ||f(x) - f(y)||_2^2)       (t = 2; lower = more uniform)

with f the features divided by their L2 norm. The expectations are over the finite set given: uniformity over the
N(N-1)/2 unordered pairs of distinct samples (the authors' `torch.pdist`), alignment over the unordered pairs of
distinct samples that share a label, pooled over classes (every pair weighs the same; a class of one sample has none).
Which pairs count as positive is the caller's choice; RINCE's analysis reads same-class pairs of the test set
(docs/papers/rince.md §f.6).

Both run in float64 over row chunks, so the [chunk, N] block of squared distances is all that is held at once;
||u - v||^2 = 2 - 2 <u, v> for unit vectors (clamped at 0 against rounding).
"""

from __future__ import annotations

import math

import torch

from semcl.evals._inputs import feature_matrix

ALPHA = 2.0
T = 2.0


def _unit(features, name: str) -> torch.Tensor:
    x = feature_matrix(features, name).double()
    norms = x.norm(dim=1, keepdim=True)
    if bool((norms == 0).any()):
        raise ValueError(f"{name} has a zero row: it has no direction on the sphere")
    return x / norms


def _pair_blocks(x: torch.Tensor, chunk_size: int):
    """(squared distances, mask of the pairs j > i) per chunk of rows i: each unordered pair once."""
    n = x.shape[0]
    cols = torch.arange(n)
    for start in range(0, n, chunk_size):
        block = x[start:start + chunk_size]
        d2 = (2.0 - 2.0 * block @ x.T).clamp_min(0.0)
        rows = torch.arange(start, start + block.shape[0]).unsqueeze(1)
        yield d2, cols.unsqueeze(0) > rows


def uniformity(features, t: float = T, *, chunk_size: int = 1024) -> float:
    """log of the mean Gaussian potential exp(-t ||u - v||^2) over all pairs of distinct samples (module docstring)."""
    if not t > 0:
        raise ValueError(f"t must be > 0, got {t!r}")
    x = _unit(features, "features")
    if x.shape[0] < 2:
        raise ValueError("uniformity needs at least 2 samples")
    total = 0.0
    for d2, upper in _pair_blocks(x, chunk_size):
        total += float(torch.exp(-t * d2[upper]).sum())
    n = x.shape[0]
    return math.log(total / (n * (n - 1) / 2))


def alignment(features, labels, alpha: float = ALPHA, *, chunk_size: int = 1024) -> float:
    """Mean ||u - v||^alpha over the pairs of distinct samples with the same label (module docstring)."""
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    x = _unit(features, "features")
    y = torch.as_tensor(labels)
    if y.ndim != 1 or y.shape[0] != x.shape[0] or y.is_floating_point() or y.dtype == torch.bool:
        raise ValueError(f"labels must be an integer vector of length {x.shape[0]}, got {y.dtype} {tuple(y.shape)}")
    total, pairs = 0.0, 0
    for c in torch.unique(y):
        members = x[y == c]
        for d2, upper in _pair_blocks(members, chunk_size):
            total += float(d2[upper].pow(alpha / 2).sum())
            pairs += int(upper.sum())
    if pairs == 0:
        raise ValueError("alignment needs a class with at least 2 samples (no positive pair)")
    return total / pairs
