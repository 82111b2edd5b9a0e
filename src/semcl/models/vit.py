"""Vision Transformers as MAE fine-tunes them: timm's ViT with global average pooling + `fc_norm`.

MAE's fine-tuning model (and GPaCo's copy, docs/papers/paco.md §c.6) pools the patch tokens without the class
token, x = mean_{t >= 1} h_t, then applies a LayerNorm `fc_norm` (the final `norm` is removed).
timm's `VisionTransformer(global_pool="avg", fc_norm=True)` is exactly that; with `num_classes=0`
its forward returns the pooled, normalised feature [B, D] (the classifier lives in the method).

Parameter names equal MAE's (`cls_token`, `pos_embed`, `patch_embed.proj.*`, `blocks.<i>.*`,
`fc_norm.*`), so an MAE checkpoint {"model": state_dict} loads by name.

timm is an optional dependency (extra `timm`), imported when a ViT is built.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch import nn

from semcl.errors import ConfigError

# name -> (patch, embed_dim, depth, heads): MAE's vit_base_patch16 / vit_large_patch16, and a tiny
# ViT for smoke runs and tests
VITS: dict[str, tuple[int, int, int, int]] = {
    "vit_base_patch16": (16, 768, 12, 12),
    "vit_large_patch16": (16, 1024, 24, 16),
    "vit_tiny_test": (8, 32, 2, 2),
}


def timm_vit_class():
    try:
        from timm.models.vision_transformer import VisionTransformer
    except ImportError:
        raise ImportError("ViT backbones need timm: pip install 'semcl[timm]'") from None
    return VisionTransformer


def build_vit(name: str, *, image_size: int = 224, in_channels: int = 3, drop_path: float = 0.0) -> nn.Module:
    """A ViT feature extractor (MAE global pool + fc_norm, no head) with `out_dim` and `depth`."""
    if name not in VITS:
        raise ValueError(f"unknown ViT {name!r}; known: {', '.join(sorted(VITS))}")
    patch, dim, depth, heads = VITS[name]
    model = timm_vit_class()(img_size=image_size, patch_size=patch, in_chans=in_channels, num_classes=0,
                        embed_dim=dim, depth=depth, num_heads=heads, mlp_ratio=4.0, qkv_bias=True,
                        global_pool="avg", fc_norm=True, drop_path_rate=drop_path)
    model.out_dim = dim
    model.depth = depth
    return model



def interpolate_pos_embed(pos_embed: torch.Tensor, num_patches: int, prefix_tokens: int = 1) -> torch.Tensor:
    """Resize the patch part of a [1, prefix + g*g, D] position embedding to `num_patches` tokens
    (bicubic on the g x g grid, as MAE's `interpolate_pos_embed`); the class token's row is kept."""
    old = pos_embed.shape[1] - prefix_tokens
    if old == num_patches:
        return pos_embed
    g_old, g_new = math.isqrt(old), math.isqrt(num_patches)
    if g_old * g_old != old or g_new * g_new != num_patches:
        raise ValueError(f"position embeddings of {old} / {num_patches} patches are not square grids")
    extra, tokens = pos_embed[:, :prefix_tokens], pos_embed[:, prefix_tokens:]
    dim = tokens.shape[-1]
    grid = tokens.reshape(1, g_old, g_old, dim).permute(0, 3, 1, 2).float()
    grid = nn.functional.interpolate(grid, size=(g_new, g_new), mode="bicubic", align_corners=False)
    tokens = grid.permute(0, 2, 3, 1).reshape(1, g_new * g_new, dim).to(pos_embed.dtype)
    return torch.cat([extra, tokens], dim=1)


# checkpoint keys MAE's fine-tuning drops or never uses: the pre-training norm (replaced by fc_norm
# under global pooling), a classifier head, and anything of the MAE decoder
_DROPPED = ("norm.", "head.", "decoder", "mask_token")


def load_mae_checkpoint(vit: nn.Module, path: Path) -> None:
    """Load an MAE pre-trained checkpoint ({"model": state_dict}, MAE key names) into `vit`.

    As MAE's main_finetune: the position embedding is interpolated when the grid differs; the
    pre-training `norm`, any `head` and decoder keys are dropped; `fc_norm` stays at its init.
    Every remaining backbone key must be present (a ConfigError naming the file otherwise)."""
    from semcl.files import inflation_problem

    if Path(path).is_file() and (problem := inflation_problem(path)):
        raise ConfigError(f"{path}: refused as an MAE checkpoint: {problem}")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError) as err:
        raise ConfigError(f"{path}: cannot load the MAE checkpoint ({type(err).__name__}: {err})") from None
    if not isinstance(blob, dict) or not isinstance(blob.get("model"), dict):
        raise ConfigError(f"{path}: key 'model' missing (expected MAE's {{'model': state_dict}} layout)")
    state = {k: v for k, v in blob["model"].items() if not k.startswith(_DROPPED)}
    if "pos_embed" in state:
        state["pos_embed"] = interpolate_pos_embed(state["pos_embed"], vit.patch_embed.num_patches)
    try:
        missing, unexpected = vit.load_state_dict(state, strict=False)
    except RuntimeError as err:  # shape mismatches
        raise ConfigError(f"{path}: the checkpoint does not fit the ViT ({str(err).splitlines()[1].strip()})") from None
    missing = [k for k in missing if not k.startswith("fc_norm.")]
    if missing or unexpected:
        raise ConfigError(f"{path}: the checkpoint does not fit the ViT (missing {missing[:3]}, "
                          f"unexpected {unexpected[:3]})")


def vit_layer_id(name: str, depth: int) -> int:
    """Layer of a backbone parameter for layer-wise lr decay (MAE `get_layer_id_for_vit`):
    cls_token / pos_embed / patch_embed -> 0, blocks.i -> i + 1, everything else -> depth + 1."""
    if name in ("cls_token", "pos_embed", "reg_token") or name.startswith("patch_embed"):
        return 0
    if name.startswith("blocks."):
        return int(name.split(".")[1]) + 1
    return depth + 1


NO_WEIGHT_DECAY = ("pos_embed", "cls_token", "dist_token")


def layer_decay_groups(named: list[tuple[str, nn.Parameter, str | None]], depth: int, weight_decay: float,
                       decay: float) -> list[dict[str, Any]]:
    """Parameter groups with layer-wise lr decay (MAE `param_groups_lrd`).

    `named`: (name, parameter, backbone-relative name or None for parameters outside the ViT, which
    sit at the top layer depth + 1). Layer l gets lr_scale = decay^(depth + 1 - l); 1-d parameters
    (biases, norms) and pos_embed / cls_token get no weight decay. One group per (layer, decay?)."""
    groups: dict[tuple[int, bool], dict[str, Any]] = {}
    top = depth + 1
    for _, param, vit_name in named:
        if not param.requires_grad:
            continue
        layer = top if vit_name is None else vit_layer_id(vit_name, depth)
        no_wd = param.ndim == 1 or (vit_name is not None and vit_name in NO_WEIGHT_DECAY)
        key = (layer, not no_wd)
        if key not in groups:
            groups[key] = {"params": [], "lr_scale": decay ** (top - layer),
                           "weight_decay": 0.0 if no_wd else weight_decay}
        groups[key]["params"].append(param)
    return [groups[k] for k in sorted(groups)]
