"""CutMix between neighbours: boxes computed by hand, lambda = the kept fraction exactly, pixels from
the right image, per-batch vs per-sample boxes, the Beta draw."""

from __future__ import annotations

import pytest
import torch

from semcl.data.views.cutmix import box_from_lam, cutmix, kept_fraction, sample_beta

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py


def test_box_from_lam_by_hand():
    # 10x10, lambda0 0.75: side floor(10 * 0.5) = 5, half 2 -> centre (5, 5) gives rows/cols 3..7
    lam = torch.tensor([0.75, 0.75, 0.19])
    boxes = box_from_lam(10, 10, lam, torch.tensor([5, 0, 4]), torch.tensor([5, 9, 4]))
    # the corner box is clipped: rows 0..2, cols 7..10; lambda0 0.19: side floor(9.0) = 9, half 4 -> 0..8
    assert boxes.tolist() == [[3, 7, 3, 7], [0, 2, 7, 10], [0, 8, 0, 8]]
    assert kept_fraction(boxes, 10, 10).tolist() == [0.84, 0.94, 0.36]


@pytest.mark.parametrize("mode", ["batch", "sample"])
def test_lambda_is_the_kept_fraction_and_pixels_come_from_the_right_image(mode):
    g = torch.Generator().manual_seed(3)
    anchor = torch.rand(16, 3, 12, 9, generator=g)
    neighbour = torch.rand(16, 3, 12, 9, generator=g) + 2.0       # disjoint value ranges
    a0, n0 = anchor.clone(), neighbour.clone()
    out = cutmix(anchor, neighbour, torch.Generator().manual_seed(7), alpha=1.0, mode=mode)
    assert torch.equal(anchor, a0) and torch.equal(neighbour, n0)      # inputs untouched
    from_anchor = (out.images < 2.0).all(dim=1)                         # [B, H, W]
    kept = from_anchor.sum(dim=(1, 2)).double() / (12 * 9)
    assert out.lam.dtype == torch.float64 and torch.equal(out.lam, kept)
    for b, (y1, y2, x1, x2) in enumerate(out.boxes.tolist()):
        inside = torch.zeros(12, 9, dtype=torch.bool)
        inside[y1:y2, x1:x2] = True
        assert torch.equal(out.images[b][:, inside], neighbour[b][:, inside])
        assert torch.equal(out.images[b][:, ~inside], anchor[b][:, ~inside])
    distinct_boxes = {tuple(r) for r in out.boxes.tolist()}
    assert len(distinct_boxes) == 1 if mode == "batch" else len(distinct_boxes) > 1


def test_same_generator_same_mix():
    x, y = torch.zeros(4, 1, 8, 8), torch.ones(4, 1, 8, 8)
    a = cutmix(x, y, torch.Generator().manual_seed(11), alpha=2.0, mode="sample")
    b = cutmix(x, y, torch.Generator().manual_seed(11), alpha=2.0, mode="sample")
    assert torch.equal(a.images, b.images) and torch.equal(a.lam, b.lam)


@pytest.mark.parametrize("alpha,var", [(1.0, 1 / 12), (2.0, 1 / 20)])
def test_beta_moments(alpha, var):
    # Beta(a, a): mean 1/2, variance 1 / (4 (2a + 1)); 20000 draws, tolerance ~4 standard errors
    lam = sample_beta(alpha, 20000, torch.Generator().manual_seed(0))
    assert lam.min() >= 0 and lam.max() <= 1
    assert abs(lam.mean().item() - 0.5) < 4 * (var / 20000) ** 0.5
    assert abs(lam.var().item() - var) < 0.004


def test_bad_inputs():
    g = torch.Generator()
    with pytest.raises(ValueError, match="equal"):
        cutmix(torch.zeros(2, 1, 4, 4), torch.zeros(2, 1, 4, 5), g)
    with pytest.raises(ValueError, match="unknown CutMix mode"):
        cutmix(torch.zeros(2, 1, 4, 4), torch.zeros(2, 1, 4, 4), g, mode="pixel")
    with pytest.raises(ValueError, match="alpha"):
        sample_beta(0.0, 1, g)
