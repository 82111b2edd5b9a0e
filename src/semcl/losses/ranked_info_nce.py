"""Ranked InfoNCE: one loss for InfoNCE, supervised contrastive (SCL) and RINCE.

RINCE (Hoffmann et al., "Ranking Info Noise Contrastive Estimation", AAAI 2022) ranks the
positives of an anchor (rank 1 = most similar, e.g. same class; rank 2 = same superclass; ...)
and adds one InfoNCE term per rank, each with its own temperature τ_1 < τ_2 < ... .

Inputs: ``sim`` [B, N] anchor-candidate similarities s (not divided by τ); ``ranks`` [B, N]
with 0 = negative, r >= 1 = positive of rank r, -1 = ignored (no part anywhere).

Term r (temperature τ_r) has positives P_r = {rank == r} (``positives="rank"``) or
{1 <= rank <= r} (``"cumulative"``) and negatives N_r = {rank == 0} ∪ {rank > r}; with "rank"
positives the entries of rank 1..r-1 take no part in term r. With e_j = exp(s_j / τ_r):

    "in":   ℓ_r(a) = -log( Σ_{p∈P_r} e_p / (Σ_{p∈P_r} e_p + Σ_{n∈N_r} e_n) ),
            averaged over the anchors whose P_r is non-empty;
    "out":  ℓ_r(a, p) = -log( e_p / (e_p + Σ_{n∈N_r} e_n) ) for every positive p,
            averaged over all (anchor, positive) pairs of the batch;
    "out_in": "out" for rank 1, "in" for ranks >= 2.

A term whose positives are empty for the whole batch is 0; a row with positives but no
negatives has loss 0 (log 1). The terms are summed (the paper's Σ_r ℓ_r) or averaged over R
(the official code). SCL-in / SCL-out are R = 1; plain InfoNCE is R = 1 with one positive.

The work runs in row blocks under a custom autograd Function whose backward is analytic
(d ℓ / d s has a closed form per term), so no [B, N] tensor is kept per rank: the gradient is
accumulated into one [B, N] buffer while the forward pass has the exponentials at hand.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

FORMS = ("in", "out", "out_in")
POSITIVES = ("rank", "cumulative")
REDUCTIONS = ("sum", "mean")
# Rows are processed in blocks of about this many elements: small enough that the dozen
# elementwise passes per term hit the CPU cache, big enough that per-op overhead stays small.
_BLOCK_ELEMS = 1 << 19


def tau_from_similarity(sim_level: float, tau_min: float, tau_max: float) -> float:
    """τ(sim) = τ_min + (1 − sim)(τ_max − τ_min): similar ranks get a low temperature."""
    if not 0.0 < tau_min <= tau_max:
        raise ValueError(f"need 0 < tau_min <= tau_max, got tau_min={tau_min}, tau_max={tau_max}")
    if not 0.0 <= sim_level <= 1.0:
        raise ValueError(f"sim_level must lie in [0, 1], got {sim_level}")
    return tau_min + (1.0 - sim_level) * (tau_max - tau_min)


def taus_for_levels(levels: Sequence[float], tau_min: float, tau_max: float) -> list[float]:
    """One temperature per rank from its similarity level (rank 1 first), via tau_from_similarity."""
    if len(levels) == 0:
        raise ValueError("levels must name at least one rank")
    return [tau_from_similarity(float(level), tau_min, tau_max) for level in levels]


def ranked_info_nce(
    sim: Tensor,
    ranks: Tensor,
    taus: Sequence[float],
    *,
    form: str,
    positives: str = "rank",
    rank_reduction: str = "sum",
    return_terms: bool = False,
) -> Tensor:
    """RINCE / SCL / InfoNCE loss (see the module docstring); returns a scalar or the [R] terms."""
    taus_t = _check(sim, ranks, taus, form, positives, rank_reduction)
    terms = _RankedTerms.apply(sim, ranks, taus_t, form, positives, (True,) * len(taus_t))
    return _reduce(terms, rank_reduction, return_terms)


def key_first_rank_only(
    sim: Tensor,
    ranks: Tensor,
    taus: Sequence[float],
    *,
    key_col: int = 0,
    form: str,
    positives: str,
    rank_reduction: str,
) -> Tensor:
    """The official CIFAR code's variant: the anchor's own key takes part in term 1 only.

    Column ``key_col`` (each anchor's momentum key, rank 1) is kept for term 1 and removed from
    terms 2..R, even with cumulative positives where it would otherwise be a positive of every
    term. Term 1 uses the full ``sim``/``ranks``; the terms are then reduced by ``rank_reduction``.
    """
    taus_t = _check(sim, ranks, taus, form, positives, rank_reduction)
    if not -sim.shape[1] <= key_col < sim.shape[1]:
        raise ValueError(f"key_col {key_col} is out of range for {sim.shape[1]} columns")
    if not bool((ranks[:, key_col] == 1).all()):
        raise ValueError(f"key column {key_col} must have rank 1 in every row")
    n_ranks = len(taus_t)
    first = _RankedTerms.apply(sim, ranks, taus_t, form, positives, (True,) + (False,) * (n_ranks - 1))
    if n_ranks == 1:
        return _reduce(first, rank_reduction, False)
    # Marking the column ignored removes it from the later terms without copying `sim`.
    without_key = ranks.clone()
    without_key[:, key_col] = -1
    rest = _RankedTerms.apply(sim, without_key, taus_t, form, positives, (False,) + (True,) * (n_ranks - 1))
    return _reduce(first + rest, rank_reduction, False)


def _reduce(terms: Tensor, rank_reduction: str, return_terms: bool) -> Tensor:
    if return_terms:
        return terms
    return terms.sum() if rank_reduction == "sum" else terms.mean()


def _check(sim: Tensor, ranks: Tensor, taus: Sequence[float], form: str, positives: str, reduction: str):
    if form not in FORMS:
        raise ValueError(f"unknown form {form!r}; expected one of {FORMS}")
    if positives not in POSITIVES:
        raise ValueError(f"unknown positives {positives!r}; expected one of {POSITIVES}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown rank_reduction {reduction!r}; expected one of {REDUCTIONS}")
    taus_t = tuple(float(t) for t in taus)
    if len(taus_t) == 0 or not all(0.0 < t < float("inf") for t in taus_t):
        raise ValueError(f"taus must be a non-empty sequence of positive finite temperatures, got {taus_t}")
    if sim.dim() != 2 or ranks.shape != sim.shape:
        raise ValueError(f"sim and ranks must both be [B, N], got {tuple(sim.shape)} and {tuple(ranks.shape)}")
    if not sim.is_floating_point():
        raise ValueError(f"sim must be a floating-point tensor, got {sim.dtype}")
    if ranks.is_floating_point() or ranks.is_complex() or ranks.dtype == torch.bool:
        raise ValueError(f"ranks must be an integer tensor, got {ranks.dtype}")
    if ranks.device != sim.device:
        raise ValueError(f"sim is on {sim.device} but ranks is on {ranks.device}")
    if ranks.numel() > 0:
        lo, hi = (int(v) for v in torch.aminmax(ranks))
        if lo < -1:
            raise ValueError(f"ranks must be >= -1 (-1 = ignored), found {lo}")
        if hi > len(taus_t):
            raise ValueError(f"rank {hi} found but only {len(taus_t)} temperatures given")
    return taus_t


class _RankedTerms(torch.autograd.Function):
    """Per-rank terms [R]; the gradient is built during the forward pass when sim needs one."""

    @staticmethod
    def forward(ctx, sim, ranks, taus, form, positives, active):
        want_grad = ctx.needs_input_grad[0]
        terms, grad = _terms_and_grad(sim.detach(), ranks, taus, form, positives, active, want_grad)
        ctx.save_for_backward(sim, ranks)
        ctx.cfg = (taus, form, positives, active)
        # Kept on ctx (not saved) so backward can scale it in place and drop it.
        ctx.grad = grad
        return terms

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_terms):
        sim, ranks = ctx.saved_tensors
        taus, form, positives, active = ctx.cfg
        weights = grad_terms.tolist()
        grad, ctx.grad = ctx.grad, None
        if grad is None or any(w != weights[0] for w in weights):
            # Unequal weights per term (or a second backward): recompute with those weights.
            grad = _terms_and_grad(sim.detach(), ranks, taus, form, positives, active, True, weights)[1]
        elif weights[0] != 1.0:
            grad.mul_(weights[0])
        return grad, None, None, None, None, None


def _row_blocks(n_rows: int, n_cols: int) -> list[tuple[int, int]]:
    # Blocks of at most _BLOCK_ELEMS elements, and at least 8 of them for big inputs so that the
    # ~10 block temporaries stay near one [B, N] tensor; fewer blocks = fewer op launches.
    target = min(_BLOCK_ELEMS, max(n_rows * n_cols // 8, 1 << 16))
    step = max(1, target // max(n_cols, 1))
    return [(lo, min(lo + step, n_rows)) for lo in range(0, n_rows, step)]


def _terms_and_grad(
    sim: Tensor,
    ranks: Tensor,
    taus: tuple[float, ...],
    form: str,
    positives: str,
    active: tuple[bool, ...],
    want_grad: bool,
    weights: Sequence[float] | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Terms [R] and, when ``want_grad``, Σ_r weights_r · d term_r / d sim (weights default to 1)."""
    n_rows, n_ranks, dtype, device = sim.shape[0], len(taus), sim.dtype, sim.device
    weights = [1.0] * n_ranks if weights is None else list(weights)
    blocks = _row_blocks(*sim.shape)
    is_out = [form == "out" or (form == "out_in" and r == 1) for r in range(1, n_ranks + 1)]

    # Pass 1: per row, c_k = Σ_j min(max(rank_j, 0), k) for k = 0..R; then #[rank >= k] = c_k - c_{k-1}
    # and #ignored = c_R - Σ_j rank_j, all exact integer sums at the cost of R clamps per block.
    cum = torch.zeros(n_rows, n_ranks + 1, dtype=torch.float64, device=device)
    n_ignored = torch.empty(n_rows, dtype=torch.float64, device=device)
    for lo, hi in blocks:
        x = ranks[lo:hi].to(dtype)
        x_pos = x.clamp(min=0.0)
        cum[lo:hi, n_ranks] = x_pos.sum(1, dtype=torch.float64)
        n_ignored[lo:hi] = cum[lo:hi, n_ranks] - x.sum(1, dtype=torch.float64)
        for k in range(n_ranks - 1, 0, -1):  # descending, so the clamps can run in place
            cum[lo:hi, k] = x_pos.clamp_(max=float(k)).sum(1, dtype=torch.float64)
    at_least = cum.diff(dim=1)  # [:, k - 1] = #[rank >= k], k = 1..R
    at_least = torch.cat([at_least, torch.zeros_like(at_least[:, :1])], 1)
    low = at_least[:, :n_ranks] if positives == "rank" else at_least[:, :1]
    npos = (low - at_least[:, 1:]).to(dtype)  # positives per row and term
    has_pos = (npos > 0).to(dtype)
    denom = torch.where(torch.tensor(is_out, device=device), npos.sum(0), has_pos.sum(0))
    denoms = denom.tolist()
    ignored = [bool(n_ignored[lo:hi].any()) for lo, hi in blocks]
    if not bool(torch.isfinite(sim.sum())):  # rare: inf / nan, allowed only in ignored entries
        sim = torch.where(ranks >= 0, sim, 0.0)

    # Pass 2: terms and gradient, block by block.
    totals = torch.zeros(n_ranks, dtype=dtype, device=device)
    grad = torch.empty_like(sim) if want_grad else None
    big = torch.finfo(dtype).max
    for (lo, hi), has_ignored in zip(blocks, ignored, strict=True):
        s, x = sim[lo:hi], ranks[lo:hi].to(dtype)
        # Row shift m = max over the non-ignored entries (ignored ones pushed to about -big).
        ign = x.clamp(-1.0, 0.0) if has_ignored else None  # -1 on ignored entries, else 0
        shift = s.amax(1, keepdim=True) if ign is None else torch.add(s, ign, alpha=big).amax(1, keepdim=True)
        if ign is not None:
            shift = torch.where(shift > -0.5 * big, shift, 0.0)  # rows with every entry ignored
        ge_1 = x.clamp(0.0, 1.0)
        ge_r = ge_1  # [rank >= r]
        gb = grad[lo:hi] if grad is not None else None
        first = True  # nothing written to this block of grad yet
        for r, tau in enumerate(taus, start=1):
            ge_next = x.sub(r).clamp_(0.0, 1.0) if r < n_ranks else None  # [rank >= r + 1]
            if active[r - 1]:
                low_r = ge_r if positives == "rank" else ge_1
                pos = low_r if ge_next is None else low_r - ge_next
                # -1 on entries outside term r: ignored, and ranks 1..r-1 with "rank" positives.
                out_of_term = ge_r - ge_1 if positives == "rank" and r > 1 else None
                if ign is not None:
                    out_of_term = ign if out_of_term is None else out_of_term.add_(ign)
                # z = (s - m) / τ <= 0 on the term's entries; the others go to about -big, so
                # that exp gives exactly 0 there and plain row sums cover only the term.
                z = torch.add(shift * (-1.0 / tau), s, alpha=1.0 / tau)
                if out_of_term is not None:
                    z.add_(out_of_term, alpha=big)
                scale = weights[r - 1] / (tau * denoms[r - 1]) if denoms[r - 1] > 0 else 0.0
                g = gb if gb is not None and scale != 0.0 else None
                if is_out[r - 1]:
                    row = _out_term(z, pos, g, scale, first)
                else:
                    row = _in_term(z, pos, has_pos[lo:hi, r - 1 : r], g, scale, first)
                first = first and g is None
                totals[r - 1] += row
            ge_r = ge_next
        if gb is not None and first:
            gb.zero_()  # no term wrote this block
    terms = torch.where(denom > 0, totals / denom.clamp_min(1), 0.0)
    return terms, grad


def _in_term(z: Tensor, pos: Tensor, has_pos: Tensor, grad: Tensor | None, scale: float, first: bool) -> Tensor:
    """Σ over rows with positives of log S_A − log S_P ("in" form); adds scale · d / d z to grad.

    With S_A = Σ_{P∪N} e and S_P = Σ_P e:  d ℓ / d z_j = e_j / S_A − [j∈P] e_j / S_P.
    """
    tiny = torch.finfo(z.dtype).tiny
    e = z.exp_()
    e_pos = e * pos
    # Clamped sums keep rows without positives finite; has_pos (0/1) then zeroes them.
    s_all = e.sum(1, keepdim=True).clamp_min_(tiny)
    s_pos = e_pos.sum(1, keepdim=True).clamp_min_(tiny)
    row = ((s_all.log() - s_pos.log()) * has_pos).sum()
    if grad is not None:
        a = has_pos.div(s_all).mul_(scale)
        if first:
            torch.mul(e, a, out=grad)
        else:
            grad.addcmul_(e, a)
        grad.addcmul_(e_pos, has_pos.div(s_pos), value=-scale)
    return row


def _out_term(z: Tensor, pos: Tensor, grad: Tensor | None, scale: float, first: bool) -> Tensor:
    """Σ over pairs of log(e_p + S_N) − z_p ("out" form); adds scale · d / d z to grad.

    d / d z_p = −S_N / (e_p + S_N) on positives; d / d z_n = e_n Σ_p 1 / (e_p + S_N) on negatives.
    """
    tiny = torch.finfo(z.dtype).tiny
    e = z.exp()
    t = e * pos
    e_neg = e.sub_(t)  # exact: each entry is either e or 0
    s_neg = e_neg.sum(1, keepdim=True)
    t.add_(s_neg).clamp_min_(tiny)  # e_p + S_N; the clamp keeps log finite if both underflow
    inv = torch.reciprocal(t).mul_(pos) if grad is not None else None
    row = t.log_().mul_(pos).sum(1, keepdim=True) - z.mul_(pos).sum(1, keepdim=True)
    # Rows without negatives: the exact loss of each pair is log 1 = 0.
    row = (row * (s_neg > 0)).sum()
    if grad is not None and inv is not None:
        c = inv.sum(1, keepdim=True).mul_(scale)
        if first:
            torch.mul(e_neg, c, out=grad)
        else:
            grad.addcmul_(e_neg, c)
        grad.addcmul_(inv, s_neg, value=-scale)
    return row
