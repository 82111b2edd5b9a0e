"""Relational distillation on batch-level structure of feature vectors: SP, CC, RKD, PKT.

Inputs are student / teacher features with one batch size B (flattened to [B, D_S], [B, D_T]; the
two widths may differ unless stated). Normalised as in RepDistiller (see feature_maps).

SP (Tung & Mori, ICCV 2019), RepDistiller on the last conv map feat[-2]:
    G = Q Qᵀ (B×B),  G̃ = G with each row L2-normalised
    L_SP = (1/B²) ‖G̃_T − G̃_S‖_F²
CC (Peng et al., ICCV 2019), on linear embeddings of the penultimate features, L2-normalised:
    k(a, b) = exp(−γ‖a − b‖²) = exp(−2γ) exp(2γ aᵀb) ≈ Σ_{p=0}^{P} exp(−2γ) (2γ)^p / p! · (aᵀb)^p
    ψ(F) = [k(F_i, F_j)]_{ij};   L_CC = (1/B²) ‖ψ(F_T) − ψ(F_S)‖_F²,  P = 2, γ = 0.4 (paper).
    Variant "repdistiller" (the code the CC authors sent RepDistiller, which its β = 0.02 was tuned
    for; the CC method's default, on un-normalised LinearEmbed outputs as RepDistiller):
    δ_i = |s_i − t_i|, L = (1/(B−1)) Σ_{i<B−1} Σ_d δ_{i,d} δ_{i+1,d}.
RKD (Park et al., CVPR 2019), weights w_D = 25, w_A = 50, teacher side without gradient:
    ψ_D(i, j) = ‖x_i − x_j‖ / μ,  μ = mean_{i≠j} ‖x_i − x_j‖
    ψ_A(i, j, k) = ⟨e_ji, e_ki⟩, e_ji = (x_j − x_i)/‖x_j − x_i‖ (0 when x_j = x_i)
    L = w_D · mean_{i,j} huber(ψ_D^S − ψ_D^T) + w_A · mean_{i,j,k} huber(ψ_A^S − ψ_A^T)
    huber(x) = ½x² for |x| < 1 else |x| − ½ (smooth-L1, δ = 1); means over all B² / B³ index tuples.
PKT (Passalis & Tefas, ECCV 2018), cosine kernel K(a, b) = (cos(a, b) + 1)/2:
    p_{j|i} = K(x_i, x_j) / Σ_{k≠i} K(x_i, x_k)  (j ≠ i)
    L = (1/B²) Σ_i Σ_{j≠i} p^T_{j|i} log(p^T_{j|i} / p^S_{j|i})
    Variant "repdistiller": the diagonal (K = 1) kept in both normalisation and sum, and ε = 1e-7
    added to the norms and inside the log ratio.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

CC_GAMMA = 0.4
CC_ORDER = 2
RKD_W_DIST = 25.0
RKD_W_ANGLE = 50.0
PKT_EPS = 1e-7
CC_VARIANTS = ("paper", "repdistiller")
PKT_VARIANTS = ("paper", "repdistiller")


def _flat_pair(name: str, f_s: Tensor, f_t: Tensor, same_width: bool = False) -> tuple[Tensor, Tensor]:
    if f_s.shape[0] != f_t.shape[0] or f_s.shape[0] < 2:
        raise ValueError(f"{name}: need one batch size >= 2, got {tuple(f_s.shape)} and {tuple(f_t.shape)}")
    s, t = f_s.flatten(1), f_t.flatten(1)
    if same_width and s.shape[1] != t.shape[1]:
        raise ValueError(f"{name}: student and teacher widths must agree, got {s.shape[1]} and {t.shape[1]}")
    return s, t


def sp_loss(f_s: Tensor, f_t: Tensor) -> Tensor:
    """Similarity-preserving loss between row-normalised batch Gram matrices."""
    s, t = _flat_pair("sp_loss", f_s, f_t)
    g_s = F.normalize(s @ s.t(), dim=1)
    g_t = F.normalize(t @ t.t(), dim=1)
    return (g_t - g_s).pow(2).sum() / s.shape[0] ** 2


def cc_kernel(f: Tensor, gamma: float = CC_GAMMA, order: int = CC_ORDER) -> Tensor:
    """ψ(F): the order-P Taylor expansion of the Gaussian RBF kernel on L2-normalised rows."""
    f = F.normalize(f, dim=1)
    dots = f @ f.t()
    terms = [(2 * gamma) ** p / math.factorial(p) * dots.pow(p) for p in range(order + 1)]
    return math.exp(-2 * gamma) * torch.stack(terms).sum(0)


def cc_loss(f_s: Tensor, f_t: Tensor, gamma: float = CC_GAMMA, order: int = CC_ORDER,
            variant: str = "paper") -> Tensor:
    """Correlation congruence; inputs are the two embeddings (one width)."""
    s, t = _flat_pair("cc_loss", f_s, f_t, same_width=True)
    if variant == "paper":
        if order < 0 or gamma <= 0:
            raise ValueError(f"cc_loss: need order >= 0 and gamma > 0, got order={order}, gamma={gamma}")
        return (cc_kernel(t, gamma, order) - cc_kernel(s, gamma, order)).pow(2).sum() / s.shape[0] ** 2
    if variant == "repdistiller":
        delta = (s - t).abs()
        return (delta[:-1] * delta[1:]).sum(1).mean()
    raise ValueError(f"cc_loss: variant must be one of {CC_VARIANTS}, got {variant!r}")


def _pairwise_distance(x: Tensor, eps: float = 1e-12) -> Tensor:
    """‖x_i − x_j‖ with a zero diagonal (the clamp keeps sqrt differentiable off it)."""
    sq = x.pow(2).sum(1)
    d = (sq[:, None] + sq[None, :] - 2 * x @ x.t()).clamp_min(eps).sqrt()
    return d * (1 - torch.eye(x.shape[0], dtype=x.dtype, device=x.device))


def _rkd_distance(x: Tensor) -> Tensor:
    d = _pairwise_distance(x)
    n = x.shape[0]
    return d / (d.sum() / (n * (n - 1)))  # μ: mean over ordered pairs i ≠ j


def _rkd_angle(x: Tensor) -> Tensor:
    e = F.normalize(x[None, :, :] - x[:, None, :], dim=2)  # e[i, j] = unit(x_j − x_i)
    return torch.bmm(e, e.transpose(1, 2))  # [i, j, k] = ⟨e_ji, e_ki⟩


def rkd_loss(f_s: Tensor, f_t: Tensor, w_dist: float = RKD_W_DIST, w_angle: float = RKD_W_ANGLE) -> Tensor:
    """Relational KD: distance-wise + angle-wise Huber losses (teacher relations detached)."""
    s, t = _flat_pair("rkd_loss", f_s, f_t)
    t = t.detach()
    loss_d = F.smooth_l1_loss(_rkd_distance(s), _rkd_distance(t))
    loss_a = F.smooth_l1_loss(_rkd_angle(s), _rkd_angle(t))
    return w_dist * loss_d + w_angle * loss_a


def pkt_loss(f_s: Tensor, f_t: Tensor, variant: str = "paper") -> Tensor:
    """Probabilistic knowledge transfer with the cosine kernel; widths may differ."""
    s, t = _flat_pair("pkt_loss", f_s, f_t)
    n = s.shape[0]
    if variant == "paper":
        off = 1 - torch.eye(n, dtype=s.dtype, device=s.device)
        k_s = (F.normalize(s, dim=1) @ F.normalize(s, dim=1).t() + 1) / 2 * off
        k_t = (F.normalize(t, dim=1) @ F.normalize(t, dim=1).t() + 1) / 2 * off
        p_s = k_s / k_s.sum(1, keepdim=True)
        p_t = k_t / k_t.sum(1, keepdim=True)
        tiny = torch.finfo(s.dtype).tiny  # 0·log 0 = 0 (the diagonal, or cos = −1 exactly)
        kl = p_t * (p_t.clamp_min(tiny).log() - p_s.clamp_min(tiny).log())
        return kl.sum() / n**2
    if variant == "repdistiller":
        s = torch.nan_to_num(s / (s.norm(dim=1, keepdim=True) + PKT_EPS))
        t = torch.nan_to_num(t / (t.norm(dim=1, keepdim=True) + PKT_EPS))
        k_s, k_t = (s @ s.t() + 1) / 2, (t @ t.t() + 1) / 2
        p_s = k_s / k_s.sum(1, keepdim=True)
        p_t = k_t / k_t.sum(1, keepdim=True)
        return (p_t * torch.log((p_t + PKT_EPS) / (p_s + PKT_EPS))).mean()
    raise ValueError(f"pkt_loss: variant must be one of {PKT_VARIANTS}, got {variant!r}")
