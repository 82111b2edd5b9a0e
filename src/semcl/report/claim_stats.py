"""The test that judges one claim "A beats B on a column" from per-seed values.

Claim: s · (mean(A) − mean(B)) > m, with s = +1 for direction `greater`, −1 for `less`, and
m >= 0 the claim's margin. The boundary of the claim is the difference Δ0 = s · m.

- Welch's t-test (unequal variances, two-sided) of H0: mean(A) − mean(B) = Δ0, i.e. Welch's t on
  (A − Δ0) against B:  t = (mean(A) − Δ0 − mean(B)) / sqrt(var(A)/n_A + var(B)/n_B), var with ddof=1.
- Percentile bootstrap interval of Δ = mean(A*) − mean(B*): A and B are resampled independently with
  replacement (each its own size), `resamples` times from a seeded generator; the interval is the
  (α/2, 1 − α/2) quantiles of the resampled Δ.
- supported:    Δ on the claimed side of Δ0, p < α, and the interval excludes Δ0 on that side;
  contradicted: Δ on the other side of Δ0, p < α, and the interval excludes Δ0 on that side;
  inconclusive: otherwise; "inconclusive (n < 2)" when a side has fewer than two seeds.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

ALPHA = 0.05
RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
DIRECTIONS = {"greater": 1, "less": -1}

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
INCONCLUSIVE_FEW = "inconclusive (n < 2)"


def rule_text(alpha: float = ALPHA, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> str:
    """The decision rule, as printed above every verdict table."""
    level = round(100 * (1 - alpha))
    return (f"Δ = mean(A) − mean(B) over seeds; the claim is Δ > m (greater) or Δ < −m (less), m = margin (0 unless "
            f"stated). Welch's t-test (two-sided, unequal variances) of H0: Δ = ±m, and a percentile bootstrap "
            f"{level}% interval of Δ ({resamples:,} resamples of each side's seeds with replacement, generator seed "
            f"{seed}). supported: Δ beyond the claimed bound with p < {alpha} and the interval excluding the bound; "
            f"contradicted: Δ on the other side of the bound with p < {alpha} and the interval excluding it; "
            f"inconclusive otherwise, or with fewer than 2 seeds on a side (n < 2).")


@dataclass(frozen=True)
class Judgement:
    verdict: str
    mean_a: float
    std_a: float  # sample std, ddof=1 (nan for n < 2)
    n_a: int
    mean_b: float
    std_b: float
    n_b: int
    diff: float  # mean(A) − mean(B)
    p: float  # Welch two-sided p of H0: diff = bound (nan when not computed)
    ci_low: float
    ci_high: float


def _std(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1)) if len(x) > 1 else math.nan


def welch_p(a: np.ndarray, b: np.ndarray, bound: float) -> float:
    """Two-sided p of Welch's t-test of H0: mean(a) − mean(b) = bound (nan when both sides are constant
    and equal after the shift: no evidence either way)."""
    from scipy import stats

    with warnings.catch_warnings():  # near-constant samples: scipy warns, the p-value stands
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.ttest_ind(a - bound, b, equal_var=False).pvalue)


def bootstrap_interval(a, b, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                       alpha: float = ALPHA) -> tuple[float, float]:
    """Percentile interval of mean(A*) − mean(B*) over `resamples` independent resamplings of each side."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    rng = np.random.default_rng(seed)
    ma = a[rng.integers(0, len(a), size=(resamples, len(a)))].mean(axis=1)
    mb = b[rng.integers(0, len(b), size=(resamples, len(b)))].mean(axis=1)
    lo, hi = np.quantile(ma - mb, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def judge(a: list[float], b: list[float], direction: str, margin: float = 0.0, *, alpha: float = ALPHA,
          resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Judgement:
    """Verdict of the claim s·(mean(a) − mean(b)) > margin (s from `direction`) under the module's rule."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {sorted(DIRECTIONS)}, not {direction!r}")
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(xa) == 0 or len(xb) == 0:
        raise ValueError("judge needs at least one value per side")
    mean_a, mean_b = float(xa.mean()), float(xb.mean())
    diff = mean_a - mean_b
    parts = dict(mean_a=mean_a, std_a=_std(xa), n_a=len(xa), mean_b=mean_b, std_b=_std(xb), n_b=len(xb), diff=diff)
    if len(xa) < 2 or len(xb) < 2:
        return Judgement(INCONCLUSIVE_FEW, p=math.nan, ci_low=math.nan, ci_high=math.nan, **parts)
    s = DIRECTIONS[direction]
    bound = s * margin
    p = welch_p(xa, xb, bound)
    lo, hi = bootstrap_interval(xa, xb, resamples, seed, alpha)
    significant = not math.isnan(p) and p < alpha
    # on the claimed side: s·diff > margin and the whole interval past the bound (s·lo > margin for s = +1 ...)
    claimed_side = s * (diff - bound) > 0 and min(s * (lo - bound), s * (hi - bound)) > 0
    other_side = s * (diff - bound) < 0 and max(s * (lo - bound), s * (hi - bound)) < 0
    verdict = SUPPORTED if significant and claimed_side else CONTRADICTED if significant and other_side else INCONCLUSIVE
    return Judgement(verdict, p=p, ci_low=lo, ci_high=hi, **parts)


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order: the k-th smallest of m is multiplied by
    (m - k + 1), made non-decreasing in that order and capped at 1. Rejecting where adjusted p < alpha controls
    the chance of any false "supported" among the m comparisons at alpha."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out, running = [1.0] * m, 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * pvalues[i]))
        out[i] = running
    return out
