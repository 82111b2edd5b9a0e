"""Latent Mixup (LM) of SCNS (docs/papers/scns.md §c.4, every detail an ``assumption``: the paper describes LM only
in prose): harder pseudo-negatives made by mixing each side's positive with its negatives in the
embedding space, with the *same* mixing coefficient for teacher and student:

    z~T_- = lam * zT_+ + (1 - lam) * zT_-        z~S_- = lam * zS_+ + (1 - lam) * zS_-

lam ~ U(0, lam_max): lam_max = 1 is the default (Beta(1, 1)); lam_max = 0.5 is the "lam < 0.5"
variant, which keeps a mixed point nearer its negative than its positive. The mixed embeddings are
re-normalised to the unit sphere (CRD's embeddings are unit vectors and its scores are
exp(<v, m> / T)); lam = 0 therefore gives back the plain negative.

Uses in the KD students (semcl.methods.distill.contrast): (default, the paper's form: "a distance
(or divergence) is minimized between both mixed representations", SCNS §1 contribution 2)
:func:`lm_distance_loss` = mean over pairs of || n(z~S_-) - n(z~T_-) ||^2 with n the L2 normalisation,
weight 1 (the distance, its weight and that the positives are the anchors' current embeddings are
assumptions); (variant ``extra``) the mixed teacher
negatives join the negatives of the student anchor and the mixed student negatives those of the teacher
anchor (:func:`append_negatives`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def sample_mixup_lambda(shape: tuple[int, ...], generator: torch.Generator, lam_max: float = 1.0,
                        dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """lam ~ U(0, lam_max), drawn on the CPU from ``generator`` (move it to the embeddings' device)."""
    if not 0.0 < lam_max <= 1.0:
        raise ValueError(f"lam_max must be in (0, 1], got {lam_max}")
    return torch.rand(shape, generator=generator, dtype=dtype) * lam_max


def mix_with_positive(positive: torch.Tensor, negatives: torch.Tensor, lam: torch.Tensor,
                      renormalize: bool = True) -> torch.Tensor:
    """lam * positive + (1 - lam) * negatives for positive [B, D], negatives [B, M, D], lam [B, M] -> [B, M, D]."""
    lam = lam.to(device=negatives.device, dtype=negatives.dtype).unsqueeze(-1)
    mixed = lam * positive.unsqueeze(1) + (1.0 - lam) * negatives
    return F.normalize(mixed, dim=-1) if renormalize else mixed


def latent_mixup_negatives(teacher_pos: torch.Tensor, teacher_neg: torch.Tensor, student_pos: torch.Tensor,
                           student_neg: torch.Tensor, num_mixed: int, generator: torch.Generator,
                           lam_max: float = 1.0, renormalize: bool = True,
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mix the first ``num_mixed`` of the K negatives ([B, K, D], already a random draw) with each side's
    positive ([B, D]) under one shared lam [B, num_mixed]; returns (teacher_mixed, student_mixed, lam)."""
    if teacher_neg.shape[:2] != student_neg.shape[:2]:
        raise ValueError("teacher and student negatives must be the same [B, K] draw")
    if not 1 <= num_mixed <= teacher_neg.shape[1]:
        raise ValueError(f"num_mixed must be in [1, {teacher_neg.shape[1]}], got {num_mixed}")
    lam = sample_mixup_lambda((teacher_neg.shape[0], num_mixed), generator, lam_max)
    t_mix = mix_with_positive(teacher_pos, teacher_neg[:, :num_mixed], lam, renormalize)
    s_mix = mix_with_positive(student_pos, student_neg[:, :num_mixed], lam, renormalize)
    return t_mix, s_mix, lam


def append_negatives(negatives: torch.Tensor, extra: torch.Tensor) -> torch.Tensor:
    """[B, K, D] and [B, M, D] -> [B, K + M, D]: the mixed pairs as extra negatives (LM default)."""
    return torch.cat([negatives, extra], dim=1)


def lm_distance_loss(student_mixed: torch.Tensor, teacher_mixed: torch.Tensor) -> torch.Tensor:
    """Variant ``lm_distance``: mean over the [B, M] pairs of || n(s) - n(t) ||_2^2."""
    diff = F.normalize(student_mixed, dim=-1) - F.normalize(teacher_mixed, dim=-1)
    return diff.pow(2).sum(-1).mean()
