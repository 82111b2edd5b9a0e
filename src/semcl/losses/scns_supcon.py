"""Supervised contrastive loss whose negatives are drawn from a memory bank (SCNS supervised setting).

For the 2B in-batch anchors z_a (two views of B images, unit norm) with labels y, and each image's K
drawn negatives m_{i,1..K} (bank entries, unit norm, shared by its two views):

    s_ab = z_a · z_b / tau,   P(a) = {b ≠ a in the batch : y_b = y_a}   (includes a's other view)
    L_a  = −1/|P(a)| Σ_{p ∈ P(a)} [ s_ap − log( Σ_{p' ∈ P(a)} e^{s_ap'} + Σ_k e^{z_a · m_k / tau} ) ]
    L    = mean_a L_a

SupCon's form (Khosla et al. 2020, L^sup_out) with its denominator's in-batch negatives replaced by the
sampled bank negatives, so the sampler (uniform, SCNS-class) alone decides which negatives each anchor
sees. The SCNS paper's loss is unknown (docs/papers/scns.md §d.3: "SupCon-style", assumption).
"""

from __future__ import annotations

import torch


def bank_supcon_loss(z: torch.Tensor, labels: torch.Tensor, negatives: torch.Tensor, tau: float) -> torch.Tensor:
    """z [2B, D] (views stacked: rows i and B + i are image i), labels [B], negatives [B, K, D] -> scalar."""
    b2 = z.shape[0]
    y = labels.repeat(2)
    neg = torch.cat([negatives, negatives], dim=0)  # [2B, K, D]: both views of an image share its draws
    s = z @ z.T / tau
    pos = (y[:, None] == y[None, :]) & ~torch.eye(b2, dtype=torch.bool, device=z.device)
    s_neg = torch.einsum("ad,akd->ak", z, neg) / tau
    # log(Σ_P e^s + Σ_K e^s_neg) per anchor, stably
    s_pos = s.masked_fill(~pos, float("-inf"))
    log_den = torch.logsumexp(torch.cat([s_pos, s_neg], dim=1), dim=1)
    per_anchor = -(s.masked_fill(~pos, 0.0).sum(1) - pos.sum(1) * log_den) / pos.sum(1)
    return per_anchor.mean()
