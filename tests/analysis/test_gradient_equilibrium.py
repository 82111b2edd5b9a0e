"""RINCE gradient-equilibrium analysis (Fig. 4/5): autograd K against the closed-form derivatives
of rince.md §c.9, hand-computed values and roots, and the CSVs the figure functions write."""

import csv
import math

import numpy as np
import pytest
import torch

from semcl.analysis.gradient_equilibrium import (
    draw_fig4,
    draw_fig5,
    equilibrium_line,
    k_map,
    k_values,
    sample_negatives,
)

F64 = torch.float64


def closed_form_k(s1, s2, tau1, tau2, neg, positives):
    """§c.9 written out, with an explicit sum over the negatives (float64 numpy)."""
    s1, s2 = np.broadcast_arrays(np.asarray(s1, float), np.asarray(s2, float))
    e_neg1 = np.exp(np.asarray(neg)[:, None, None] / tau1).sum(0)
    e_neg2 = np.exp(np.asarray(neg)[:, None, None] / tau2).sum(0)
    z1 = np.exp(s1 / tau1) + np.exp(s2 / tau1) + e_neg1
    d1 = np.exp(s2 / tau1) / z1 / tau1
    if positives == "exclusive":
        d2 = -e_neg2 / (np.exp(s2 / tau2) + e_neg2) / tau2
    else:
        pos = np.exp(s1 / tau2) + np.exp(s2 / tau2)
        d2 = -np.exp(s2 / tau2) * (1 / pos - 1 / (pos + e_neg2)) / tau2
    return d1 + d2


@pytest.mark.parametrize("positives", ["exclusive", "cumulative"])
@pytest.mark.parametrize("tau1,tau2", [(0.1, 0.2), (0.1, 0.7), (0.2, 0.1)])
def test_autograd_k_matches_closed_form(positives, tau1, tau2):
    grid = np.linspace(-1, 1, 9)
    neg = sample_negatives(64, seed=3)
    got = k_map(tau1, tau2, grid, grid, positives=positives, negatives=neg)
    ref = closed_form_k(grid[:, None], grid[None, :], tau1, tau2, neg.numpy(), positives)
    assert got.shape == (9, 9) and got.dtype == np.float64
    np.testing.assert_allclose(got, ref, rtol=1e-11, atol=1e-13)
    # The default seeded sample of 4096 negatives goes through the same path.
    big = k_map(tau1, tau2, grid[:3], grid[-3:], positives=positives)
    ref_big = closed_form_k(grid[:3, None], grid[None, -3:], tau1, tau2, sample_negatives().numpy(), positives)
    np.testing.assert_allclose(big, ref_big, rtol=1e-10)


def test_hand_computed_values():
    # One negative at 0, τ1 = τ2 = 1, s1 = s2 = 0: ∂ℓ1/∂s2 = 1/3; exclusive ∂ℓ2/∂s2 = −1/2 → K = −1/6;
    # cumulative ∂ℓ2/∂s2 = −(1/2 − 1/3) = −1/6 → K = 1/6.
    neg = torch.zeros(1, dtype=F64)
    zero = torch.zeros((), dtype=F64)
    assert math.isclose(k_values(zero, zero, 1.0, 1.0, neg, "exclusive").item(), -1 / 6, rel_tol=1e-14)
    assert math.isclose(k_values(zero, zero, 1.0, 1.0, neg, "cumulative").item(), 1 / 6, rel_tol=1e-14)


def test_equilibrium_line_hand_root():
    # One negative at 0, τ1 = τ2 = 1, exclusive: K = 0 ⇔ x/(a + x + 1) = 1/(x + 1) with x = e^{s2},
    # a = e^{s1} ⇔ x² = a + 1 ⇔ s2 = ½ log(1 + e^{s1}).
    s1 = np.linspace(-1, 1, 7)
    got = equilibrium_line(1.0, 1.0, s1, negatives=torch.zeros(1, dtype=F64))
    np.testing.assert_allclose(got, 0.5 * np.log1p(np.exp(s1)), rtol=0, atol=1e-11)


