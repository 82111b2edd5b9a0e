"""Metric-learning baselines of RINCE's Table 2 (docs/papers/rince.md §c.10, §d.1).

Triplet loss with rank margins
------------------------------
Ranks of a pair (a, b) from the class hierarchy: same fine class (rank 1), same superclass but another
class (rank 2), another superclass (negative). A triplet (a, p, n) is valid when p ≠ a and p ranks
strictly above n for the anchor a; its loss is

    ℓ(a, p, n) = max(0, d(a, p) − d(a, n) + m),   d = Euclidean distance,

with the margin set by the rank of n (the paper: "m1 = 0.5, m2 = 1"; which triplets get which margin
is ``inferred`` in the sheet):

    n in the anchor's superclass (so p is of the anchor's class):   m = margins[0] = m1 = 0.5
    n in another superclass (p of the anchor's class or superclass): m = margins[1] = m2 = 1

Mining: all valid triplets of the batch ("batch all", Hermans et al. 2017, "In Defense of the Triplet
Loss"), averaged over the triplets with a positive loss (their BA≠0 variant; also
pytorch-metric-learning's TripletMarginLoss with its default AvgNonZeroReducer); 0 when none is active.
A class without a superclass (fine_to_coarse −1) shares rank 2 with no other class.

Memory: the B³ hinge values are never kept for backward. Inside the active set the loss is linear in
the distances, L = (Σ_{a,p} P[a,p]·d(a,p) − Σ_{a,n} N[a,n]·d(a,n) + Σ m) / #active with P, N the numbers
of active triplets per (anchor, positive) and (anchor, negative) pair, so the active set is counted
without gradient in chunks of anchors (at most ``_CHUNK_ELEMS`` = 2^24 triplets at a time: ~64 MB of
float32 hinge values plus boolean masks at B = 512) and the graph holds only the B × B distances.
Value and gradient equal those of the plain triple sum (the hinge's subgradient at exactly 0 is 0).

FastAP (Cakir, He, Xia, Kulis, Sclaroff, "Deep Metric Learning to Rank", CVPR 2019)
----------------------------------------------------------------------------------
For each query q of the batch, the other items are retrieved by squared Euclidean distance
D = ‖z_q − z_j‖² = 2 − 2 z_q·z_j ∈ [0, 4] (unit vectors). The distance axis carries bin centres
z_l = l·Δ, l = 0..L−1, Δ = 4 / num_bins, L = num_bins + 1 (the official code's
``torch.linspace(0, 4, num_bins + 1)``), and each item adds a triangular pulse
δ(D, z_l) = max(0, 1 − |D − z_l| / Δ) to the bins next to its distance. With h⁺_l (relevant items, the
query's fine class) and h_l (all items except the query itself) the soft histograms and H⁺, H their
cumulative sums over l,

    FastAP(q) = (1 / N⁺_q) Σ_l h⁺_l · H⁺_l / H_l      (paper Eq. 9; a term with H_l = 0 is 0),
    L = 1 − mean_q FastAP(q) over the queries with N⁺_q > 0.

This is what the official PyTorch code (kunhe/FastAP-metric-learning, pytorch/FastAP_loss.py) computes
in its forward; its hand-written backward is the derivative of that forward, which autograd gives here.
"""

from __future__ import annotations

import torch

_CHUNK_ELEMS = 1 << 24  # triplets whose hinge is evaluated at once (anchor chunks)


def rank_codes(labels: torch.Tensor, fine_to_coarse: torch.Tensor) -> torch.Tensor:
    """int64 [B, B]: 0 same class, 1 same (known) superclass and another class, 2 another superclass."""
    coarse = fine_to_coarse.to(device=labels.device, dtype=torch.int64)[labels]
    same_class = labels[:, None] == labels[None, :]
    same_super = (coarse[:, None] == coarse[None, :]) & (coarse[:, None] >= 0)
    # `where`, not mask assignment: a bool-mask index reads the mask back on an accelerator (semcl.runtime.host_sync)
    return torch.where(same_class, 0, torch.where(same_super, 1, 2))


