"""PaCo / GPaCo checkpoints (dvlab-research/Parametric-Contrastive-Learning @fe56535).

The training scripts (PaCo/LT/paco_lt.py, PaCo/Full-ImageNet/paco_imagenet.py, GPaCo/LT/paco_lt.py and
paco_imagenet.py) save `{'epoch', 'arch', 'acc' or 'best_acc', 'state_dict': model.state_dict(), 'optimizer'}`
of a DistributedDataParallel-wrapped `moco.builder.MoCo`, so every key starts with `module.`:

  encoder_q.<torchvision ResNet>     the query encoder        -> backbone.<same>
  encoder_q.fc.<i>                   its projector (MLP)      -> head.<i>
  encoder_k.<...> / encoder_k.fc.<i> PaCo's momentum encoder  -> key_backbone.<...> / key_head.<i>
  linear.{weight,bias}               the class centres        -> classifier.fc.{weight,bias}
  linear_k.{weight,bias}             PaCo's momentum copy of the centres: never read at test time, dropped
  queue, queue_l, queue_ptr          the keys, labels, pointer -> bank.features, bank.labels, bank.ptr
                                     (queue_ptr is torch.zeros(1) there, a scalar here)

GPaCo's builder (GPaCo/LT/moco/builder.py) has no encoder_k / linear_k; its projector is fc.0, fc.2, fc.4
(three Linear layers), PaCo's fc.0 (Linear), fc.1 (BN), fc.3 (Linear): both are semcl's `head` indices as they are.
"""

from __future__ import annotations

from semcl.models.released.common import map_key, scalar_pointer, strip_module, unwrap_key

# semcl keys the file does not hold: set from the training set's class counts at build time
OURS_ALONE = ("center_offset",)
_RENAMES = (("encoder_q.fc.", "head."), ("encoder_k.fc.", "key_head."), ("encoder_q.", "backbone."),
            ("encoder_k.", "key_backbone."), ("linear.", "classifier.fc."))
_BUFFERS = {"queue": "bank.features", "queue_l": "bank.labels", "queue_ptr": "bank.ptr"}


def unwrap(obj):
    return scalar_pointer(unwrap_key(obj, "state_dict"), "module.queue_ptr")  # builder.py: torch.zeros(1)


def rename(key: str) -> str | None:
    key = strip_module(key)
    if key.startswith("linear_k."):
        return None
    return map_key(key, _BUFFERS, _RENAMES)