def test_equilibrium_line_roots_and_nan():
    s1 = np.linspace(-1, 1, 21)
    line = equilibrium_line(0.1, 0.2, s1, n_negatives=256)
    assert np.isfinite(line).all()
    k_at = k_values(torch.as_tensor(s1), torch.as_tensor(line), 0.1, 0.2, sample_negatives(256))
    assert k_at.abs().max().item() < 1e-8
    # Above the root ℓ1 wins (K > 0), below it ℓ2 wins (K < 0).
    neg = sample_negatives(256)
    assert (k_values(torch.as_tensor(s1), torch.as_tensor(line - 1e-3), 0.1, 0.2, neg) < 0).all()
    assert (k_values(torch.as_tensor(s1), torch.as_tensor(line + 1e-3), 0.1, 0.2, neg) > 0).all()
    # 4096 negatives, τ1 > τ2: the zero lies above the cosine range, found when the range is widened.
    assert np.isnan(equilibrium_line(0.2, 0.1, s1)).all()
    wide = equilibrium_line(0.2, 0.1, s1, s2_range=(-1.0, 3.0))
    assert np.isfinite(wide).all() and (wide > 1).all()


def test_paper_observations_with_exclusive_positives():
    # rince.md §c.9 (paper prose): (1) nearly constant for small s1; (2) τ1 < τ2: grows with s1;
    # (4) a larger τ2 lowers the line; (5) τ1 > τ2 flattens it.
    s1 = np.linspace(-1, 1, 41)
    a = equilibrium_line(0.1, 0.2, s1, n_negatives=16)
    b = equilibrium_line(0.1, 0.7, s1, n_negatives=16)
    c = equilibrium_line(0.2, 0.1, s1, n_negatives=16)
    assert np.ptp(a[:10]) < 1e-3
    assert (np.diff(a) >= -1e-12).all() and a[-1] - a[0] > 0.3
    assert (b < a).all()
    assert np.ptp(c) < 0.5 * np.ptp(a)


def test_draw_fig4_writes_the_plotted_maps(tmp_path):
    png, table = draw_fig4(tmp_path, settings=((0.1, 0.2), (0.2, 0.1)), grid=5, n_negatives=32)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with table.open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["tau1", "tau2", "s1", "s2", "K"] and len(rows) == 2 * 25
    axis = np.linspace(-1, 1, 5)
    expected = k_map(0.2, 0.1, axis, axis, n_negatives=32)
    second = [r for r in rows if float(r["tau1"]) == 0.2]
    for r in second:
        i, j = int(np.argmin(np.abs(axis - float(r["s1"])))), int(np.argmin(np.abs(axis - float(r["s2"]))))
        assert float(r["K"]) == expected[i, j]


def test_draw_fig5_csv_has_empty_cells_where_no_zero(tmp_path):
    png, table = draw_fig5(tmp_path, settings=((0.1, 0.2), (0.2, 0.1)), grid=5, n_negatives=4096)
    assert png.exists() and table.name == "rince_fig5.csv"
    with table.open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["tau1", "tau2", "s1", "s2_eq"] and len(rows) == 10
    s1 = np.linspace(-1, 1, 5)
    first = [float(r["s2_eq"] or "nan") for r in rows[:5]]
    expected = equilibrium_line(0.1, 0.2, s1)  # its zero at s1 = 1 lies just above 1: NaN there
    assert np.isfinite(expected[:4]).all() and np.isnan(expected[4]) and rows[4]["s2_eq"] == ""
    np.testing.assert_array_equal(first, expected)
    assert all(r["s2_eq"] == "" for r in rows[5:])  # 4096 negatives, τ1 > τ2: no zero in [-1, 1]
    assert [float(r["s1"]) for r in rows[:5]] == list(s1)


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown positives"):
        k_map(0.1, 0.2, [0.0], [0.0], positives="both")
    with pytest.raises(ValueError, match="positive"):
        k_map(0.0, 0.2, [0.0], [0.0])
    with pytest.raises(ValueError, match="n_negatives"):
        sample_negatives(0)
    neg = sample_negatives()
    assert torch.equal(neg, sample_negatives()) and abs(neg.mean().item() - 0.1) < 0.01
    assert abs(neg.std().item() - 0.1) < 0.01
