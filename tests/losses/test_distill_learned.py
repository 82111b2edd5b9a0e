"""VID and FT (losses and their auxiliary modules) against loop references (float64)."""

import math

import pytest
import torch

from semcl.losses.distill import Paraphraser, Translator, VIDHead, ft_loss, ft_reconstruction_loss, vid_loss

F64 = torch.float64


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def test_vid_is_gaussian_nll_with_softplus_variance():
    mu, t, alpha = rand(2, 3, 2, 2, seed=1), rand(2, 3, 2, 2, seed=2), rand(3, seed=3)
    eps, ref, count = 1e-5, 0.0, 0
    for b in range(2):
        for c in range(3):
            var = math.log(1 + math.exp(float(alpha[c]))) + eps
            for i in range(2):
                for j in range(2):
                    ref += math.log(math.sqrt(var)) + float(t[b, c, i, j] - mu[b, c, i, j]) ** 2 / (2 * var)
                    count += 1
    assert vid_loss(mu, t, alpha, eps).item() == pytest.approx(ref / count, rel=1e-12)


def test_vid_head_starts_at_variance_five_and_pools_the_larger_map():
    head = VIDHead(3, 4).double()
    var = torch.nn.functional.softplus(head.log_scale) + head.eps
    torch.testing.assert_close(var, torch.full((4,), 5.0, dtype=F64))
    s, t = rand(2, 3, 4, 4, seed=4), rand(2, 4, 2, 2, seed=5)
    pooled = torch.nn.functional.avg_pool2d(s, 2)
    expected = vid_loss(head.regressor(pooled), t, head.log_scale)
    assert head(s, t).item() == pytest.approx(expected.item(), rel=1e-12)


def test_ft_paper_form_normalises_the_whole_factor():
    fs, ft = rand(2, 2, 2, 2, seed=6), rand(2, 2, 2, 2, seed=7)
    ref, count = 0.0, 0
    for b in range(2):
        vs, vt = fs[b].flatten().tolist(), ft[b].flatten().tolist()
        ns, nt = math.sqrt(sum(x * x for x in vs)), math.sqrt(sum(x * x for x in vt))
        for x, y in zip(vs, vt, strict=True):
            ref += abs(x / ns - y / nt)
            count += 1
    assert ft_loss(fs, ft).item() == pytest.approx(ref / count, rel=1e-12)


def test_ft_repdistiller_form_compares_factor_attention_maps():
    fs, ft = rand(2, 2, 2, 2, seed=8), rand(2, 2, 2, 2, seed=9)
    ref = 0.0
    for b in range(2):
        a_s = [sum(float(fs[b, c, i, j]) ** 2 for c in range(2)) for i in range(2) for j in range(2)]
        a_t = [sum(float(ft[b, c, i, j]) ** 2 for c in range(2)) for i in range(2) for j in range(2)]
        ns, nt = math.sqrt(sum(x * x for x in a_s)), math.sqrt(sum(x * x for x in a_t))
        ref += sum(abs(x / ns - y / nt) for x, y in zip(a_s, a_t, strict=True))
    assert ft_loss(fs, ft, variant="repdistiller").item() == pytest.approx(ref / 8, rel=1e-12)


def test_paraphraser_and_translator_shapes_and_reconstruction_loss():
    para, trans = Paraphraser(8).double(), Translator(3, 8).double()
    x = rand(2, 8, 4, 4, seed=10)
    factor, rec = para(x)
    assert factor.shape == (2, 4, 4, 4) and rec.shape == x.shape  # rate 0.5: 8 → 4 factor channels
    assert trans(rand(2, 3, 4, 4, seed=11)).shape == (2, 4, 4, 4)
    assert ft_reconstruction_loss(x, rec).item() == pytest.approx(((rec - x) ** 2).mean().item(), rel=1e-12)
    with pytest.raises(ValueError, match="ft_loss"):
        ft_loss(factor, rand(2, 3, 4, 4))
