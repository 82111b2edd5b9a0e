"""Alignment and uniformity (Wang & Isola 2020) against loops written from the formulas, in float64, and hand cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from semcl.evals.alignment import alignment, uniformity


def _unit_rows(x: np.ndarray) -> list[np.ndarray]:
    return [row / math.sqrt(sum(v * v for v in row)) for row in x.astype(np.float64)]


def _brute_alignment(x, labels, alpha=2.0) -> float:
    """E over unordered same-label pairs i < j of ||u_i - u_j||^alpha, one pair at a time."""
    u = _unit_rows(x)
    dists = [math.sqrt(sum((a - b) ** 2 for a, b in zip(u[i], u[j], strict=True))) ** alpha
             for i, j in itertools.combinations(range(len(u)), 2) if labels[i] == labels[j]]
    return sum(dists) / len(dists)


def _brute_uniformity(x, t=2.0) -> float:
    """log of the mean over unordered pairs i < j of exp(-t ||u_i - u_j||^2)."""
    u = _unit_rows(x)
    pots = [math.exp(-t * sum((a - b) ** 2 for a, b in zip(u[i], u[j], strict=True)))
            for i, j in itertools.combinations(range(len(u)), 2)]
    return math.log(sum(pots) / len(pots))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("chunk", [1, 3, 1024])
def test_against_brute_force(dtype, chunk):
    gen = np.random.default_rng(0)
    x = gen.normal(size=(23, 5)) * gen.uniform(0.1, 10, size=(23, 1))  # norms vary: the metric normalises
    labels = gen.integers(0, 4, size=23)
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    feats = torch.tensor(x, dtype=dtype)
    assert alignment(feats, torch.tensor(labels), chunk_size=chunk) == pytest.approx(
        _brute_alignment(feats.double().numpy(), labels), rel=tol)
    assert alignment(feats, torch.tensor(labels), alpha=1.0, chunk_size=chunk) == pytest.approx(
        _brute_alignment(feats.double().numpy(), labels, alpha=1.0), rel=tol)
    assert uniformity(feats, chunk_size=chunk) == pytest.approx(_brute_uniformity(feats.double().numpy()), rel=tol)
    assert uniformity(feats, t=0.5, chunk_size=chunk) == pytest.approx(
        _brute_uniformity(feats.double().numpy(), t=0.5), rel=tol)


def test_hand_cases():
    # the four unit vectors +-e1, +-e2 (scaled: the metric normalises): pair distances^2 are 2 (x4) and 4 (x2)
    x = torch.tensor([[3.0, 0.0], [-1.0, 0.0], [0.0, 2.0], [0.0, -5.0]])
    assert uniformity(x) == pytest.approx(math.log((4 * math.exp(-4) + 2 * math.exp(-8)) / 6), rel=1e-14)
    # classes {e1, -e1} and {e2, -e2}: both positive pairs are antipodal, ||u - v||^2 = 4
    assert alignment(x, torch.tensor([0, 0, 1, 1])) == pytest.approx(4.0, rel=1e-14)
    # classes {e1, e2} and {-e1, -e2}: both at distance^2 2
    assert alignment(x, torch.tensor([0, 1, 0, 1])) == pytest.approx(2.0, rel=1e-14)
    # a collapsed class is perfectly aligned; all samples on one point is the least uniform (log 1 = 0)
    same = torch.tensor([[1.0, 1.0], [2.0, 2.0], [0.5, 0.5]])
    assert alignment(same, torch.tensor([7, 7, 7])) == pytest.approx(0.0, abs=1e-12)
    assert uniformity(same) == pytest.approx(0.0, abs=1e-15)
    # a singleton class has no pair: it does not count (pooled over pairs, not averaged over classes)
    assert alignment(x, torch.tensor([0, 0, 1, 2])) == pytest.approx(4.0, rel=1e-14)


def test_bad_inputs():
    with pytest.raises(ValueError, match="zero row"):
        uniformity(torch.tensor([[0.0, 0.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="no positive pair"):
        alignment(torch.eye(3), torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="at least 2 samples"):
        uniformity(torch.ones(1, 3))
    with pytest.raises(ValueError, match="integer vector of length 3"):
        alignment(torch.eye(3), torch.tensor([0.0, 0.0, 1.0]))
    with pytest.raises(ValueError, match="NaN or inf"):
        uniformity(torch.tensor([[1.0, float("nan")], [1.0, 0.0]]))
