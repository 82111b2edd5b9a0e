"""CRD's CIFAR-100 teachers (HobbitLong/RepDistiller, scripts/fetch_pretrained_teachers.sh: <arch>_vanilla/
ckpt_epoch_240.pth), saved by train_teacher.py as `{'epoch', 'model': model.state_dict(), 'accuracy',
'optimizer'}`. semcl's KD zoo (semcl.models.kd) is the same networks, with each stage's blocks one level
down (`layer<i>.<j>.` -> `layer<i>.blocks.<j>.`), under the method's `backbone.`; every other name (WRN's
`block<i>`, VGG's `block<i>` / `pool<i>`, MobileNetV2, ShuffleNet, `fc` / `classifier`) is the same.
"""

from __future__ import annotations

import re

from semcl.models.released.common import strip_module, unwrap_key

OURS_ALONE: tuple[str, ...] = ()
_STAGE_BLOCK = re.compile(r"^(layer\d+)\.(\d+)\.")


def unwrap(obj):
    return unwrap_key(obj, "model")


def rename(key: str) -> str | None:
    return "backbone." + _STAGE_BLOCK.sub(r"\1.blocks.\2.", strip_module(key))
