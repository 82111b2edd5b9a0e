"""Feature-map distillation between intermediate conv features [B, C, H, W]: FitNet, AT, NST, FSP, AB.

Scale convention of the whole package: each loss is normalised as in RepDistiller (means where it
takes means), because the β of weights.REPDISTILLER_WEIGHTS was tuned against that normalisation;
constant factors a paper writes (½, sums instead of means) are absorbed into β. Where two spatial
sizes differ, the larger map is adaptive-average-pooled to the smaller one (RepDistiller).

FitNet (Romero et al., ICLR 2015), hint layer 2 in RepDistiller:
    L_hint = mean_{b,c,h,w} (r(s)_{bchw} − t_{bchw})²          (paper: ½‖t − r(s)‖², r a conv regressor)
AT (Zagoruyko & Komodakis, ICLR 2017), p = 2:
    q(A) = vec(Σ_c |A_c|^p) / ‖vec(Σ_c |A_c|^p)‖₂       (channel mean instead of sum: same after normalising)
    "squared" (default; the AT authors' code and RepDistiller): L = mean_{b,hw} (q_S − q_T)²
    "norm" (eq. 2 literally, ‖·‖₂ not squared, with the paper's division by batch and map size):
        L = (1 / (B·HW)) Σ_b ‖q_S(b) − q_T(b)‖₂
NST (Huang & Wang 2017), polynomial kernel k(x, y) = (xᵀy)², per-channel maps f^i ∈ R^{HW}, L2-normalised:
    L = mean_b [ mean_{i,i'} k(t^i, t^i') + mean_{j,j'} k(s^j, s^j') − 2 mean_{i,j} k(s^j, t^i) ]
FSP (Yim et al., CVPR 2017), for consecutive stages (F1 [C1, HW], F2 [C2, HW], pooled to one size):
    G_{ij} = (1/HW) Σ_{hw} F1_{i,hw} F2_{j,hw};   L = Σ_pairs mean_{b,i,j} (G^S_{ij} − G^T_{ij})²
AB (Heo et al., AAAI 2019), margin μ = 1, pre-ReLU features, connector r on the student:
    ℓ(s, t) = 1[t > 0]·max(0, μ − s)² + 1[t ≤ 0]·max(0, μ + s)²
    L = Σ_l w_l · (3/1000) · (1/B) Σ_{b,c,h,w} ℓ(r(s_l), t_l),   w_l = 2^{l − L + 1}  (l = 0..L−1)
    (w_l and 3/1000 are the AB authors' code, kept by RepDistiller.) AB and FSP are the losses of
    a 30-epoch initialisation stage; RepDistiller's main stage then trains on CE (+KD) only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

AT_P = 2.0
AB_MARGIN = 1.0
AT_FORMS = ("squared", "norm")


def pool_to_match(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """Adaptive-average-pool the spatially larger of two [B, C, H, W] maps to the other's size."""
    ha, hb = a.shape[2], b.shape[2]
    if ha > hb:
        a = F.adaptive_avg_pool2d(a, b.shape[2:])
    elif hb > ha:
        b = F.adaptive_avg_pool2d(b, a.shape[2:])
    return a, b


def _check_pairs(name: str, g_s: Sequence[Tensor], g_t: Sequence[Tensor]) -> None:
    if len(g_s) != len(g_t) or not g_s:
        raise ValueError(f"{name}: need equally many (>= 1) student and teacher maps, got {len(g_s)} and {len(g_t)}")
    for s, t in zip(g_s, g_t, strict=True):
        if s.dim() != 4 or t.dim() != 4 or s.shape[0] != t.shape[0]:
            raise ValueError(f"{name}: maps must be [B, C, H, W] with one B, got {tuple(s.shape)} and {tuple(t.shape)}")


class ConvRegressor(nn.Module):
    """FitNet hint regressor / AB connector (RepDistiller ConvReg): conv + BN (+ ReLU) from s to t shape.

    s_H = 2·t_H: 3×3 stride-2 conv; 2·s_H = t_H: 4×4 stride-2 transposed conv; s_H >= t_H: a
    (1 + s_H − t_H) kernel without padding (1×1 when sizes agree).
    """

    def __init__(self, s_shape: Sequence[int], t_shape: Sequence[int], use_relu: bool = True) -> None:
        super().__init__()
        _, s_c, s_h, s_w = s_shape
        _, t_c, t_h, t_w = t_shape
        if s_h == 2 * t_h:
            self.conv: nn.Module = nn.Conv2d(s_c, t_c, kernel_size=3, stride=2, padding=1)
        elif 2 * s_h == t_h:
            self.conv = nn.ConvTranspose2d(s_c, t_c, kernel_size=4, stride=2, padding=1)
        elif s_h >= t_h:
            self.conv = nn.Conv2d(s_c, t_c, kernel_size=(1 + s_h - t_h, 1 + s_w - t_w))
        else:
            raise ValueError(f"ConvRegressor: student map {s_h}x{s_w} cannot be regressed onto teacher {t_h}x{t_w}")
        self.bn = nn.BatchNorm2d(t_c)
        self.use_relu = use_relu

    def forward(self, x: Tensor) -> Tensor:
        x = self.bn(self.conv(x))
        return F.relu(x) if self.use_relu else x


