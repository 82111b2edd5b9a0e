"""FitNet, AT, NST, FSP and AB against loop references written from the papers' formulas (float64)."""

import math

import pytest
import torch

from semcl.losses.distill import ConvRegressor, ab_loss, at_loss, fsp_loss, hint_loss, nst_loss

F64 = torch.float64


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def block_mean(f: torch.Tensor, out: int) -> torch.Tensor:
    """Average pooling of [C, H, W] into out×out blocks (H divisible by out), element by element."""
    n_ch, h, _ = f.shape
    k = h // out
    res = torch.zeros(n_ch, out, out, dtype=F64)
    for c in range(n_ch):
        for i in range(out):
            for j in range(out):
                res[c, i, j] = sum(f[c, i * k + a, j * k + b] for a in range(k) for b in range(k)) / (k * k)
    return res


def test_hint_loss_is_mean_squared_error():
    s, t = rand(2, 3, 2, 2, seed=1), rand(2, 3, 2, 2, seed=2)
    ref = sum((s[idx] - t[idx]) ** 2 for idx in torch.cartesian_prod(*[torch.arange(n) for n in s.shape]).tolist()
              for idx in [tuple(idx)]) / s.numel()
    assert hint_loss(s, t).item() == pytest.approx(float(ref), rel=1e-12)


@pytest.mark.parametrize(("s_hw", "t_hw"), [(8, 4), (4, 8), (4, 4), (6, 4)])
def test_conv_regressor_maps_student_shape_to_teacher_shape(s_hw, t_hw):
    reg = ConvRegressor((2, 3, s_hw, s_hw), (2, 5, t_hw, t_hw))
    out = reg(torch.randn(2, 3, s_hw, s_hw))
    assert out.shape == (2, 5, t_hw, t_hw)
    assert (out >= 0).all()  # ReLU (FitNet); the AB connector has use_relu=False
    with pytest.raises(ValueError, match="ConvRegressor"):
        ConvRegressor((2, 3, 2, 2), (2, 5, 8, 8))


def reference_attention(f: torch.Tensor, p: float) -> list[list[float]]:
    """q_b = vec(Σ_c |A_c|^p) / ‖·‖₂ per sample (the channel sum; equal to the mean after normalising)."""
    n_b, n_c, h, w = f.shape
    out = []
    for b in range(n_b):
        a = [sum(abs(f[b, c, i, j]) ** p for c in range(n_c)) for i in range(h) for j in range(w)]
        norm = math.sqrt(sum(float(x) ** 2 for x in a))
        out.append([float(x) / norm for x in a])
    return out


def test_at_squared_and_norm_forms_match_reference_with_pooling():
    s = [rand(2, 3, 4, 4, seed=3), rand(2, 2, 2, 2, seed=4)]
    t = [rand(2, 5, 2, 2, seed=5), rand(2, 4, 2, 2, seed=6)]
    ref_sq, ref_norm = 0.0, 0.0
    for fs, ft in zip(s, t, strict=True):
        fs = torch.stack([block_mean(fs[b], ft.shape[2]) for b in range(fs.shape[0])])  # student 4×4 → 2×2
        qs, qt = reference_attention(fs, 2), reference_attention(ft, 2)
        n_b, hw = len(qs), len(qs[0])
        ref_sq += sum((qs[b][k] - qt[b][k]) ** 2 for b in range(n_b) for k in range(hw)) / (n_b * hw)
        ref_norm += sum(math.sqrt(sum((qs[b][k] - qt[b][k]) ** 2 for k in range(hw))) for b in range(n_b)) / (n_b * hw)
    assert at_loss(s, t).item() == pytest.approx(ref_sq, rel=1e-12)
    assert at_loss(s, t, form="norm").item() == pytest.approx(ref_norm, rel=1e-12)


def test_nst_is_polynomial_mmd_of_normalised_channel_maps():
    s, t = rand(2, 3, 2, 2, seed=7), rand(2, 4, 2, 2, seed=8)

    def maps(f, b):
        vecs = [[float(f[b, c, i, j]) for i in range(2) for j in range(2)] for c in range(f.shape[1])]
        return [[x / math.sqrt(sum(y * y for y in v)) for x in v] for v in vecs]

    def k(x, y):
        return sum(a * b for a, b in zip(x, y, strict=True)) ** 2

    ref = 0.0
    for b in range(2):
        ms, mt = maps(s, b), maps(t, b)
        ref += (sum(k(x, y) for x in mt for y in mt) / len(mt) ** 2 + sum(k(x, y) for x in ms for y in ms) / len(ms) ** 2
                - 2 * sum(k(x, y) for x in ms for y in mt) / (len(ms) * len(mt)))
    assert nst_loss([s], [t]).item() == pytest.approx(ref / 2, rel=1e-12)
    assert nst_loss([t], [t]).item() == pytest.approx(0.0, abs=1e-14)


def test_fsp_matches_flow_matrices_with_pooling():
    s = [rand(2, 2, 4, 4, seed=9), rand(2, 3, 4, 4, seed=10), rand(2, 2, 2, 2, seed=11)]
    t = [rand(2, 2, 4, 4, seed=12), rand(2, 3, 4, 4, seed=13), rand(2, 2, 2, 2, seed=14)]

    def flow(f1, f2, b):
        if f1.shape[2] > f2.shape[2]:
            a, c = block_mean(f1[b], f2.shape[2]), f2[b]
        else:
            a, c = f1[b], f2[b]
        hw = a.shape[1] * a.shape[2]
        return [[sum(a[i, y, x] * c[j, y, x] for y in range(a.shape[1]) for x in range(a.shape[2])) / hw
                 for j in range(c.shape[0])] for i in range(a.shape[0])]

    ref = 0.0
    for i in range(2):
        total, count = 0.0, 0
        for b in range(2):
            gs, gt = flow(s[i], s[i + 1], b), flow(t[i], t[i + 1], b)
            for r in range(len(gs)):
                for c in range(len(gs[0])):
                    total += float(gs[r][c] - gt[r][c]) ** 2
                    count += 1
        ref += total / count
    assert fsp_loss(s, t).item() == pytest.approx(ref, rel=1e-12)
    with pytest.raises(ValueError, match="channels"):
        fsp_loss([rand(1, 2, 2, 2), rand(1, 2, 2, 2)], [rand(1, 3, 2, 2), rand(1, 2, 2, 2)])


def test_ab_alternative_loss_matches_elementwise_reference():
    s = [rand(2, 2, 2, 2, seed=15), rand(2, 3, 1, 1, seed=16)]
    t = [rand(2, 2, 2, 2, seed=17), rand(2, 3, 1, 1, seed=18)]
    margin, ref = 1.0, 0.0
    for layer, (fs, ft) in enumerate(zip(s, t, strict=True)):
        acc = 0.0
        for x, y in zip(fs.flatten().tolist(), ft.flatten().tolist(), strict=True):
            acc += max(0.0, margin - x) ** 2 if y > 0 else max(0.0, margin + x) ** 2
        ref += 2.0 ** (layer - 1) * acc / 2 * 3 / 1000
    assert ab_loss(s, t).item() == pytest.approx(ref, rel=1e-12)
    # a student beyond the margin on the teacher's side of every boundary costs nothing
    assert ab_loss([torch.sign(t[0]) * 1.5], [t[0]]).item() == 0.0


def test_feature_losses_reject_unpaired_lists():
    with pytest.raises(ValueError, match="at_loss"):
        at_loss([rand(1, 2, 2, 2)], [])
