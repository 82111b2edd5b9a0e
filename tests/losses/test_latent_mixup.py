"""Latent mixup: the mixing formula at float64, one lam for both sides, lam = 0, the distance loss."""

from __future__ import annotations

import pytest
import torch

from semcl.losses.latent_mixup import (
    append_negatives,
    latent_mixup_negatives,
    lm_distance_loss,
    mix_with_positive,
    sample_mixup_lambda,
)


def unit(*shape: int, seed: int) -> torch.Tensor:
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def test_mix_formula_and_lambda_zero():
    pos, neg = unit(2, 4, seed=0), unit(2, 3, 4, seed=1)
    lam = torch.tensor([[0.0, 0.25, 1.0], [0.5, 0.0, 0.75]], dtype=torch.float64)
    raw = mix_with_positive(pos, neg, lam, renormalize=False)
    for b in range(2):
        for m in range(3):
            expect = lam[b, m] * pos[b] + (1 - lam[b, m]) * neg[b, m]
            torch.testing.assert_close(raw[b, m], expect, rtol=0, atol=1e-15)
    normed = mix_with_positive(pos, neg, lam)
    torch.testing.assert_close(normed, raw / raw.norm(dim=-1, keepdim=True), rtol=0, atol=1e-15)
    torch.testing.assert_close(normed[0, 0], neg[0, 0], rtol=0, atol=1e-15)  # lam = 0: the plain negative
    torch.testing.assert_close(normed[0, 2], pos[0], rtol=0, atol=1e-15)  # lam = 1: the positive


def test_teacher_and_student_share_lambda():
    tp, tn, sp, sn = unit(3, 5, seed=2), unit(3, 6, 5, seed=3), unit(3, 5, seed=4), unit(3, 6, 5, seed=5)
    t_mix, s_mix, lam = latent_mixup_negatives(tp, tn, sp, sn, num_mixed=4, generator=torch.Generator().manual_seed(7))
    assert lam.shape == (3, 4) and t_mix.shape == s_mix.shape == (3, 4, 5)
    torch.testing.assert_close(t_mix, mix_with_positive(tp, tn[:, :4], lam), rtol=0, atol=0)
    torch.testing.assert_close(s_mix, mix_with_positive(sp, sn[:, :4], lam), rtol=0, atol=0)
    assert append_negatives(tn, t_mix).shape == (3, 10, 5)
    torch.testing.assert_close(append_negatives(tn, t_mix)[:, 6:], t_mix, rtol=0, atol=0)
    with pytest.raises(ValueError, match="num_mixed"):
        latent_mixup_negatives(tp, tn, sp, sn, num_mixed=7, generator=torch.Generator())


def test_lambda_range_and_determinism():
    lam = sample_mixup_lambda((20000,), torch.Generator().manual_seed(0), lam_max=0.5)
    assert 0 <= float(lam.min()) and float(lam.max()) < 0.5
    assert abs(float(lam.mean()) - 0.25) < 0.01
    again = sample_mixup_lambda((20000,), torch.Generator().manual_seed(0), lam_max=0.5)
    assert torch.equal(lam, again)


def test_lm_distance_loss_brute_force():
    s, t = torch.randn(2, 3, 4, dtype=torch.float64), torch.randn(2, 3, 4, dtype=torch.float64)
    total = 0.0
    for b in range(2):
        for m in range(3):
            d = s[b, m] / s[b, m].norm() - t[b, m] / t[b, m].norm()
            total += float((d * d).sum())
    assert float(lm_distance_loss(s, t)) == pytest.approx(total / 6, abs=1e-12)
    assert float(lm_distance_loss(s, 3 * s)) == pytest.approx(0.0, abs=1e-12)
