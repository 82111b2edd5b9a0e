"""The GPaCo pixel loss against a float64 brute force written from the formula (paco.md c.7)."""

from __future__ import annotations

import math

import pytest
import torch

from semcl.losses.gpaco_seg import gpaco_pixel_loss, sample_pixels


def brute_force(features, logits, labels, alpha, tau, pixels_of):
    """Loop over images and anchors: l_i = -sum_k w_ik log p_ik / (1 + alpha |P(i)|)."""
    b, d = features.shape[:2]
    c = logits.shape[1]
    total = 0.0
    for n in range(b):
        idx = pixels_of(n)
        z = [features[n].reshape(d, -1)[:, j] for j in idx]
        z = [v / math.sqrt(float(v @ v)) for v in z]
        s = [logits[n].reshape(c, -1)[:, j] for j in idx]
        y = [int(labels[n].reshape(-1)[j]) for j in idx]
        per = []
        for i in range(len(idx)):
            if y[i] >= c:
                continue
            row = [float(s[i][k]) for k in range(c)] + [float(z[i] @ z[j]) / tau for j in range(len(idx)) if j != i]
            wts = [1.0 if k == y[i] else 0.0 for k in range(c)] + \
                  [alpha if y[j] == y[i] else 0.0 for j in range(len(idx)) if j != i]
            m = max(row)
            lse = m + math.log(sum(math.exp(r - m) for r in row))
            npos = sum(1 for j in range(len(idx)) if j != i and y[j] == y[i])
            per.append(-sum(w * (r - lse) for w, r in zip(wts, row, strict=True)) / (1 + alpha * npos))
        total += sum(per) / len(per) if per else 0.0
    return total / b


@pytest.mark.parametrize("num_samples", [-1, 5])
def test_pixel_loss_matches_brute_force(num_samples):
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(2, 4, 3, 3, generator=g, dtype=torch.float64)
    logits = torch.randn(2, 3, 3, 3, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 3, (2, 3, 3), generator=g)
    labels[0, 0, 0] = 255  # ignored: no anchor, still a denominator term of the others
    labels[1, 2, 1] = 3  # >= C is ignore too
    alpha, tau = 0.3, 0.07
    got = gpaco_pixel_loss(feats, logits, labels, alpha=alpha, tau=tau, num_samples=num_samples,
                           generator=torch.Generator().manual_seed(7))
    replay = torch.Generator().manual_seed(7)
    picks = [sample_pixels(9, num_samples, replay).tolist() for _ in range(2)]
    ref = brute_force(feats, logits, labels, alpha, tau, lambda n: picks[n])
    assert got.dtype == torch.float64 and float(got) == pytest.approx(ref, rel=1e-10)


def test_alpha_zero_is_cross_entropy_and_all_ignored_is_zero():
    g = torch.Generator().manual_seed(1)
    feats = torch.randn(1, 4, 2, 2, generator=g, dtype=torch.float64)
    logits = torch.randn(1, 3, 2, 2, generator=g, dtype=torch.float64)
    labels = torch.tensor([[[0, 1], [2, 1]]])
    loss = gpaco_pixel_loss(feats, logits, labels, alpha=0.0, tau=0.1, num_samples=-1)
    # alpha 0: the samples stay in the softmax denominator, so the loss exceeds plain CE on the logits
    ce = torch.nn.functional.cross_entropy(logits.reshape(3, 4).T, labels.reshape(-1))
    assert float(loss) > float(ce)
    ignored = gpaco_pixel_loss(feats, logits, torch.full((1, 2, 2), 255), alpha=0.1, tau=0.1, num_samples=-1)
    assert float(ignored) == 0.0
    assert sample_pixels(10, 4, torch.Generator().manual_seed(0)).shape == (4,)
    assert sample_pixels(3, 8).tolist() == [0, 1, 2]
