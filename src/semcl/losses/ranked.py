"""Ranked InfoNCE: one loss for InfoNCE, supervised contrastive (SCL) and RINCE.

RINCE (Hoffmann et al., "Ranking Info Noise Contrastive Estimation", AAAI 2022) ranks an
anchor's positives (rank 1 = most similar, e.g. same class; rank 2 = same superclass; ...) and
adds one InfoNCE term per rank, each with its own temperature τ_1 < τ_2 < ... .

Inputs: ``sim`` [B, N] anchor-candidate similarities s (not divided by τ); ``ranks`` [B, N]
with 0 = negative, r >= 1 = positive of rank r, -1 = ignored (no part anywhere).

Term r (temperature τ_r) has positives P_r = {rank == r} (``positives="rank"``) or
{1 <= rank <= r} (``"cumulative"``) and negatives N_r = {rank == 0} ∪ {rank > r}; with "rank"
positives the entries of rank 1..r-1 take no part in term r. With e_j = exp(s_j / τ_r):

    "in":   ℓ_r(a) = -log( Σ_{p∈P_r} e_p / (Σ_{p∈P_r} e_p + Σ_{n∈N_r} e_n) ),
            averaged over the anchors whose P_r is non-empty;
    "out":  ℓ_r(a, p) = -log( e_p / (e_p + Σ_{n∈N_r} e_n) ) for every positive p,
            averaged over all (anchor, positive) pairs of the batch;
    "out_in": "out" for rank 1, "in" for ranks >= 2;
    "khosla_out": Khosla's L_out, the other positives in the denominator, per-anchor mean
            (semcl.losses.ranked_variants).

``prob_floor`` f > 0 drops the anchors ("in") or pairs ("out") whose probability is <= f before
the mean (the official CIFAR code's 1e-7 floor; see semcl.losses.ranked_variants).

A term without any positive in the batch is 0; a row with positives but no negatives has loss 0
(log 1). The terms are summed (the paper's Σ_r ℓ_r) or averaged over R (the official code).
SCL-in / SCL-out are R = 1; plain InfoNCE is R = 1 with one positive per row.

Implementation: a custom autograd Function with an analytic gradient (per term, d ℓ / d(s/τ) =
softmax-like weights, see _in_term / _out_term) that is accumulated into one [B, N] buffer while
the forward pass has the exponentials at hand, in row blocks (cache-sized temporaries), so that
no [B, N] tensor is kept per rank. Logits use a shared row shift m (max over non-ignored entries); the few rows
where that underflows (s/τ ranges beyond ~87 in float32) are redone exactly by _exact_rows.

That path reads values on the host (the ranks' range, the normalisers, which rows to redo, the backward's
weights), which is free on the CPU only (semcl.runtime.host_sync). On an accelerator the terms come from the
plain-autograd form of semcl.losses.ranked_variants instead (per-set logsumexp: exact on every row, static
shapes, no host read); the two agree to float rounding (tests/losses/test_ranked_variants.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from semcl.losses.ranked_variants import variant_terms
from semcl.runtime.host_sync import check, reads_are_free

FORMS = ("in", "out", "out_in", "khosla_out")
_FUSED_FORMS = ("in", "out", "out_in")  # served by _RankedTerms when prob_floor == 0
POSITIVES = ("rank", "cumulative")
REDUCTIONS = ("sum", "mean")
# Row blocks (for inputs of at least _MIN_SPLIT elements): with four, the ~6 block temporaries
# stay below 2 [B, N] tensors; more blocks would mean more op launches, each a thread-pool round
# trip, which is what costs most on a busy CPU.
_N_BLOCKS = 4
_MIN_SPLIT = 1 << 16
_LOG2E = 1.4426950408889634  # exp2 is several times faster than exp on CPU: logits in base 2
_LN2 = 0.6931471805599453
_TAME = 1e6  # |sim| up to this keeps every logit finite for any sane τ


def tau_from_similarity(sim_level: float, tau_min: float, tau_max: float) -> float:
    """τ(sim) = τ_min + (1 − sim)(τ_max − τ_min): more similar ranks get lower temperatures."""
    if not 0.0 < tau_min <= tau_max:
        raise ValueError(f"need 0 < tau_min <= tau_max, got tau_min={tau_min}, tau_max={tau_max}")
    if not 0.0 <= sim_level <= 1.0:
        raise ValueError(f"sim_level must lie in [0, 1], got {sim_level}")
    return tau_min + (1.0 - sim_level) * (tau_max - tau_min)


def taus_for_levels(levels: Sequence[float], tau_min: float, tau_max: float) -> list[float]:
    """One temperature per rank (rank 1 first) from its similarity level, via tau_from_similarity."""
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
    prob_floor: float = 0.0,
    return_terms: bool = False,
) -> Tensor:
    """RINCE / SCL / InfoNCE loss (module docstring); a scalar, or the [R] terms if ``return_terms``."""
    taus_t = _check(sim, ranks, taus, form, positives, rank_reduction, prob_floor)
    terms = _terms(sim, ranks, taus_t, form, positives, (True,) * len(taus_t), prob_floor)
    if return_terms:
        return terms
    return terms.sum() if rank_reduction == "sum" else terms.mean()


def key_first_rank_only(
    sim: Tensor,
    ranks: Tensor,
    taus: Sequence[float],
    *,
    key_col: int = 0,
    form: str,
    positives: str,
    rank_reduction: str,
    prob_floor: float = 0.0,
) -> Tensor:
    """The official CIFAR code's variant: the anchor's own momentum key takes part in term 1 only.

    Term 1 uses the full ``sim``/``ranks``; terms 2..R drop column ``key_col`` (rank 1 in every
    row), even with cumulative positives, where it would otherwise be a positive of every term.
    The terms are then reduced by ``rank_reduction``; ``prob_floor`` as in ranked_info_nce.
    """
    taus_t = _check(sim, ranks, taus, form, positives, rank_reduction, prob_floor)
    if not -sim.shape[1] <= key_col < sim.shape[1]:
        raise ValueError(f"key_col {key_col} is out of range for {sim.shape[1]} columns")
    check((ranks[:, key_col] == 1).all(), f"key column {key_col} must have rank 1 in every row")
    later = (False,) + (True,) * (len(taus_t) - 1)
    terms = _terms(sim, ranks, taus_t, form, positives, (True,) + (False,) * (len(taus_t) - 1), prob_floor)
    if any(later):
        # An ignored column takes no part, as if removed, without copying `sim`.
        without_key = ranks.clone()
        without_key[:, key_col] = -1
        terms = terms + _terms(sim, without_key, taus_t, form, positives, later, prob_floor)
    return terms.sum() if rank_reduction == "sum" else terms.mean()


def _terms(sim, ranks, taus, form, positives, active, prob_floor) -> Tensor:
    """Per-rank terms [R]: the fused path for the default forms on the CPU, else the plain-autograd variants
    (module docstring: no host read on an accelerator)."""
    if prob_floor == 0.0 and form in _FUSED_FORMS and reads_are_free(sim):
        return _RankedTerms.apply(sim, ranks, taus, form, positives, active)
    if ranks.numel() > 0:
        if reads_are_free(ranks):
            _check_rank_range(ranks, len(taus))
        else:
            low, high = torch.aminmax(ranks)
            check((low >= -1) & (high <= len(taus)),
                  f"ranks must lie in [-1, {len(taus)}] (-1 = ignored, at most one rank per temperature)")
    return variant_terms(sim, ranks, taus, form, positives, active, prob_floor)


def _check_rank_range(ranks: Tensor, n_ranks: int) -> tuple[int, int]:
    """(lowest, highest) rank, read on the host (the CPU path, which branches on them)."""
    low, high = (int(v) for v in torch.aminmax(ranks))
    if low < -1:
        raise ValueError(f"ranks must be >= -1 (-1 = ignored), found {low}")
    if high > n_ranks:
        raise ValueError(f"rank {high} found but only {n_ranks} temperatures given")
    return low, high


def _check(sim: Tensor, ranks: Tensor, taus: Sequence[float], form: str, positives: str, reduction: str,
           prob_floor: float = 0.0):
    if form not in FORMS:
        raise ValueError(f"unknown form {form!r}; expected one of {FORMS}")
    if positives not in POSITIVES:
        raise ValueError(f"unknown positives {positives!r}; expected one of {POSITIVES}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown rank_reduction {reduction!r}; expected one of {REDUCTIONS}")
    if not 0.0 <= prob_floor < 1.0:
        raise ValueError(f"prob_floor must lie in [0, 1), got {prob_floor}")
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
    return taus_t  # the range of the ranks is checked in _prepare, which reads them anyway


class _RankedTerms(torch.autograd.Function):
    """Per-rank terms [R]; the gradient is built during the forward pass when sim needs one."""

    @staticmethod
    def forward(ctx, sim, ranks, taus, form, positives, active):
        terms, grad = _terms_and_grad(sim, ranks, taus, form, positives, active, ctx.needs_input_grad[0])
        ctx.save_for_backward(sim, ranks)
        ctx.cfg = (taus, form, positives, active)
        ctx.grad = grad  # on ctx, not saved: backward scales it in place and drops it
        return terms

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_terms):
        weights = grad_terms.tolist()
        grad, ctx.grad = ctx.grad, None
        if grad is None or any(w != weights[0] for w in weights):
            # Unequal weights per term (or a second backward): recompute with those weights.
            sim, ranks = ctx.saved_tensors
            grad = _terms_and_grad(sim, ranks, *ctx.cfg, True, weights)[1]
        elif weights[0] != 1.0:
            grad.mul_(weights[0])
        return grad, None, None, None, None, None


def _at_least(x: Tensor, k: int) -> Tensor:
    """[x >= k] as 0/1 in x's small integer dtype: integer sub/clamp, no (slow) bool ops."""
    return (x - (k - 1)).clamp_(0, 1)


