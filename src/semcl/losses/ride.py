"""RIDE's training loss (Wang et al., ICLR 2021): LDAM(-DRW) per expert plus a diversity term.

E experts give logits z_i = s·cos(f_i, w_i) [B, C] (the scale s sits in the model, as in the official
code); the ensemble is z̄ = (1/E) Σ_i z_i. With n_j the training images of class j:

    LDAM margins   m_j = max_m · n_j^(-1/4) / max_k n_k^(-1/4)
    LDAM logits    ẑ_i = z_i − s · m_y · onehot(y)                   (only the target logit moves)
    weighted CE    ℓ_i = Σ_b w_{y_b} · CE(ẑ_ib, y_b) / Σ_b w_{y_b}   (w ≡ 1 before DRW; after it the
                   effective-number weights w_j ∝ (1 − β) / (1 − β^{n_j}), scaled to Σ_j w_j = C)
    diversity      KL_i = (1/B) Σ_b Σ_j p̄_bj (log p̄_bj − log q_ibj),  p̄ = softmax(z̄ / T) without
                   gradient, q_i = softmax(z_i / T); T a scalar or one temperature per class (column j
                   divided by T_j), T̄ = mean_j T_j

    L = Σ_i [ ℓ_i + λ · T̄² · KL_i ]

With λ = 0 the official ``RIDELoss`` computes every expert's term on the ensemble logits instead
(``ride_loss_logits = output_logits if additional_diversity_factor == 0 else logits_item``), so
L = E · ℓ(z̄), with gradient through z̄; so does this function.

λ is added as is: the official λ = −0.2 (``additional_diversity_factor``) is negative, so minimising L
*raises* each expert's KL from the ensemble (diversity). The sum over experts, the no-gradient target and
the T̄² factor follow the official ``RIDELoss`` (model/loss.py), as do λ = −0.2 and T = 1 (its defaults, which
the ImageNet-LT configs keep) and the per-class temperatures under DRW (``diversity_temperatures``, with the
configs' reweight_factor 0.02). The official code takes no per-class temperature before DRW.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from semcl.runtime.host_sync import check


def ldam_margins(class_counts: Tensor, max_margin: float = 0.5) -> Tensor:
    """m_j ∝ n_j^(-1/4), the largest = max_margin (float64 [C]). An empty class counts as 1 image
    (it is never a target, but n = 0 would make every margin 0 through the max)."""
    m = class_counts.double().clamp_min(1.0) ** -0.25
    return m * (max_margin / m.max())


def effective_number_weights(class_counts: Tensor, beta: float = 0.9999) -> Tensor:
    """Class-balanced weights (Cui et al. 2019): (1 − β) / (1 − β^{n_j}), summing to C (float64 [C]).
    Empty classes count as 1 image (n = 0 gives an infinite weight)."""
    n = class_counts.double().clamp_min(1.0)
    w = (1.0 - beta) / (1.0 - torch.pow(torch.tensor(beta, dtype=torch.float64), n))
    return w * (len(n) / w.sum())


def diversity_temperatures(class_counts: Tensor, base: float = 1.0, reweight: float = 0.02) -> Tensor:
    """Per-class diversity temperatures under DRW (official ``RIDELoss``): T_j = T · v_j / max_k v_k with
    v_j = C·π_j·r + 1 − r, π the class frequencies, r = ``reweight`` (float64 [C]). r = 0 gives T everywhere."""
    pi = class_counts.double() / class_counts.sum()
    v = len(pi) * pi * reweight + 1.0 - reweight
    if not bool((v > 0).all()):
        raise ValueError(f"diversity reweight factor {reweight} is too large: a temperature would be <= 0")
    return base * v / v.max()


def ldam_logits(logits: Tensor, labels: Tensor, margins: Tensor, scale: float) -> Tensor:
    """Subtract s·m_y from each row's target logit (out of place)."""
    shift = (-scale * margins.to(logits.dtype)[labels])[:, None]
    return logits.scatter_add(1, labels[:, None], shift)


def ldam_loss(logits: Tensor, labels: Tensor, *, margins: Tensor, scale: float, class_weights: Tensor | None = None) -> Tensor:
    """Cross-entropy of the LDAM logits; with class weights, the weighted mean Σ w_y ℓ / Σ w_y."""
    weight = None if class_weights is None else class_weights.to(logits.dtype)
    return F.cross_entropy(ldam_logits(logits, labels, margins, scale), labels, weight=weight)


def ride_loss(
    expert_logits: list[Tensor],
    labels: Tensor,
    *,
    margins: Tensor,
    scale: float,
    class_weights: Tensor | None = None,
    diversity_weight: float = -0.2,
    temperature: float | Tensor = 1.0,
) -> Tensor:
    """L of the module docstring: expert_logits E × [B, C] (already scaled by s), labels [B], margins [C],
    class_weights [C] or None (no DRW), temperature a float or [C] per-class temperatures."""
    if not expert_logits:
        raise ValueError("ride_loss needs at least one expert")
    ref = expert_logits[0]
    # No host read of a value (semcl.runtime.host_sync): a float temperature stays a Python number (a tensor
    # made from it on an accelerator is a blocking copy), a tensor one is checked and averaged on its device.
    bad = f"temperature must be a positive scalar or [C={ref.shape[1]}] tensor"
    if isinstance(temperature, Tensor):
        t = temperature.to(ref.dtype)
        if t.dim() not in (0, 1) or (t.dim() == 1 and t.shape[0] != ref.shape[1]):
            raise ValueError(f"{bad}, got {tuple(t.shape)}")
        check((t > 0).all(), f"{bad}, got a value <= 0")
        # T̄ in the logits' dtype, squared and scaled in float64 (as a Python float was), used in the logits' dtype
        factor = (diversity_weight * t.mean().to(torch.float64) ** 2).to(ref.dtype)
    else:
        t = float(temperature)
        if not t > 0:
            raise ValueError(f"{bad}, got {t}")
        factor = diversity_weight * t**2
    with torch.no_grad():  # the ensemble is the target only (official: no gradient through it)
        log_target = F.log_softmax(torch.stack(expert_logits).mean(0) / t, dim=1)
        target = log_target.exp()
        # KL(p̄ ‖ p_i) = Σ p̄ log p̄ − Σ p̄ log p_i: the first sum is the same for every expert, so it is
        # computed once (F.kl_div would redo it per expert; bench: ~1/3 of the loss's time)
        neg_entropy = (target * log_target).sum() / ref.shape[0]
    total = ref.new_zeros(())
    ensemble = torch.stack(expert_logits).mean(0) if not diversity_weight else None
    for z in expert_logits:
        ce_logits = z if ensemble is None else ensemble  # λ = 0: the official code's ensemble logits
        total = total + ldam_loss(ce_logits, labels, margins=margins, scale=scale, class_weights=class_weights)
        if diversity_weight:
            cross = -(target * F.log_softmax(z / t, dim=1)).sum() / ref.shape[0]
            total = total + factor * (neg_entropy + cross)
    return total
