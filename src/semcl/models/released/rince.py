"""RINCE checkpoints of the `cifar` branch (boschresearch/rince @0b11e37, trained_models/*/last.pth).

main_supcon.py saves `save_model(criterion, ...)` (util.py: `{'opt': argparse.Namespace, 'model':
state_dict, 'optimizer', 'epoch'}`) of `losses.ContrastiveRanking`, which holds two `SupConResNet`s
(networks/resnet_big.py: `encoder` ResNet with `shortcut.<i>`, `head` = Linear-ReLU-Linear) and the memory bank:

  backbone_q.encoder.<...>  -> backbone.<...>        backbone_q.head.<i>  -> head.net.<i>
  backbone_k.encoder.<...>  -> key_backbone.<...>    backbone_k.head.<i>  -> key_head.net.<i>
  memorybank_InfoNCE        -> bank.features         memorybank_labels    -> bank.labels

With several GPUs the script wraps each backbone in DataParallel (`backbone_q.module.encoder...`); a
`module.` part is removed wherever it stands. The bank's write pointer is not saved (semcl's `bank.ptr`
keeps its start value, which evaluation never reads).
"""

from __future__ import annotations

from semcl.models.released.common import map_key, strip_module, unwrap_key

OURS_ALONE = ("bank.ptr",)
_RENAMES = (("backbone_q.encoder.", "backbone."), ("backbone_q.head.", "head.net."),
            ("backbone_k.encoder.", "key_backbone."), ("backbone_k.head.", "key_head.net."))
_BUFFERS = {"memorybank_InfoNCE": "bank.features", "memorybank_labels": "bank.labels"}


def unwrap(obj):
    return unwrap_key(obj, "model")


def rename(key: str) -> str | None:
    key = strip_module(key)
    return map_key(key, _BUFFERS, _RENAMES)