def _prepare(sim: Tensor, ranks: Tensor, n_ranks: int, positives: str):
    """Checks the ranks; returns ``sim`` (tamed), the ranks as int8 (a quarter of a float copy),
    positives per row and term [B, R], the row shift m [B, 1] (max over non-ignored entries) and
    whether any entry is ignored."""
    low, _ = _check_rank_range(ranks, n_ranks)
    small = ranks.to(torch.int8 if n_ranks < 127 else torch.int16)
    counts = [_at_least(small, k).sum(1, dtype=torch.int32) for k in range(1, n_ranks + 1)]
    counts = torch.stack([*counts, torch.zeros_like(counts[0])], 1).to(sim.dtype)  # #[rank >= k], k = 1..R+1
    npos = (counts[:, :n_ranks] if positives == "rank" else counts[:, :1]) - counts[:, 1:]
    if low >= 0:
        return sim, small, npos, sim.amax(1, keepdim=True), False
    extremes = torch.aminmax(sim)
    if not bool(torch.maximum(-extremes.min, extremes.max) <= _TAME):
        # Rare: inf / nan / huge values, allowed in ignored entries: zero those, so that no inf
        # or nan reaches the sums (valid entries are the caller's business).
        sim = torch.where(ranks >= 0, sim, 0.0)
    big = torch.finfo(sim.dtype).max  # ignored entries pushed to about -big for the max
    shift = small.clamp(-1, 0).to(sim.dtype).mul_(big).add_(sim).amax(1, keepdim=True)
    return sim, small, npos, torch.where(shift > -0.5 * big, shift, 0.0), True  # all ignored: m = 0


