"""RINCE's gradient-equilibrium analysis (Fig. 4 and Fig. 5; docs/papers/rince.md §c.9) — analytic, no runs.

One anchor q with a rank-1 positive p1, a rank-2 positive p2 and M negatives; similarities
s1 = h(q,p1), s2 = h(q,p2), s_n = h(q,n) with s_n drawn once, seeded, from N(μ = 0.1, σ = 0.1).
The two RINCE-out rank terms (one positive each, so "out" = "in"):

    ℓ1 = −log( e^{s1/τ1} / (e^{s1/τ1} + e^{s2/τ1} + Σ_n e^{s_n/τ1}) )       p2 is a negative of ℓ1
    ℓ2 = −log( e^{s2/τ2} / (e^{s2/τ2} + Σ_n e^{s_n/τ2}) )                   positives="exclusive" (P2 only)
    ℓ2 = −log( (e^{s1/τ2} + e^{s2/τ2}) / (e^{s1/τ2} + e^{s2/τ2} + Σ_n e^{s_n/τ2}) )
                                                                            positives="cumulative" (P1 ∪ P2)

    K(s1, s2) = ∂ℓ1/∂s2 + ∂ℓ2/∂s2

K > 0: ℓ1 wins and pushes p2 away; K < 0: ℓ2 wins and pulls p2 in; K = 0 is the equilibrium line
(Fig. 5 plots s2 at K = 0 against s1). The default is "exclusive" (the ImageNet branch; the only
variant that reproduces the paper's five observations, §c.9); the number of negatives is unknown
for the paper's figure and shifts the lines strongly, so it is a parameter. The figures default to
FIGURE_NEGATIVES = 16, inside the band (8-48) where check_observations finds all five observations;
with 4096 (the CIFAR bank) the τ1 > τ2 lines have no zero in [-1, 1].

K is computed by autograd in float64; the negatives enter only through logsumexp_n(s_n/τ),
a constant per τ, so the grid costs O(G1·G2), not O(G1·G2·M).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

import numpy as np
import torch

from semcl.csv_files import write_csv
from semcl.files import save_figure_atomic

POSITIVES = ("exclusive", "cumulative")
FIG4_SETTINGS = ((0.1, 0.2), (0.1, 0.7), (0.2, 0.1))  # panels (a)-(c), docs/papers/rince.md §b.2
# Fig. 5 has four coloured settings, two with τ1 < τ2 and two with τ1 > τ2; the fourth is unknown
# (docs/papers/rince.md §b.2), assumed here to be the mirror of (0.1, 0.7).
FIG5_SETTINGS = ((0.1, 0.2), (0.1, 0.7), (0.2, 0.1), (0.7, 0.1))
# the paper's colours: "blue and orange" for τ1 < τ2, "green and red" for τ1 > τ2 (§c.9 observations 2, 5)
FIG5_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red")
# The number of negatives of the registered figures: the paper's five observations all hold for
# 8 to 48 negatives and fail from 64 on (check_observations; docs/papers/rince.md §c.9).
FIGURE_NEGATIVES = 16


def sample_negatives(n_negatives: int = 4096, mean: float = 0.1, std: float = 0.1, seed: int = 0) -> torch.Tensor:
    """The fixed negative similarities s_n ~ N(mean, std), float64 [n_negatives]."""
    if n_negatives < 1:
        raise ValueError(f"n_negatives must be >= 1, got {n_negatives}")
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n_negatives, generator=gen, dtype=torch.float64) * std + mean


def k_values(s1: torch.Tensor, s2: torch.Tensor, tau1: float, tau2: float, negatives: torch.Tensor,
             positives: str = "exclusive") -> torch.Tensor:
    """K at broadcast points (s1, s2), float64, by autograd of ℓ1 + ℓ2 with respect to s2."""
    if positives not in POSITIVES:
        raise ValueError(f"unknown positives {positives!r}; expected one of {POSITIVES}")
    if not (tau1 > 0 and tau2 > 0):
        raise ValueError(f"temperatures must be positive, got tau1={tau1}, tau2={tau2}")
    s1, s2 = torch.broadcast_tensors(torch.as_tensor(s1, dtype=torch.float64),
                                     torch.as_tensor(s2, dtype=torch.float64))
    neg = negatives.to(torch.float64)
    with torch.enable_grad():
        s2 = s2.clone().requires_grad_()
        l1 = _lse(s1 / tau1, s2 / tau1, torch.logsumexp(neg / tau1, 0)) - s1 / tau1
        neg2 = torch.logsumexp(neg / tau2, 0)
        if positives == "exclusive":
            l2 = _lse(s2 / tau2, neg2) - s2 / tau2
        else:
            l2 = _lse(s1 / tau2, s2 / tau2, neg2) - _lse(s1 / tau2, s2 / tau2)
        (grad,) = torch.autograd.grad((l1 + l2).sum(), s2)  # cells are independent: the sum's gradient is per cell
    return grad.detach()


def _lse(*parts: torch.Tensor) -> torch.Tensor:
    """log Σ exp over broadcast parts, elementwise."""
    return torch.logsumexp(torch.stack(torch.broadcast_tensors(*parts)), 0)


def k_map(tau1: float, tau2: float, s1_grid: Sequence[float] | np.ndarray, s2_grid: Sequence[float] | np.ndarray, *,
          n_negatives: int = 4096, positives: str = "exclusive", neg_mean: float = 0.1, neg_std: float = 0.1,
          seed: int = 0, negatives: torch.Tensor | None = None) -> np.ndarray:
    """K[i, j] = K(s1_grid[i], s2_grid[j]) as a float64 array [len(s1_grid), len(s2_grid)].

    ``negatives`` (the s_n themselves) replaces the seeded N(neg_mean, neg_std) sample.
    """
    neg = sample_negatives(n_negatives, neg_mean, neg_std, seed) if negatives is None else negatives
    s1 = torch.as_tensor(np.asarray(s1_grid, dtype=np.float64))[:, None]
    s2 = torch.as_tensor(np.asarray(s2_grid, dtype=np.float64))[None, :]
    return k_values(s1, s2, tau1, tau2, neg, positives).numpy()


def equilibrium_line(tau1: float, tau2: float, s1_grid: Sequence[float] | np.ndarray, *,
                     n_negatives: int = 4096, positives: str = "exclusive", neg_mean: float = 0.1,
                     neg_std: float = 0.1, seed: int = 0, s2_range: tuple[float, float] = (-1.0, 1.0),
                     n_bracket: int = 801, tol: float = 1e-12, negatives: torch.Tensor | None = None) -> np.ndarray:
    """s2 with K(s1, s2) = 0 for each s1 (NaN where K has no zero in ``s2_range``).

    K is scanned on ``n_bracket`` points of ``s2_range`` (default: the cosine range); the first
    sign change (or exact zero) brackets the root, which bisection refines to ``tol``. With many
    negatives and τ1 > τ2 the zero lies above 1 (ℓ2 pulls p2 all the way): NaN in [-1, 1].
    """
    lo_s2, hi_s2 = s2_range
    if not lo_s2 < hi_s2 or n_bracket < 2:
        raise ValueError(f"need s2_range low < high and n_bracket >= 2, got {s2_range}, {n_bracket}")
    neg = sample_negatives(n_negatives, neg_mean, neg_std, seed) if negatives is None else negatives
    s1 = torch.as_tensor(np.asarray(s1_grid, dtype=np.float64))
    scan = torch.linspace(lo_s2, hi_s2, n_bracket, dtype=torch.float64)
    k = k_values(s1[:, None], scan[None, :], tau1, tau2, neg, positives)
    sign = torch.sign(k)
    # first j with a sign change between j and j+1, or K exactly 0 at j
    change = (sign[:, :-1] * sign[:, 1:] < 0) | (sign[:, :-1] == 0)
    found = change.any(1) | (sign[:, -1] == 0)
    j = torch.where(change.any(1), change.int().argmax(1), torch.full_like(s1, n_bracket - 1, dtype=torch.long))
    lo = scan[j]
    hi = scan[(j + 1).clamp(max=n_bracket - 1)]
    k_lo = k.gather(1, j[:, None]).squeeze(1)
    exact = k_lo == 0
    for _ in range(int(math.ceil(math.log2(max((hi_s2 - lo_s2) / n_bracket / tol, 2.0))))):
        mid = (lo + hi) / 2
        k_mid = k_values(s1, mid, tau1, tau2, neg, positives)
        same = torch.sign(k_mid) == torch.sign(k_lo)
        lo, k_lo = torch.where(same, mid, lo), torch.where(same, k_mid, k_lo)
        hi = torch.where(same, hi, mid)
    root = torch.where(exact, scan[j], (lo + hi) / 2)
    return torch.where(found, root, torch.nan).numpy()


def check_observations(n_negatives: int, *, positives: str = "exclusive", seed: int = 0,
                       grid: int = 201) -> dict[str, bool]:
    """The paper's five observations on Fig. 4/5 (docs/papers/rince.md §c.9), each decided on the
    equilibrium lines of FIG5_SETTINGS at ``n_negatives``; True where it holds.

    1 ``flat_start``: for s1 <= 0 every line is constant within 0.02;
    2 ``rising``: the τ1 < τ2 lines exist on all of [-1, 1], never fall, and rise by > 0.2;
    3 ``ranked``: the τ1 < τ2 lines end below the identity (s2_eq(1) < 1), and the larger τ2 crosses
      the identity at a smaller s1 (τ2 sets the minimal s1 for ranking);
    4 ``lower_with_tau2``: at τ1 = 0.1 the τ2 = 0.7 line lies below the τ2 = 0.2 line everywhere;
    5 ``flat_when_tau1_larger``: the τ1 > τ2 lines exist on all of [-1, 1], each rises less than half
      of the least-rising τ1 < τ2 line, and the larger τ1 rises less (the curvature decreases).
    """
    s1 = np.linspace(-1.0, 1.0, grid)
    # a coarser bracket and tolerance than the figure's: the criteria need 1e-9, not 1e-12
    lines = {t: equilibrium_line(*t, s1, n_negatives=n_negatives, positives=positives, seed=seed,
                                 n_bracket=201, tol=1e-9) for t in FIG5_SETTINGS}
    below, above = [t for t in FIG5_SETTINGS if t[0] < t[1]], [t for t in FIG5_SETTINGS if t[0] > t[1]]

    def rise(t):
        return float(lines[t][-1] - lines[t][0])

    def crossing(t):  # smallest s1 from which the line stays below the identity
        under = lines[t] < s1
        return float(s1[np.argmax(under)]) if under.any() and under[np.argmax(under):].all() else math.inf

    complete = {t: bool(np.isfinite(lines[t]).all()) for t in FIG5_SETTINGS}
    start = s1 <= 0
    flat = all(np.nanmax(lines[t][start]) - np.nanmin(lines[t][start]) < 0.02 for t in FIG5_SETTINGS if complete[t])
    rising = all(complete[t] and (np.diff(lines[t]) >= -1e-9).all() and rise(t) > 0.2 for t in below)
    by_tau2 = sorted(below, key=lambda t: t[1])
    ranked = all(complete[t] and lines[t][-1] < 1.0 for t in below) and all(
        crossing(hi) < crossing(lo) for lo, hi in pairwise(by_tau2))
    lower = complete[(0.1, 0.2)] and complete[(0.1, 0.7)] and bool((lines[(0.1, 0.7)] < lines[(0.1, 0.2)]).all())
    by_tau1 = sorted(above, key=lambda t: t[0])
    flat_above = all(complete[t] for t in above) and all(
        rise(t) < 0.5 * min(rise(b) for b in below) for t in above) and all(
        rise(hi) < rise(lo) for lo, hi in pairwise(by_tau1))
    return {"flat_start": bool(flat), "rising": bool(rising), "ranked": bool(ranked),
            "lower_with_tau2": bool(lower), "flat_when_tau1_larger": bool(flat_above)}


def draw_fig4(out_dir: str | Path, *, settings: Sequence[tuple[float, float]] = FIG4_SETTINGS, grid: int = 101,
              n_negatives: int = FIGURE_NEGATIVES, positives: str = "exclusive", stem: str = "rince_fig4",
              variant_negatives: Sequence[int] = ()) -> list[Path]:
    """K maps over (s1, s2) ∈ [-1, 1]², one panel per (τ1, τ2): red K < 0, green K > 0, black K = 0.

    Writes ``<stem>.png`` and ``<stem>.csv`` (columns tau1,tau2,s1,s2,K), and the same pair as
    ``<stem>_n<N>.*`` for each N of ``variant_negatives``; returns the paths, the main PNG first.
    """
    plt = _pyplot()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    axis = np.linspace(-1.0, 1.0, grid)
    rows: list[tuple] = []
    fig, axes = plt.subplots(1, len(settings), figsize=(4.2 * len(settings), 3.8), dpi=120, squeeze=False)
    for ax, (tau1, tau2) in zip(axes[0], settings, strict=True):
        k = k_map(tau1, tau2, axis, axis, n_negatives=n_negatives, positives=positives)
        rows.extend((tau1, tau2, a, b, v) for a, krow in zip(axis, k, strict=True) for b, v in zip(axis, krow, strict=True))
        lim = float(np.max(np.abs(k))) or 1.0
        # x = s1, y = s2: the array is indexed [s1, s2], so transpose for imshow's [row = y, col = x]
        img = ax.imshow(k.T, origin="lower", extent=(-1, 1, -1, 1), cmap="RdYlGn", vmin=-lim, vmax=lim, aspect="auto")
        ax.contour(axis, axis, k.T, levels=[0.0], colors="black", linewidths=1.0)
        ax.set_title(f"τ1 = {tau1:g}, τ2 = {tau2:g}", fontsize=9)
        ax.set_xlabel("h(q, p1)")
        ax.set_ylabel("h(q, p2)")
        fig.colorbar(img, ax=ax, fraction=0.046)
    fig.suptitle(f"K = ∂ℓ1/∂s2 + ∂ℓ2/∂s2 ({n_negatives} negatives ~ N(0.1, 0.1), ℓ2 positives: {positives})",
                 fontsize=9)
    fig.tight_layout()
    png, table = out_dir / f"{stem}.png", out_dir / f"{stem}.csv"
    save_figure_atomic(fig, png)
    plt.close(fig)
    _write_csv(table, ("tau1", "tau2", "s1", "s2", "K"), rows)
    variants = [p for n in variant_negatives for p in draw_fig4(
        out_dir, settings=settings, grid=grid, n_negatives=n, positives=positives, stem=f"{stem}_n{n}")]
    return [png, table, *variants]


def draw_fig5(out_dir: str | Path, *, settings: Sequence[tuple[float, float]] = FIG5_SETTINGS, grid: int = 201,
              n_negatives: int = FIGURE_NEGATIVES, positives: str = "exclusive",
              s2_range: tuple[float, float] = (-1.0, 1.0), stem: str = "rince_fig5",
              variant_negatives: Sequence[int] = ()) -> list[Path]:
    """Equilibrium lines s2_eq(s1) per (τ1, τ2) and the identity s2 = s1 (grey).

    Writes ``<stem>.png`` and ``<stem>.csv`` (columns tau1,tau2,s1,s2_eq; s2_eq empty where K
    has no zero in ``s2_range``), and the same pair as ``<stem>_n<N>.*`` for each N of
    ``variant_negatives``; returns the paths, the main PNG first. A setting without any zero is
    still listed in the legend, marked "no zero". Lines take the paper's colours in FIG5_SETTINGS
    order (blue, orange: τ1 < τ2; green, red: τ1 > τ2).
    """
    plt = _pyplot()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    s1 = np.linspace(-1.0, 1.0, grid)
    rows: list[tuple] = []
    fig, ax = plt.subplots(figsize=(5.0, 4.4), dpi=120)
    ax.plot(s1, s1, color="grey", lw=1, label="h(q,p2) = h(q,p1)")
    for i, (tau1, tau2) in enumerate(settings):
        line = equilibrium_line(tau1, tau2, s1, n_negatives=n_negatives, positives=positives, s2_range=s2_range)
        rows.extend((tau1, tau2, a, "" if math.isnan(b) else b) for a, b in zip(s1, line, strict=True))
        none = " (no zero in range)" if np.isnan(line).all() else ""
        ax.plot(s1, line, color=FIG5_COLOURS[i % len(FIG5_COLOURS)], label=f"τ1 = {tau1:g}, τ2 = {tau2:g}{none}")
    ax.set_xlim(-1, 1)
    ax.set_ylim(*s2_range)
    ax.set_xlabel("h(q, p1)")
    ax.set_ylabel("h(q, p2) at K = 0")
    ax.set_title(f"equilibrium lines ({n_negatives} negatives, ℓ2 positives: {positives})", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    png, table = out_dir / f"{stem}.png", out_dir / f"{stem}.csv"
    save_figure_atomic(fig, png)
    plt.close(fig)
    _write_csv(table, ("tau1", "tau2", "s1", "s2_eq"), rows)
    variants = [p for n in variant_negatives for p in draw_fig5(
        out_dir, settings=settings, grid=grid, n_negatives=n, positives=positives, s2_range=s2_range,
        stem=f"{stem}_n{n}")]
    return [png, table, *variants]


def _write_csv(path: Path, header: Sequence[str], rows: list[tuple]) -> None:
    write_csv(path, header, ([v if isinstance(v, str) else float(v) for v in row] for row in rows))


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only; no display on cluster nodes
    import matplotlib.pyplot as plt

    return plt
