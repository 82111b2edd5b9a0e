"""The cross-entropy baseline of RINCE's `imagenet100` branch (boschresearch/rince @1a060ae,
trained_models/CE/ckpt_epoch_500.pth).

main_ce.py trains a torchvision ResNet (`models.__dict__[opt.model](num_classes=opt.n_cls)`: ResNet-18, 100 classes)
in DistributedDataParallel and saves it with util.py save_model (`{'opt', 'model', 'optimizer', 'epoch'}`), so keys
start with `module.`; the README's command uses the self-supervised augmentations (`--use_ssl_augmentations=True`):

  <torchvision ResNet>   -> backbone.<same>
  fc.{weight,bias}       -> classifier.fc.{weight,bias}
"""

from __future__ import annotations

from semcl.models.released.common import strip_module, unwrap_key

OURS_ALONE: tuple[str, ...] = ()


def unwrap(obj):
    return unwrap_key(obj, "model")


def rename(key: str) -> str | None:
    key = strip_module(key)
    return "classifier." + key if key.startswith("fc.") else "backbone." + key
