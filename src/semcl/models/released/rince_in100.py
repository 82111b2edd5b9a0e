"""RINCE / SCL checkpoints of the `imagenet100` branch (boschresearch/rince @1a060ae, trained_models/{rince,scl}/last.pth).

main_supcon.py wraps `losses.ContrastiveRanking` in DistributedDataParallel and saves it (util.py save_model:
`{'opt': argparse.Namespace, 'model': state_dict, 'optimizer', 'epoch'}`), so keys start with `module.`. Its two
encoders are torchvision ResNets (`models.__dict__[opt.model](num_classes=128)`, ResNet-18 on ImageNet-100) whose
`fc` became Linear(512, 512)-ReLU-Linear(512, 128) (losses.py:34-37):

  backbone_q.<torchvision ResNet>  -> backbone.<same>      backbone_q.fc.<i>  -> head.net.<i>
  backbone_k.<torchvision ResNet>  -> key_backbone.<same>  backbone_k.fc.<i>  -> key_head.net.<i>
  memorybank_InfoNCE, memorybank_labels, queue_ptr [1]     -> bank.features, bank.labels, bank.ptr (a scalar here)
"""

from __future__ import annotations

from semcl.models.released.common import map_key, scalar_pointer, strip_module, unwrap_key

OURS_ALONE: tuple[str, ...] = ()
_RENAMES = (("backbone_q.fc.", "head.net."), ("backbone_k.fc.", "key_head.net."), ("backbone_q.", "backbone."),
            ("backbone_k.", "key_backbone."))
_BUFFERS = {"memorybank_InfoNCE": "bank.features", "memorybank_labels": "bank.labels", "queue_ptr": "bank.ptr"}


def unwrap(obj):
    state = unwrap_key(obj, "model")
    pointer = next((k for k in state if strip_module(str(k)) == "queue_ptr"), None)
    return scalar_pointer(state, pointer) if pointer is not None else state


def rename(key: str) -> str | None:
    key = strip_module(key)
    return map_key(key, _BUFFERS, _RENAMES)
