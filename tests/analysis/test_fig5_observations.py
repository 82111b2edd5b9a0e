"""RINCE Fig. 4 / Fig. 5 as registered: at 16 negatives the paper's five observations hold and every line
the paper draws exists (the τ1 < τ2 lines rise, the τ1 > τ2 lines are there and nearly flat); the 4096
variant is drawn beside it and lacks the τ1 > τ2 lines (docs/papers/rince.md §c.9)."""

from __future__ import annotations

import csv
import math

import numpy as np

from semcl.analysis.gradient_equilibrium import FIG5_SETTINGS, check_observations, k_values, sample_negatives
from semcl.registry.tables import get_table
from semcl.report.figures import write_analytic

ALL_HOLD = {"flat_start": True, "rising": True, "ranked": True, "lower_with_tau2": True,
            "flat_when_tau1_larger": True}


def test_five_observations_hold_at_the_registered_negatives_only():
    assert check_observations(16, grid=41) == ALL_HOLD
    at_4096 = check_observations(4096, grid=41)
    # (0.1, 0.2) is flat near 0.976 with no zero at s1 = 1; the τ1 > τ2 lines have no zero at all
    assert not at_4096["rising"] and not at_4096["ranked"] and not at_4096["flat_when_tau1_larger"]
    # from 64 negatives on (0.7, 0.1) has no zero: the band where all five hold ends below it
    assert not check_observations(64, grid=41)["flat_when_tau1_larger"]


def test_k_matches_the_closed_form_gradients():
    """K = (1/τ1) e^{s2/τ1} / Z1 − (1/τ2) Σ_n e^{s_n/τ2} / Z2 (§c.9, exclusive ℓ2), by hand in float64."""
    neg = sample_negatives(16)
    s1, s2, t1, t2 = 0.5, 0.3, 0.2, 0.1
    z1 = math.exp(s1 / t1) + math.exp(s2 / t1) + sum(math.exp(float(n) / t1) for n in neg)
    e2 = sum(math.exp(float(n) / t2) for n in neg)
    expect = math.exp(s2 / t1) / (t1 * z1) - e2 / (t2 * (math.exp(s2 / t2) + e2))
    got = float(k_values(s1, s2, t1, t2, neg))
    assert abs(got - expect) < 1e-12


def _lines(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    lines: dict[tuple[float, float], list[tuple[float, float]]] = {}
    for r in rows:
        lines.setdefault((float(r["tau1"]), float(r["tau2"])), []).append(
            (float(r["s1"]), float(r["s2_eq"]) if r["s2_eq"] else math.nan))
    return lines


def test_registered_fig5_csv_has_rising_and_flat_lines(tmp_path):
    table = get_table("rince/fig5")
    table.figure["args"] = {**table.figure["args"], "grid": 21}  # the registered settings on a coarse grid
    files, png = write_analytic(table, tmp_path)
    assert png.name == "rince_fig5.png" and [p.rsplit("/", 1)[1] for p in files["file"]] == [
        "rince_fig5.png", "rince_fig5.csv", "rince_fig5_n4096.png", "rince_fig5_n4096.csv"]
    lines = _lines(tmp_path / "rince_fig5.csv")
    assert list(lines) == list(FIG5_SETTINGS)
    rise = {}
    for t, pts in lines.items():
        s2 = np.array([v for _, v in pts])
        assert np.isfinite(s2).all(), t  # every line the paper draws exists on [-1, 1]
        rise[t] = s2[-1] - s2[0]
        if t[0] < t[1]:  # blue and orange: rise with h(q, p1), end below the identity
            assert (np.diff(s2) >= -1e-9).all() and rise[t] > 0.4 and s2[-1] < 1.0, t
    assert rise[(0.2, 0.1)] < 0.15 and rise[(0.7, 0.1)] < 0.02  # green and red: nearly flat
    assert round(lines[(0.1, 0.2)][0][1], 2) == 0.38 and round(lines[(0.1, 0.2)][-1][1], 2) == 0.83
    variant = _lines(tmp_path / "rince_fig5_n4096.csv")
    assert all(math.isnan(v) for t in ((0.2, 0.1), (0.7, 0.1)) for _, v in variant[t])