def _terms_and_grad(sim, ranks, taus, form, positives, active, want_grad, weights=None):
    """Terms [R] and, if ``want_grad``, Σ_r weights_r · d term_r / d sim (weights default to 1)."""
    n_ranks, dtype, device = len(taus), sim.dtype, sim.device
    if sim.numel() == 0:
        return torch.zeros(n_ranks, dtype=dtype, device=device), torch.zeros_like(sim) if want_grad else None
    weights = [1.0] * n_ranks if weights is None else list(weights)
    is_out = [form == "out" or (form == "out_in" and r == 1) for r in range(1, n_ranks + 1)]
    sim, small, npos, shift_all, any_ignored = _prepare(sim.detach(), ranks, n_ranks, positives)
    has_pos = (npos > 0).to(dtype)
    # Normalisers: anchors with positives ("in") or (anchor, positive) pairs ("out").
    denoms = torch.where(torch.tensor(is_out, device=device), npos.sum(0), has_pos.sum(0)).tolist()
    totals = torch.zeros(n_ranks, dtype=dtype, device=device)
    grad = torch.empty_like(sim) if want_grad else None
    big = torch.finfo(dtype).max
    n_rows, n_cols = sim.shape
    step = -(-n_rows // (_N_BLOCKS if n_rows * n_cols >= _MIN_SPLIT else 1))
    for lo in range(0, n_rows, step):
        s, x, shift = sim[lo : lo + step], small[lo : lo + step], shift_all[lo : lo + step]
        ign = x.clamp(-1, 0) if any_ignored and bool(x.amin() < 0) else None  # -1 on ignored entries
        # The 0/1 and -1/0 masks are built in int8, where arithmetic is cheap.
        ge_1 = ge_r = _at_least(x, 1)  # [rank >= r]
        gb = grad[lo : lo + step] if grad is not None else None
        first = True  # nothing written to this block of grad yet
        for r, tau in enumerate(taus, start=1):
            ge_next = _at_least(x, r + 1) if r < n_ranks else None
            if active[r - 1]:
                pos = ge_r if positives == "rank" else ge_1
                pos = pos if ge_next is None else pos - ge_next
                # -1 outside term r: ignored entries, and ranks 1..r-1 with "rank" positives.
                outside = ge_r - ge_1 if positives == "rank" and r > 1 else None
                if ign is not None:
                    outside = ign if outside is None else outside + ign
                # z = (s − m) log2(e) / τ <= 0 in the term; outside it about -big, where 2^z is
                # then exactly 0, so that plain row sums cover just the term.
                rate = _LOG2E / tau
                z = torch.add(shift * -rate, s, alpha=rate)
                if outside is not None:
                    z.add_(outside, alpha=big)
                scale = weights[r - 1] / (tau * denoms[r - 1]) if denoms[r - 1] > 0 else 0.0
                g = gb if gb is not None and scale != 0.0 else None
                row_has_pos = has_pos[lo : lo + step, r - 1 : r]
                term = _out_term if is_out[r - 1] else _in_term
                # One float copy of the positives mask: mixed int8-float ops would each make one.
                total, bad = term(z, pos.to(dtype), row_has_pos, g, scale, first)
                first = first and g is None
                if bad is not None:  # rare: rows the shared shift cannot serve
                    loss, row_grad = _exact_rows(s[bad], x[bad], tau, r, positives, is_out[r - 1])
                    total = total + loss
                    if g is not None:
                        g[bad] += row_grad * (scale * tau)
                totals[r - 1] += total
                del z, outside  # frees block memory before the next term
            ge_r = ge_next
        if gb is not None and first:
            gb.zero_()  # no term wrote this block
    denom = torch.tensor(denoms, dtype=dtype, device=device)
    return torch.where(denom > 0, totals / denom.clamp_min(1), 0.0), grad


def _in_term(z: Tensor, pos: Tensor, has_pos: Tensor, grad: Tensor | None, scale: float, first: bool):
    """Σ over rows of log S_A − log S_P ("in" form); adds scale · d / d(s/τ) to grad.

    S_A = Σ_{P∪N} e, S_P = Σ_P e:  d ℓ / d(s_j/τ) = e_j / S_A − [j∈P] e_j / S_P. Also returns
    the rows whose S_P underflowed (left out here, for _exact_rows), or None.
    """
    info = torch.finfo(z.dtype)
    e = z.exp2_()
    e_pos = e * pos
    s_all = e.sum(1, keepdim=True).clamp_min_(info.tiny)
    s_pos = e_pos.sum(1, keepdim=True)
    has_pos, bad = _split_rows(has_pos, s_pos < info.tiny / info.eps)
    s_pos.clamp_min_(info.tiny)  # keeps rows without positives finite; has_pos (0/1) zeroes them
    row = ((s_all.log() - s_pos.log()) * has_pos).sum()
    if grad is not None:
        # coef = a − [j∈P] b with a and b rounded alike: a row without negatives gets exactly 0.
        a, b = has_pos.div(s_all).mul_(scale), has_pos.div(s_pos).mul_(scale)
        coef = torch.addcmul(a, pos, b, value=-1.0, out=e_pos)
        if first:
            torch.mul(e, coef, out=grad)
        else:
            grad.addcmul_(e, coef)
    return row, bad


def _out_term(z: Tensor, pos: Tensor, has_pos: Tensor, grad: Tensor | None, scale: float, first: bool):
    """Σ over pairs of log(e_p + S_N) − s_p/τ ("out" form); adds scale · d / d(s/τ) to grad.

    d / d(s_p/τ) = −S_N / (e_p + S_N) on positives, d / d(s_n/τ) = e_n Σ_p 1 / (e_p + S_N) on
    negatives. Rows with a tiny S_N (no negatives, or underflow) are left to _exact_rows.
    """
    info = torch.finfo(z.dtype)
    e = z.exp2()
    t = e * pos
    e_neg = e.sub_(t)  # in place and exact: each entry is e or 0
    s_neg = e_neg.sum(1, keepdim=True)
    keep, bad = _split_rows(has_pos, s_neg < info.tiny / info.eps)
    t.add_(s_neg.clamp_min(info.tiny))  # e_p + S_N on positives; the floor keeps log finite
    inv = torch.div(pos, t) if grad is not None else None  # 1 / (e_p + S_N) on positives, else 0
    # log2(e_p + S_N) − z_p is log2 of the ratio, per positive; then back to natural log.
    row = (t.log2_().sub_(z).mul_(pos).sum(1, keepdim=True) * keep).sum() * _LN2
    if grad is not None and inv is not None:
        c = inv.sum(1, keepdim=True).mul_(keep).mul_(scale)
        if first:
            torch.mul(e_neg, c, out=grad)
        else:
            grad.addcmul_(e_neg, c)
        grad.addcmul_(inv, s_neg.mul_(keep), value=-scale)
    return row, bad


def _split_rows(has_pos: Tensor, tiny_sum: Tensor) -> tuple[Tensor, Tensor | None]:
    """(0/1 rows kept on the fast path, bool rows for the exact path or None)."""
    bad = (has_pos > 0) & tiny_sum
    if not bool(bad.any()):
        return has_pos, None
    return has_pos * ~bad, bad.squeeze(1)


def _exact_rows(s: Tensor, x: Tensor, tau: float, r: int, positives: str, out_form: bool) -> tuple[Tensor, Tensor]:
    """Loss sum and d / ds of term r for a few rows, by logsumexp with each set's own maximum.

    For rows where the shared row shift underflows (positives or negatives more than ~87·τ
    below the row max in float32) and rows without negatives; slow but exact.
    """
    pos = (x == r) if positives == "rank" else (x >= 1) & (x <= r)
    neg = (x == 0) | (x > r)
    floor = torch.finfo(s.dtype).min / 4  # a finite "-inf": no inf − inf in the gradients
    with torch.enable_grad():
        s = s.detach().requires_grad_()
        z = s / tau
        lse_neg = torch.where(neg, z, floor).logsumexp(1, keepdim=True)
        if out_form:
            loss = torch.where(pos, torch.logaddexp(z, lse_neg) - z, 0.0).sum()
        else:
            lse_pos = torch.where(pos, z, floor).logsumexp(1, keepdim=True)
            loss = (torch.logaddexp(lse_pos, lse_neg) - lse_pos).sum()
        (grad,) = torch.autograd.grad(loss, s)
    return loss.detach(), grad
