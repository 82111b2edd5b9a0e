"""Parametric contrastive loss (PaCo, Cui et al., ICCV 2021; GPaCo, TPAMI 2023).

Each anchor a (label y_a) is contrasted against C learnable class centres and M samples (e.g.
batch keys + a momentum queue) with one softmax over the concatenation:

    L_c = centre_logit_c + log π_c   (π = class prior, optional: balanced-softmax rebalance;
                                      the centre logits are NOT divided by τ)
    L_j = a · k_j / τ                 (samples; the anchor's own column, self_mask, is removed
                                      from the softmax and from the positives)
    log p = L − log( Σ_c e^{L_c} + Σ_{j not self} e^{L_j} )

Positive weights: the own centre gets w_{y_a} = 1 − ε and every other centre ε / (C − 1)
(ε = ``smoothing``: the official GPaCo label smoothing, docs/papers/paco.md §c.3 -- the paper is silent, so the
code's form is the default; the centre weights sum to 1, and ε = 0 leaves weight 1 on the own
centre only); every non-self sample with label y_a gets α. The loss is

    ℓ(a) = − Σ w · log p / Σ w,   averaged over the anchors.

Since Σ w · log p = Σ w · L − (Σ w) · lse, ℓ(a) = lse − Σ w · L / Σ w needs no log of a
positive sum, so nothing can underflow. A custom autograd Function builds d ℓ / d L = p − w/Σw
(per anchor, / B) during the forward pass, where the exponentials are at hand.

``supcon_loss`` is GPaCo Eq. 3, SupCon with a queue: the sample terms alone, every positive weight 1.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from semcl.runtime.host_sync import check

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
        off_target = smoothing / (n_classes - 1) if n_classes > 1 else 0.0  # _check: ε = 0 when C = 1
        centre_w = torch.full_like(centres, off_target, dtype=dtype)
        centre_w.scatter_(1, anchor_labels.long()[:, None], 1.0 - smoothing)
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


def supcon_loss(
    anchors: Tensor,
    contrast: Tensor,
    contrast_labels: Tensor,
    anchor_labels: Tensor,
    *,
    tau: float,
    self_mask: Tensor,
    anchor_weights: Tensor | None = None,
) -> Tensor:
    """SupCon in the MoCo framework, exactly GPaCo Eq. 3 (docs/papers/paco.md §c.1): for anchor i,

        A(i) = the contrast columns except i's own (self_mask),  P(i) = {p ∈ A(i): y_p = y_i}
        L_i  = −(1/|P(i)|) Σ_{p∈P(i)} log( e^{a_i·k_p/τ} / Σ_{k∈A(i)} e^{a_i·k/τ} )

    Other positives stay in every denominator; the loss is the mean of L_i over the anchors with
    |P(i)| ≥ 1. An anchor without positives has no L_i (1/|P(i)| is undefined) and is left out of
    the mean, as PyTorch Metric Learning's SupConLoss does; the official SupCon code instead
    counts it as 0 in the mean and GPaCo's copy divides by zero (NaN). Our methods never meet the
    case: each anchor's other view is always in the contrast set. No anchor with a positive: 0.

    As L_i = lse_{A(i)} − mean_{P(i)} logit, it needs only the [B, M] logits (no [B, M, M]).
    anchors [B, d], contrast [M, d] with labels [M], anchor_labels [B], self_mask [B, M] bool.
    anchor_weights [B]: the mean of w_i · L_i instead (the LT multi-task scripts weight each anchor
    by its class's effective-number weight, then take the plain mean).
    """
    _check_samples(anchors, contrast, contrast_labels, anchor_labels, tau, self_mask)
    logits = anchors @ contrast.T / tau
    positive = (anchor_labels[:, None] == contrast_labels[None, :]) & ~self_mask
    n_pos = positive.sum(1)
    has = n_pos > 0
    # Rows without an L_i are masked out, not selected (a selection's size is data: a host read). The self
    # columns get a finite "-inf", which exp turns into exactly 0, so a row of self columns only stays finite;
    # its n_pos floor of 1 keeps its (unused) mean finite, and so the gradient through `where`.
    low = torch.finfo(logits.dtype).min / 4
    lse = logits.masked_fill(self_mask, low).logsumexp(1)
    mean_pos = torch.where(positive, logits, 0.0).sum(1) / n_pos.clamp_min(1)
    per_anchor = torch.where(has, lse - mean_pos, 0.0)
    if anchor_weights is not None:
        per_anchor = per_anchor * anchor_weights
    return per_anchor.sum() / has.sum().clamp_min(1)  # the mean over rows with an L_i; none: 0, still attached


def _check_samples(anchors, contrast, contrast_labels, anchor_labels, tau, self_mask):
    if anchors.dim() != 2 or contrast.dim() != 2 or anchors.shape[1] != contrast.shape[1]:
        raise ValueError(f"anchors [B, d] and contrast [M, d] must share d, got {tuple(anchors.shape)} "
                         f"and {tuple(contrast.shape)}")
    n_rows, n_cols = anchors.shape[0], contrast.shape[0]
    if not anchors.is_floating_point() or contrast.dtype != anchors.dtype:
        raise ValueError(f"anchors and contrast must share a floating dtype, got {anchors.dtype} and {contrast.dtype}")
    if anchor_labels.shape != (n_rows,) or contrast_labels.shape != (n_cols,):
        raise ValueError(f"labels must be [B={n_rows}] and [M={n_cols}], got {tuple(anchor_labels.shape)} "
                         f"and {tuple(contrast_labels.shape)}")
    for name, labels in (("anchor_labels", anchor_labels), ("contrast_labels", contrast_labels)):
        if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
            raise ValueError(f"{name} must be an integer tensor, got {labels.dtype}")
    if self_mask.dtype != torch.bool or self_mask.shape != (n_rows, n_cols):
        raise ValueError(f"self_mask must be a bool [B={n_rows}, M={n_cols}] tensor, got {self_mask.dtype} "
                         f"{tuple(self_mask.shape)}")
    if not 0.0 < tau < float("inf"):
        raise ValueError(f"need tau > 0, got tau={tau}")


def _check(anchors, contrast, contrast_labels, anchor_labels, center_logits, alpha, tau, self_mask, prior, smoothing):
    _check_samples(anchors, contrast, contrast_labels, anchor_labels, tau, self_mask)
    n_rows = anchors.shape[0]
    if center_logits.dim() != 2 or center_logits.shape[0] != n_rows or center_logits.shape[1] < 1 \
            or not center_logits.is_floating_point():
        raise ValueError(f"center_logits must be a floating [B={n_rows}, C] tensor, got {center_logits.dtype} "
                         f"{tuple(center_logits.shape)}")
    n_classes = center_logits.shape[1]
    if n_rows:
        low, high = torch.aminmax(anchor_labels)
        check((low >= 0) & (high < n_classes), f"anchor_labels must lie in [0, {n_classes}) to pick a class centre")
    if prior is not None:
        if prior.shape != (n_classes,):
            raise ValueError(f"class_prior must be [C={n_classes}] with positive entries")
        check((prior > 0).all(), f"class_prior must be [C={n_classes}] with positive entries")
    if not alpha >= 0.0 or not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"need alpha >= 0 and 0 <= smoothing <= 1, got alpha={alpha}, smoothing={smoothing}")
    if smoothing > 0.0 and n_classes < 2:
        raise ValueError("smoothing moves weight to the other classes: it needs at least 2 classes")
