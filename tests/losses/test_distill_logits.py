"""KD (Hinton) against a loop reference, and the RepDistiller weight table."""

import math

import pytest
import torch

from semcl.losses.distill import DISTILL_LOSSES, REPDISTILLER_WEIGHTS, kd_loss

F64 = torch.float64


def reference_kd(z_s: torch.Tensor, z_t: torch.Tensor, T: float) -> torch.Tensor:
    """T² · (1/B) Σ_b Σ_c p_t log(p_t / p_s), softmaxes written out per row."""
    total = torch.zeros((), dtype=F64)
    n_rows, n_cls = z_s.shape
    for b in range(n_rows):
        den_s = sum(torch.exp(z_s[b, c] / T) for c in range(n_cls))
        den_t = sum(torch.exp(z_t[b, c] / T) for c in range(n_cls))
        for c in range(n_cls):
            p_s = torch.exp(z_s[b, c] / T) / den_s
            p_t = torch.exp(z_t[b, c] / T) / den_t
            total = total + p_t * torch.log(p_t / p_s)
    return total * T * T / n_rows


@pytest.mark.parametrize("T", [1.0, 4.0])
def test_kd_matches_reference_value_and_gradient(T):
    g = torch.Generator().manual_seed(0)
    z_s = (torch.randn(4, 5, generator=g, dtype=F64) * 3).requires_grad_()
    z_t = torch.randn(4, 5, generator=g, dtype=F64) * 3
    got = kd_loss(z_s, z_t, T)
    ref = reference_kd(z_s, z_t, T)
    assert got.item() == pytest.approx(ref.item(), rel=1e-12)
    (g_got,) = torch.autograd.grad(got, z_s)
    (g_ref,) = torch.autograd.grad(reference_kd(z_s, z_t, T), z_s)
    torch.testing.assert_close(g_got, g_ref)


def test_kd_is_zero_for_equal_logits_and_scales_with_t_squared():
    z = torch.randn(3, 4, dtype=F64)
    assert kd_loss(z, z).item() == pytest.approx(0.0, abs=1e-14)
    # two classes, teacher (0, 0), student (2T·a, 0): KL(½,½ ‖ σ) = −log 2 − ½ log(p(1−p)), times T²
    T, a = 4.0, 0.3
    z_s = torch.tensor([[a * T, 0.0]], dtype=F64)
    p = 1 / (1 + math.exp(-a))
    expected = T * T * (-math.log(2) - 0.5 * math.log(p * (1 - p)))
    assert kd_loss(z_s, torch.zeros(1, 2, dtype=F64), T).item() == pytest.approx(expected, rel=1e-12)


def test_kd_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="kd_loss"):
        kd_loss(torch.zeros(2, 3), torch.zeros(2, 4))


def test_weight_table_matches_repdistiller_run_script():
    w = REPDISTILLER_WEIGHTS
    assert (w["kd"].gamma, w["kd"].alpha, w["kd"].beta) == (0.1, 0.9, 0.0)
    assert {k: v.beta for k, v in w.items() if k != "kd"} == {
        "fitnet": 100, "at": 1000, "sp": 3000, "cc": 0.02, "vid": 1, "rkd": 1, "pkt": 30000, "ab": 1,
        "ft": 200, "fsp": 50, "nst": 50, "crd": 0.8, "crd_kd": 0.8}
    assert all(v.gamma == 1.0 and v.alpha == 0.0 for k, v in w.items() if k not in ("kd", "crd_kd"))
    assert w["crd_kd"].alpha == 1.0
    assert set(DISTILL_LOSSES) - {"crd_infonce"} <= set(w)