def hint_loss(f_s: Tensor, f_t: Tensor) -> Tensor:
    """FitNet: mean squared error between the regressed student hint r(s) and the teacher hint t."""
    if f_s.shape != f_t.shape:
        raise ValueError(f"hint_loss: regressed student {tuple(f_s.shape)} != teacher {tuple(f_t.shape)}")
    return (f_s - f_t).pow(2).mean()


def attention_map(f: Tensor, p: float = AT_P) -> Tensor:
    """q(A): channel mean of A^p, flattened to [B, HW] and L2-normalised per sample."""
    return F.normalize(f.pow(p).mean(1).flatten(1), dim=1)


def at_loss(g_s: Sequence[Tensor], g_t: Sequence[Tensor], p: float = AT_P, form: str = "squared") -> Tensor:
    """Attention transfer summed over the given layer pairs (RepDistiller: feat[1:-1])."""
    _check_pairs("at_loss", g_s, g_t)
    if form not in AT_FORMS:
        raise ValueError(f"at_loss: form must be one of {AT_FORMS}, got {form!r}")
    total = g_s[0].new_zeros(())
    for s, t in zip(g_s, g_t, strict=True):
        s, t = pool_to_match(s, t)
        diff = attention_map(s, p) - attention_map(t, p)
        if form == "squared":
            total = total + diff.pow(2).mean()
        else:
            total = total + diff.norm(dim=1).sum() / diff.numel()
    return total


def nst_loss(g_s: Sequence[Tensor], g_t: Sequence[Tensor]) -> Tensor:
    """Neuron selectivity transfer: squared MMD with k(x, y) = (xᵀy)², summed over layer pairs."""
    _check_pairs("nst_loss", g_s, g_t)
    total = g_s[0].new_zeros(())
    for s, t in zip(g_s, g_t, strict=True):
        s, t = pool_to_match(s, t)
        s = F.normalize(s.flatten(2), dim=2)  # [B, C_S, HW]
        t = F.normalize(t.flatten(2), dim=2)
        k_tt = torch.bmm(t, t.transpose(1, 2)).pow(2).mean()
        k_ss = torch.bmm(s, s.transpose(1, 2)).pow(2).mean()
        k_st = torch.bmm(s, t.transpose(1, 2)).pow(2).mean()
        total = total + k_tt.detach() + k_ss - 2 * k_st  # the teacher-only term carries no gradient
    return total


def fsp_matrix(f1: Tensor, f2: Tensor) -> Tensor:
    """G [B, C1, C2] = (1/HW) Σ_hw F1_{i,hw} F2_{j,hw}, after pooling the two maps to one size."""
    f1, f2 = pool_to_match(f1, f2)
    return torch.bmm(f1.flatten(2), f2.flatten(2).transpose(1, 2)) / (f1.shape[2] * f1.shape[3])


def fsp_loss(g_s: Sequence[Tensor], g_t: Sequence[Tensor]) -> Tensor:
    """FSP: Σ over consecutive map pairs (g[i], g[i+1]) of mean (G^S − G^T)² (RepDistiller: feat[:-1])."""
    _check_pairs("fsp_loss", g_s, g_t)
    if len(g_s) < 2:
        raise ValueError("fsp_loss: need at least two stages to form a flow matrix")
    for s, t in zip(g_s, g_t, strict=True):
        if s.shape[1] != t.shape[1]:
            raise ValueError(f"fsp_loss: student and teacher channels must agree per stage, got {s.shape[1]} and {t.shape[1]}")
    total = g_s[0].new_zeros(())
    for i in range(len(g_s) - 1):
        total = total + (fsp_matrix(g_s[i], g_s[i + 1]) - fsp_matrix(g_t[i], g_t[i + 1])).pow(2).mean()
    return total


def ab_loss(g_s: Sequence[Tensor], g_t: Sequence[Tensor], margin: float = AB_MARGIN) -> Tensor:
    """Activation-boundary loss on pre-activation maps (student maps already through the connector)."""
    _check_pairs("ab_loss", g_s, g_t)
    n_layers, batch = len(g_s), g_s[0].shape[0]
    total = g_s[0].new_zeros(())
    for layer, (s, t) in enumerate(zip(g_s, g_t, strict=True)):
        if s.shape != t.shape:
            raise ValueError(f"ab_loss: connector output {tuple(s.shape)} != teacher map {tuple(t.shape)}")
        active = (t > 0).to(s.dtype)
        per = active * F.relu(margin - s).pow(2) + (1 - active) * F.relu(margin + s).pow(2)
        total = total + 2.0 ** (layer - n_layers + 1) * per.sum() / batch * 3 / 1000
    return total
