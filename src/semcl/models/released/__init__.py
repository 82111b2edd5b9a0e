"""The authors' released checkpoints, read strictly into semcl's networks: one module per official layout.

Each layout module has `unwrap(obj)` (the official file's dict -> its flat state dict: which key the training
script saved the weights under) and `rename(key)` (an official parameter name -> semcl's, or None for what the
layout drops on purpose, e.g. PaCo's `linear_k`). `semcl.models.released.convert` applies them whole or not
at all. LAYOUTS names the modules (plain strings: the registry checks a row's `layout` without importing torch).
"""

from __future__ import annotations

import importlib

# layout name -> module (in this package) and what it reads
LAYOUTS: dict[str, tuple[str, str]] = {
    "pcl-moco": ("pcl", "PaCo / GPaCo (dvlab-research/Parametric-Contrastive-Learning): MoCo builder, "
                        "{'state_dict': {module.encoder_q..., module.linear..., module.queue...}}"),
    "pcl-vit": ("pcl_vit", "GPaCo ViT-B/L (Parametric-Contrastive-Learning GPaCo/MAE-ViTs): MAE save_model, "
                           "{'model': {cls_token, pos_embed, blocks..., fc_norm, head, mlp, queue...}, 'args', ...}"),
    "rince-supcon": ("rince", "RINCE cifar branch (boschresearch/rince): {'model': ContrastiveRanking state: "
                              "backbone_q.encoder / backbone_q.head, backbone_k..., memorybank_*}, 'opt', ...}"),
    "rince-in100-supcon": ("rince_in100", "RINCE / SCL of RINCE's imagenet100 branch: {'model': DDP ContrastiveRanking "
                                          "state: module.backbone_q.<torchvision ResNet>, .fc.0/.fc.2, backbone_k, "
                                          "memorybank_*, queue_ptr}, 'opt', ...}"),
    "rince-in100-ce": ("rince_in100_ce", "cross-entropy of RINCE's imagenet100 branch: {'model': DDP torchvision "
                                         "ResNet state (module.conv1 ..., module.fc), 'opt', ...}"),
    "repdistiller": ("repdistiller", "CRD teachers (HobbitLong/RepDistiller train_teacher.py): "
                                     "{'model': state dict, 'epoch', 'accuracy', 'optimizer'}"),
}


def layout_module(name: str):
    """The converter module of layout `name` (KeyError for an unknown name: the registry checks names first)."""
    return importlib.import_module(f"{__name__}.{LAYOUTS[name][0]}")
