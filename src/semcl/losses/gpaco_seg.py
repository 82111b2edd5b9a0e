"""GPaCo as an auxiliary pixel loss for semantic segmentation (GPaCo Sec. IV-D, docs/papers/paco.md §c.7).

Per image b, K pixels are sampled at random (K = -1: all pixels) from the decoder's resolution. For
an anchor pixel i with label y_i < C (the class count), with z the L2-normalised embeddings of the
sampled pixels and s_i in R^C the segmentation logits at pixel i (the class centres' logits: no
temperature, no prior, no queue, one view):

    row_i  = [ s_i[0..C-1] ,  z_i . z_j / tau  for sampled j != i ]
    w_i    = [ onehot(y_i) ,  alpha * 1[y_j == y_i]               ]
    l_i    = - sum_k w_ik log softmax(row_i)_k / (1 + alpha * |P(i)|),   P(i) = {j != i : y_j = y_i}

Pixels labelled >= C (ignore) have an all-zero target: they are no anchors but stay in the other
anchors' denominators. The image's loss is the mean of l_i over its valid anchors (0 without any);
the batch loss is the mean over images.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def sample_pixels(n: int, k: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """int64 [min(k, n)] random pixel positions of an image with n pixels (k = -1 or k >= n: all, in order)."""
    if k < 0 or k >= n:
        return torch.arange(n)
    return torch.randperm(n, generator=generator)[:k]


def pixel_paco_image(z: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor, alpha: float,
                     tau: float, num_classes: int) -> torch.Tensor:
    """The loss of one image's sampled pixels: z [K, D] (normalised here), logits [K, C], labels [K]."""
    z = F.normalize(z, dim=1)
    k = z.shape[0]
    valid = labels < num_classes
    sim = z @ z.T / tau
    eye = torch.eye(k, dtype=torch.bool, device=z.device)
    sim = sim.masked_fill(eye, float("-inf"))  # an anchor is not its own contrast sample
    row = torch.cat([logits, sim], dim=1)
    safe = torch.where(valid, labels, torch.zeros_like(labels))
    # scatter, not F.one_hot (which reads the labels' range back on the CPU path, semcl.runtime.host_sync)
    centre = torch.zeros(k, num_classes, dtype=z.dtype, device=z.device).scatter_(1, safe[:, None], 1.0) * valid[:, None]
    same = (labels[:, None] == labels[None, :]) & valid[:, None] & valid[None, :] & ~eye
    weight = torch.cat([centre, alpha * same.to(z.dtype)], dim=1)
    logp = torch.log_softmax(row, dim=1).masked_fill(weight == 0, 0.0)  # -inf * 0 on the diagonal
    per_anchor = -(weight * logp).sum(1) / (1 + alpha * same.sum(1).to(z.dtype))
    # the mean over valid anchors, masked rather than selected (no host read); none valid: 0, still attached
    return torch.where(valid, per_anchor, 0.0).sum() / valid.sum().clamp_min(1)


def gpaco_pixel_loss(features: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor, *, alpha: float,
                     tau: float, num_samples: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Batch loss from features [B, D, h, w], segmentation logits [B, C, h, w] and labels [B, h, w]
    (already at the features' resolution; >= C means ignore); see the module docstring."""
    b, d, h, w = features.shape
    c = logits.shape[1]
    losses = []
    for i in range(b):
        idx = sample_pixels(h * w, num_samples, generator).to(features.device, non_blocking=True)  # no queue wait
        z = features[i].reshape(d, -1).T[idx]
        s = logits[i].reshape(c, -1).T[idx]
        y = labels[i].reshape(-1)[idx]
        losses.append(pixel_paco_image(z, s, y, alpha, tau, c))
    return torch.stack(losses).mean()