def pairwise_distances(z: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Euclidean distances [B, B] from ‖a‖² + ‖b‖² − 2 a·b, clamped at eps before the square root
    (finite gradients for coinciding points; the value changes only below d = 1e-6)."""
    sq = (z * z).sum(1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (z @ z.T)
    return d2.clamp_min(eps).sqrt()


def rank_margin_triplet_loss(z: torch.Tensor, labels: torch.Tensor, fine_to_coarse: torch.Tensor,
                             margins: tuple[float, float] | list[float] = (0.5, 1.0)) -> torch.Tensor:
    """Batch-all triplet loss with rank margins (module docstring), averaged over the active triplets.

    z: embeddings [B, D] (the method passes L2-normalised projections); labels: fine labels [B];
    fine_to_coarse: int64 [C]; margins: (m1, m2)."""
    if len(margins) != 2:
        raise ValueError(f"margins must be (m1, m2), got {list(margins)}")
    b = z.shape[0]
    d = pairwise_distances(z)
    codes = rank_codes(labels, fine_to_coarse)
    # margin by the negative's code: code 1 (same superclass) -> m1, code 2 (other superclass) -> m2
    # by fills, not a tensor of the margins: one built from host numbers is a blocking copy to an accelerator
    zero = torch.zeros((), dtype=d.dtype, device=d.device)
    m_an = torch.where(codes == 1, float(margins[0]), torch.where(codes == 2, float(margins[1]), zero))
    not_self = ~torch.eye(b, dtype=torch.bool, device=z.device)
    pos_count = torch.zeros_like(d)
    neg_count = torch.zeros_like(d)
    margin_sum = torch.zeros((), dtype=d.dtype, device=d.device)
    active_total = torch.zeros((), dtype=torch.int64, device=d.device)
    chunk = max(1, _CHUNK_ELEMS // max(b * b, 1))
    with torch.no_grad():
        dd = d.detach()
        for s in range(0, b, chunk):
            a = slice(s, min(s + chunk, b))
            valid = (codes[a, :, None] < codes[a, None, :]) & not_self[a, :, None]  # [c, p, n]
            hinge = dd[a, :, None] - dd[a, None, :] + m_an[a, None, :]
            active = valid & (hinge > 0)
            del hinge, valid
            act = active.to(d.dtype)
            pos_count[a] = act.sum(2)
            neg_count[a] = act.sum(1)
            margin_sum += (neg_count[a] * m_an[a]).sum()
            active_total += active.sum()
    # no active triplet: every count and the margin sum are 0, so this is 0 with a zero gradient (the step still
    # runs); the count stays a tensor (no host read)
    return ((pos_count * d).sum() - (neg_count * d).sum() + margin_sum) / active_total.clamp_min(1)


def fastap_per_query(z: torch.Tensor, labels: torch.Tensor, num_bins: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """(FastAP [B] of every query, bool [B] whether the query has a relevant item); z L2-normalised."""
    if num_bins < 1:
        raise ValueError(f"num_bins must be >= 1, got {num_bins}")
    b = z.shape[0]
    d2 = 2.0 - 2.0 * (z @ z.T)  # squared Euclidean distance of unit vectors, in [0, 4]
    others = ~torch.eye(b, dtype=torch.bool, device=z.device)
    rel = ((labels[:, None] == labels[None, :]) & others).to(z.dtype)
    irr = ((labels[:, None] != labels[None, :]) & others).to(z.dtype)
    n_pos = rel.sum(1)
    delta = 4.0 / num_bins
    centres = torch.linspace(0.0, 4.0, num_bins + 1, dtype=z.dtype, device=z.device)
    h_pos, h_neg = [], []
    for zl in centres:
        pulse = torch.relu(1.0 - (d2 - zl).abs() / delta)
        h_pos.append((pulse * rel).sum(1))
        h_neg.append((pulse * irr).sum(1))
    hp = torch.stack(h_pos, 1)  # [B, L]
    h = hp + torch.stack(h_neg, 1)
    cum_p, cum = hp.cumsum(1), h.cumsum(1)
    filled = cum > 0
    # H_l = 0 means nothing retrieved up to bin l (h⁺_l = 0 too): the term is 0 (official code: nan -> 0)
    terms = torch.where(filled, hp * cum_p / torch.where(filled, cum, torch.ones_like(cum)), torch.zeros_like(cum))
    has_pos = n_pos > 0
    ap = terms.sum(1) / n_pos.clamp_min(1.0)
    return ap, has_pos


def fastap_loss(z: torch.Tensor, labels: torch.Tensor, num_bins: int = 5) -> torch.Tensor:
    """1 − mean FastAP over the queries with at least one relevant item (same fine label); 0 if none."""
    ap, has_pos = fastap_per_query(z, labels, num_bins)
    # masked, not selected (no host read): ap is finite on every row; no query with a relevant item gives 0, still
    # attached to the graph
    n = has_pos.sum()
    mean_ap = torch.where(has_pos, ap, 0.0).sum() / n.clamp_min(1)
    return torch.where(n > 0, 1.0 - mean_ap, (z * 0.0).sum())
