"""Parametric contrastive loss (PaCo, Cui et al., ICCV 2021; GPaCo, TPAMI 2023).

Each anchor a (label y_a) is contrasted against C learnable class centres and M samples (e.g.
batch keys + a momentum queue) with one softmax over the concatenation:

    L_c = centre_logit_c + log π_c   (π = class prior, optional: balanced-softmax rebalance;
                                      the centre logits are NOT divided by τ)
    L_j = a · k_j / τ                 (samples; the anchor's own column, self_mask, is removed
                                      from the softmax and from the positives)
    log p = L − log( Σ_c e^{L_c} + Σ_{j not self} e^{L_j} )

Positive weights: the centres get w_c = (1 − ε)·[c = y_a] + ε / C (ε = ``smoothing``; ε = 0
gives weight 1 on the own centre only, and the centre weights always sum to 1), every non-self
sample with label y_a gets α. The loss is

    ℓ(a) = − Σ w · log p / Σ w,   averaged over the anchors.

Since Σ w · log p = Σ w · L − (Σ w) · lse, ℓ(a) = lse − Σ w · L / Σ w needs no log of a
positive sum, so nothing can underflow. A custom autograd Function builds d ℓ / d L = p − w/Σw
(per anchor, / B) during the forward pass, where the exponentials are at hand.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

_LOG2E = 1.4426950408889634  # exp2 is several times faster than exp on CPU: keep logits in base 2
_LN2 = 0.6931471805599453


def paco_loss(
    anchors: Tensor,
    contrast: Tensor,
    contrast_labels: Tensor,
    anchor_labels: Tensor,
    center_logits: Tensor,
    *,
    alpha: float,
    tau: float,
    self_mask: Tensor,
    class_prior: Tensor | None = None,
    smoothing: float = 0.0,
) -> Tensor:
    """PaCo / GPaCo loss (see the module docstring): anchors [B, d], contrast [M, d] with labels [M],
    anchor_labels [B], center_logits [B, C], self_mask [B, M] bool, class_prior [C] or None."""
    _check(anchors, contrast, contrast_labels, anchor_labels, center_logits, alpha, tau, self_mask,
           class_prior, smoothing)
    n_classes, dtype = center_logits.shape[1], anchors.dtype
    centres = center_logits if class_prior is None else center_logits + class_prior.log().to(center_logits.dtype)
    with torch.no_grad():
        # 0/1 float masks; bool -> float casts are slow on CPU, but a bool viewed as uint8 casts fast.
        self_f = self_mask.view(torch.uint8).to(dtype)
        same = (anchor_labels[:, None] == contrast_labels[None, :]).view(torch.uint8).to(dtype)
        positive = same.addcmul_(same, self_f, value=-1.0)  # same label and not self
        centre_w = torch.full_like(centres, smoothing / n_classes, dtype=dtype)
        centre_w.scatter_add_(1, anchor_labels.long()[:, None], torch.full_like(centre_w[:, :1], 1.0 - smoothing))
    return _PaCo.apply(anchors @ contrast.T, centres.to(dtype), positive, self_f, centre_w, float(alpha), float(tau))


class _PaCo(torch.autograd.Function):
    """Loss from sample similarities [B, M] and centre logits [B, C]; gradients built in forward."""

    @staticmethod
    def forward(ctx, sample, centres, positive, self_f, centre_w, alpha, tau):
        n_rows = sample.shape[0]
        rate = _LOG2E / tau
        # Self columns go to about -big (in base-2 logit units) so that 2^z is exactly 0 there,
        # before the row max, which then covers only the columns in the softmax.
        sample_out = torch.add(sample, self_f, alpha=-torch.finfo(sample.dtype).max / rate)
        zc = centres * _LOG2E
        shift = torch.maximum(sample_out.amax(1, keepdim=True) * rate, zc.amax(1, keepdim=True))
        e = torch.add(-shift, sample_out, alpha=rate, out=sample_out).exp2_()  # in place: rate·s − m
        ec = zc.sub_(shift).exp2_()
        total = e.sum(1, keepdim=True) + ec.sum(1, keepdim=True)
        lse = (shift + total.log2()) * _LN2  # natural log of the softmax denominator
        weight = centre_w.sum(1, keepdim=True) + alpha * positive.sum(1, keepdim=True)
        pos_sum = alpha / tau * (positive * sample).sum(1, keepdim=True) + (centre_w * centres).sum(1, keepdim=True)
        loss = (lse - pos_sum / weight).mean()
        ctx.grads = None
        if any(ctx.needs_input_grad[:2]):
            # d ℓ / d L = (p − w / Σw) / B, with p = e / total; samples get one more 1/τ.
            a, b = 1.0 / (total * n_rows), 1.0 / (weight * n_rows)
            grad_sample = torch.mul(e, a / tau).addcmul_(positive, b, value=-alpha / tau)
            grad_centres = torch.mul(ec, a).addcmul_(centre_w, b, value=-1.0)
            ctx.grads = (grad_sample, grad_centres)
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss):
        grad_sample, grad_centres = ctx.grads
        # Out of place: the cached gradients stay intact for a second backward (retain_graph).
        return grad_sample * grad_loss, grad_centres * grad_loss, None, None, None, None, None


def _check(anchors, contrast, contrast_labels, anchor_labels, center_logits, alpha, tau, self_mask, prior, smoothing):
    if anchors.dim() != 2 or contrast.dim() != 2 or anchors.shape[1] != contrast.shape[1]:
        raise ValueError(f"anchors [B, d] and contrast [M, d] must share d, got {tuple(anchors.shape)} "
                         f"and {tuple(contrast.shape)}")
    n_rows, n_cols = anchors.shape[0], contrast.shape[0]
    if not anchors.is_floating_point() or contrast.dtype != anchors.dtype:
        raise ValueError(f"anchors and contrast must share a floating dtype, got {anchors.dtype} and {contrast.dtype}")
    if center_logits.dim() != 2 or center_logits.shape[0] != n_rows or center_logits.shape[1] < 1 \
            or not center_logits.is_floating_point():
        raise ValueError(f"center_logits must be a floating [B={n_rows}, C] tensor, got {center_logits.dtype} "
                         f"{tuple(center_logits.shape)}")
    if anchor_labels.shape != (n_rows,) or contrast_labels.shape != (n_cols,):
        raise ValueError(f"labels must be [B={n_rows}] and [M={n_cols}], got {tuple(anchor_labels.shape)} "
                         f"and {tuple(contrast_labels.shape)}")
    for name, labels in (("anchor_labels", anchor_labels), ("contrast_labels", contrast_labels)):
        if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
            raise ValueError(f"{name} must be an integer tensor, got {labels.dtype}")
    n_classes = center_logits.shape[1]
    if n_rows and not 0 <= int(anchor_labels.min()) <= int(anchor_labels.max()) < n_classes:
        raise ValueError(f"anchor_labels must lie in [0, {n_classes}) to pick a class centre")
    if self_mask.dtype != torch.bool or self_mask.shape != (n_rows, n_cols):
        raise ValueError(f"self_mask must be a bool [B={n_rows}, M={n_cols}] tensor, got {self_mask.dtype} "
                         f"{tuple(self_mask.shape)}")
    if prior is not None and (prior.shape != (n_classes,) or not bool((prior > 0).all())):
        raise ValueError(f"class_prior must be [C={n_classes}] with positive entries")
    if not (0.0 < tau < float("inf")) or not alpha >= 0.0 or not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"need tau > 0, alpha >= 0 and 0 <= smoothing <= 1, got tau={tau}, alpha={alpha}, "
                         f"smoothing={smoothing}")
