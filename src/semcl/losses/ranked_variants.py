"""The per-rank terms of ranked_info_nce for its variants: a probability floor and Khosla's "out".

Same inputs and term definitions as semcl.losses.ranked (P_r, N_r, e_j = exp(s_j / τ_r)), plus

    "khosla_out":  ℓ_r(a) = -(1/|P_r(a)|) Σ_{p∈P_r} log( e_p / (Σ_{P_r} e + Σ_{N_r} e) ),
                   the L_out of Khosla et al. (2020): the other positives sit in every denominator
                   and each anchor first averages over its own positives; the mean is then over
                   the anchors whose P_r is non-empty (fact sheet docs/papers/rince.md §g.5);

and ``prob_floor`` f >= 0 (the official CIFAR code's ``sum_in_log`` / ``sum_out_log`` use f = 1e-7):

    "in"          drops anchors whose positive mass Σ_P e / (Σ_P e + Σ_N e) <= f,
    "out"         drops (anchor, positive) pairs whose e_p / (e_p + Σ_N e) <= f,
    "khosla_out"  drops pairs whose e_p / (Σ_P e + Σ_N e) <= f (an anchor with no pair left is dropped);

each term is the mean over what remains, 0 when nothing remains. With f = 0 nothing with a
positive is dropped. The decision compares the probability itself (as the official code does,
computed with a row shift so it is exact for equal logits); the loss value is taken in log space.

Plain autograd on [B, N] tensors: slower and hungrier than the fused path of ranked.py, which
serves the default forms at f = 0 on the CPU. Static shapes and no host read of a value: on an accelerator this
module serves every form (semcl.runtime.host_sync).
"""

from __future__ import annotations

import torch
from torch import Tensor


def variant_terms(
    sim: Tensor,
    ranks: Tensor,
    taus: tuple[float, ...],
    form: str,
    positives: str,
    active: tuple[bool, ...],
    prob_floor: float,
) -> Tensor:
    """Terms [R] (0 for inactive ranks); ``form`` in {"in", "out", "out_in", "khosla_out"}."""
    dtype = sim.dtype
    low = torch.finfo(dtype).min / 4  # a finite "-inf": logsumexp and its gradient stay finite
    valid = ranks >= 0
    # Ignored entries may hold inf / nan; `where` keeps them out of values and gradients.
    s = torch.where(valid, sim, torch.zeros((), dtype=dtype, device=sim.device))
    terms = []
    for r, tau in enumerate(taus, start=1):
        if not active[r - 1]:
            terms.append(sim.new_zeros(()))
            continue
        pos = (ranks == r) if positives == "rank" else (ranks >= 1) & (ranks <= r)
        neg = (ranks == 0) | (ranks > r)
        kind = "out" if form == "out_in" and r == 1 else ("in" if form == "out_in" else form)
        terms.append(_term(s / tau, pos, neg, kind, prob_floor, low))
    return torch.stack(terms)


def _term(z: Tensor, pos: Tensor, neg: Tensor, kind: str, prob_floor: float, low: float) -> Tensor:
    lse_pos = torch.where(pos, z, low).logsumexp(1, keepdim=True)
    lse_neg = torch.where(neg, z, low).logsumexp(1, keepdim=True)
    probs = _probabilities(z.detach(), pos, neg, kind, low) if prob_floor > 0 else None  # only the floor reads it
    has_pos = pos.any(1, keepdim=True)
    zero = z.new_zeros(())
    if kind == "in":
        keep = has_pos & (probs > prob_floor) if prob_floor > 0 else has_pos
        loss = torch.logaddexp(lse_pos, lse_neg) - lse_pos
        return _mean(torch.where(keep, loss, zero), keep)
    keep = pos & (probs > prob_floor) if prob_floor > 0 else pos
    if kind == "out":
        loss = torch.logaddexp(z, lse_neg) - z
        return _mean(torch.where(keep, loss, zero), keep)
    # khosla_out: per-anchor mean over its kept pairs, then the mean over anchors with any.
    loss = torch.logaddexp(lse_pos, lse_neg) - z
    n_kept = keep.sum(1, keepdim=True)
    per_anchor = torch.where(keep, loss, zero).sum(1, keepdim=True) / n_kept.clamp_min(1)
    return _mean(per_anchor, n_kept > 0)


def _probabilities(z: Tensor, pos: Tensor, neg: Tensor, kind: str, low: float) -> Tensor:
    """The probability each kept unit is judged by: [B, 1] for "in", [B, N] (per positive) otherwise."""
    part = pos | neg
    shift = torch.where(part, z, low).amax(1, keepdim=True)
    e = torch.where(part, (z - shift).exp(), 0.0)  # the row max gives exactly 1
    s_pos = torch.where(pos, e, 0.0).sum(1, keepdim=True)
    s_neg = torch.where(neg, e, 0.0).sum(1, keepdim=True)
    if kind == "in":
        return s_pos / (s_pos + s_neg).clamp_min(torch.finfo(z.dtype).tiny)
    if kind == "out":
        return e / (e + s_neg).clamp_min(torch.finfo(z.dtype).tiny)
    return e / (s_pos + s_neg).clamp_min(torch.finfo(z.dtype).tiny)


def _mean(values: Tensor, keep: Tensor) -> Tensor:
    """Σ values / #kept (values are 0 where not kept); 0, with a zero gradient, when nothing is kept. The count
    stays a tensor: no host read (semcl.runtime.host_sync)."""
    return values.sum() / keep.sum().clamp_min(1)
