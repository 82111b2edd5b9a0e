"""Distillation with trainable auxiliary networks: VID and FT (modules + pure losses).

VID (Ahn et al., CVPR 2019), heteroscedastic Gaussian q(t | s) = N(t; μ(s), σ²) per teacher channel c:
    μ = regressor(s)  (three 1×1 convs, ReLU between, mid width = teacher channels as RepDistiller),
    σ_c² = softplus(α_c) + ε,  α_c initialised so that σ_c² = 5 (init_pred_var), ε = 1e-5
    L_VID = mean_{b,c,h,w} [ ½ log σ_c² + (t_{bchw} − μ_{bchw})² / (2σ_c²) ]    (−log q up to a constant)
    RepDistiller applies it to every (feat_s[l], feat_t[l]) of feat[1:-1], one head per layer, summed.
FT (Kim et al., NeurIPS 2018), on the last conv map feat[-2]:
    paraphraser P = decoder ∘ encoder on the teacher map, encoder output F_T with ⌊rate·C_T⌋ channels
    (rate 0.5), trained first by L_rec = mean (x − P(x))²; translator E on the student map → F_S.
    "paper": u = vec(F)/‖vec(F)‖₂ per sample; L_FT = mean_{b,d} |u_S − u_T|   (‖·‖_p with p = 1)
    "repdistiller" (its FactorTransfer): u = normalize(mean_c F_c²) (an attention map of the factor),
    then the same mean absolute difference.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from semcl.losses.distill.feature_maps import pool_to_match

VID_INIT_VAR = 5.0
VID_EPS = 1e-5
FT_RATE = 0.5
FT_VARIANTS = ("paper", "repdistiller")


def vid_loss(pred_mean: Tensor, target: Tensor, log_scale: Tensor, eps: float = VID_EPS) -> Tensor:
    """Gaussian negative log-likelihood with per-channel variance softplus(log_scale) + eps. Maps [B, C, H, W]."""
    if pred_mean.shape != target.shape or log_scale.shape != (target.shape[1],):
        raise ValueError(f"vid_loss: mean {tuple(pred_mean.shape)}, target {tuple(target.shape)} and "
                         f"log_scale {tuple(log_scale.shape)} do not fit")
    var = (F.softplus(log_scale) + eps).view(1, -1, 1, 1)
    return (0.5 * ((pred_mean - target).pow(2) / var + var.log())).mean()


class VIDHead(nn.Module):
    """One VID layer: 1×1-conv regressor μ(s) and the per-channel variance parameters α."""

    def __init__(self, s_channels: int, t_channels: int, mid_channels: int | None = None,
                 init_var: float = VID_INIT_VAR, eps: float = VID_EPS) -> None:
        super().__init__()
        mid = mid_channels or t_channels
        self.regressor = nn.Sequential(
            nn.Conv2d(s_channels, mid, 1, bias=False), nn.ReLU(),
            nn.Conv2d(mid, mid, 1, bias=False), nn.ReLU(),
            nn.Conv2d(mid, t_channels, 1, bias=False))
        # softplus(α) + ε = init_var  ⇔  α = log(exp(init_var − ε) − 1)
        self.log_scale = nn.Parameter(torch.full((t_channels,), math.log(math.expm1(init_var - eps))))
        self.eps = eps

    def forward(self, f_s: Tensor, f_t: Tensor) -> Tensor:
        f_s, f_t = pool_to_match(f_s, f_t)
        return vid_loss(self.regressor(f_s), f_t, self.log_scale, self.eps)


def _conv_block(c_in: int, c_out: int, use_bn: bool, transpose: bool = False) -> list[nn.Module]:
    conv = (nn.ConvTranspose2d if transpose else nn.Conv2d)(c_in, c_out, 3, 1, 1)
    return [conv, nn.BatchNorm2d(c_out) if use_bn else nn.Identity(), nn.LeakyReLU(0.1)]


class Paraphraser(nn.Module):
    """FT paraphraser: 3-conv encoder C → C → rate·C → rate·C, mirrored transposed-conv decoder."""

    def __init__(self, t_channels: int, rate: float = FT_RATE, use_bn: bool = False) -> None:
        super().__init__()
        mid = int(t_channels * rate)
        if mid < 1:
            raise ValueError(f"Paraphraser: rate {rate} leaves no factor channel of {t_channels}")
        self.encoder = nn.Sequential(*_conv_block(t_channels, t_channels, use_bn), *_conv_block(t_channels, mid, use_bn),
                                     *_conv_block(mid, mid, use_bn))
        self.decoder = nn.Sequential(*_conv_block(mid, mid, use_bn, True), *_conv_block(mid, t_channels, use_bn, True),
                                     *_conv_block(t_channels, t_channels, use_bn, True))

    def forward(self, f_t: Tensor) -> tuple[Tensor, Tensor]:
        """Returns (factor, reconstruction)."""
        factor = self.encoder(f_t)
        return factor, self.decoder(factor)


class Translator(nn.Module):
    """FT translator: 3-conv encoder of the student map to the teacher factor's rate·C_T channels."""

    def __init__(self, s_channels: int, t_channels: int, rate: float = FT_RATE, use_bn: bool = True) -> None:
        super().__init__()
        mid = int(t_channels * rate)
        self.encoder = nn.Sequential(*_conv_block(s_channels, s_channels, use_bn), *_conv_block(s_channels, mid, use_bn),
                                     *_conv_block(mid, mid, use_bn))

    def forward(self, f_s: Tensor) -> Tensor:
        return self.encoder(f_s)


def ft_reconstruction_loss(f_t: Tensor, reconstruction: Tensor) -> Tensor:
    """Paraphraser pre-training loss: mean squared reconstruction error."""
    return (reconstruction - f_t).pow(2).mean()


def ft_loss(factor_s: Tensor, factor_t: Tensor, variant: str = "paper") -> Tensor:
    """Factor transfer: mean absolute difference of the normalised factors (maps pooled to one size)."""
    if factor_s.dim() != 4 or factor_s.shape[:2] != factor_t.shape[:2]:
        raise ValueError(f"ft_loss: factors must be [B, C, H, W] with one B and C, got "
                         f"{tuple(factor_s.shape)} and {tuple(factor_t.shape)}")
    factor_s, factor_t = pool_to_match(factor_s, factor_t)
    if variant == "paper":
        u_s, u_t = F.normalize(factor_s.flatten(1), dim=1), F.normalize(factor_t.flatten(1), dim=1)
    elif variant == "repdistiller":
        u_s = F.normalize(factor_s.pow(2).mean(1).flatten(1), dim=1)
        u_t = F.normalize(factor_t.pow(2).mean(1).flatten(1), dim=1)
    else:
        raise ValueError(f"ft_loss: variant must be one of {FT_VARIANTS}, got {variant!r}")
    return (u_s - u_t).abs().mean()
