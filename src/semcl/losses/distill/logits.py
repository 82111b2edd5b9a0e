"""Logit distillation: Hinton et al., "Distilling the Knowledge in a Neural Network" (2015).

    p^T = softmax(z^T / T),  log p^S = log_softmax(z^S / T)
    L_KD = T² · (1/B) Σ_b Σ_c p^T_{b,c} (log p^T_{b,c} − log p^S_{b,c})        (KL(p^T ‖ p^S))

The T² factor keeps the gradient magnitude of the soft term independent of T (Hinton §2);
RepDistiller's DistillKL (T = 4) uses the same batch-mean KL.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

KD_T = 4.0  # RepDistiller --kd_T default (train_student.py)


def kd_loss(logits_s: Tensor, logits_t: Tensor, T: float = KD_T) -> Tensor:
    """KL(softmax(z^T/T) ‖ softmax(z^S/T)) · T², averaged over the batch. Inputs [B, C]."""
    if logits_s.shape != logits_t.shape or logits_s.dim() != 2:
        raise ValueError(f"kd_loss needs two [B, C] logit tensors, got {tuple(logits_s.shape)} and {tuple(logits_t.shape)}")
    if T <= 0:
        raise ValueError(f"kd_loss: temperature must be > 0, got {T}")
    log_ps = F.log_softmax(logits_s / T, dim=1)
    log_pt = F.log_softmax(logits_t / T, dim=1)
    kl = (log_pt.exp() * (log_pt - log_ps)).sum()
    return kl * (T * T) / logits_s.shape[0]
