"""GPaCo's ViT checkpoints (dvlab-research/Parametric-Contrastive-Learning @fe56535, GPaCo/MAE-ViTs).

main_finetune_gpaco.py trains `models_vit_paco.VisionTransformer_paco` (a timm VisionTransformer with MAE's
global pool: `fc_norm` in place of the deleted `norm`) and util/misc.py save_model writes
`{'model': model_without_ddp.state_dict(), 'optimizer', 'epoch', 'scaler', 'args': argparse.Namespace}`;
main_finetune_gpaco_eval.py (sh/finetune_base_mae_gpaco_eval.sh, `--resume gpaco_vitb_fullimagenet.pth.tar`)
loads checkpoint['model'] strictly. No `module.` prefix (the unwrapped model is saved). Its names:

  cls_token, pos_embed, patch_embed.proj.*, blocks.<i>.*, fc_norm.*   the ViT          -> backbone.<same>
  head.{weight,bias}                   the classifier (GPaCo's class centres)          -> head.<same>
  mlp.{0,2,4}.{weight,bias}            the projector Linear-GELU-Linear-GELU-Linear    -> projector.<same>
  queue [K, 128], queue_l [K]          the keys and their labels (K = 8192)            -> bank.features, bank.labels
  queue_ptr [1]                        the write pointer                               -> bank.ptr (a scalar here)

The timm VisionTransformer's own names are semcl's backbone names (semcl.models.vit builds the same class).
"""

from __future__ import annotations

from semcl.models.released.common import scalar_pointer, unwrap_key

OURS_ALONE = ("pretrained_loaded",)  # semcl's flag that the MAE weights went in; training only
_RENAMES = (("head.", "head."), ("mlp.", "projector."))
_BUFFERS = {"queue": "bank.features", "queue_l": "bank.labels", "queue_ptr": "bank.ptr"}


def unwrap(obj):
    return scalar_pointer(unwrap_key(obj, "model"), "queue_ptr")


def rename(key: str) -> str | None:
    if key in _BUFFERS:
        return _BUFFERS[key]
    for old, new in _RENAMES:
        if key.startswith(old):
            return new + key[len(old):]
    return "backbone." + key  # the ViT's own names; anything else is reported as unexpected by the strict check
