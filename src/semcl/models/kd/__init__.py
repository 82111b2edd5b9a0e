"""The KD model zoo: every architecture of the CRD / RepDistiller tables, keyed by RepDistiller's names.

``build_kd_model(name, num_classes, in_channels=3)`` builds one; every model is a
:class:`semcl.models.kd.base.KDNet` (logits from ``forward``, ``forward_features(x, preact)`` for the
feature-based distillers, ``feature_channels`` metadata), for 32x32 and 64x64 inputs alike.
"""

from __future__ import annotations

from collections.abc import Callable

from semcl.models.kd.base import KDNet, feature_shapes
from semcl.models.kd.mobilenetv2 import mobile_half
from semcl.models.kd.resnet50 import resnet50_cifar
from semcl.models.kd.resnet_cifar import (
    resnet8,
    resnet8x4,
    resnet14,
    resnet20,
    resnet32,
    resnet32x4,
    resnet44,
    resnet56,
    resnet110,
)
from semcl.models.kd.shufflenet import shufflenet_v1, shufflenet_v2
from semcl.models.kd.vgg import vgg8, vgg11, vgg13, vgg16, vgg19
from semcl.models.kd.wrn import wrn_16_1, wrn_16_2, wrn_40_1, wrn_40_2

KD_MODELS: dict[str, Callable[..., KDNet]] = {
    "resnet8": resnet8,
    "resnet14": resnet14,
    "resnet20": resnet20,
    "resnet32": resnet32,
    "resnet44": resnet44,
    "resnet56": resnet56,
    "resnet110": resnet110,
    "resnet8x4": resnet8x4,
    "resnet32x4": resnet32x4,
    "ResNet50": resnet50_cifar,
    "wrn_16_1": wrn_16_1,
    "wrn_16_2": wrn_16_2,
    "wrn_40_1": wrn_40_1,
    "wrn_40_2": wrn_40_2,
    "vgg8": vgg8,
    "vgg11": vgg11,
    "vgg13": vgg13,
    "vgg16": vgg16,
    "vgg19": vgg19,
    "MobileNetV2": mobile_half,
    "ShuffleV1": shufflenet_v1,
    "ShuffleV2": shufflenet_v2,
}

# Spellings used in papers and issues for the same networks.
KD_MODEL_ALIASES: dict[str, str] = {"ShuffleNetV1": "ShuffleV1", "ShuffleNetV2": "ShuffleV2", "mobile_half": "MobileNetV2"}


def build_kd_model(name: str, num_classes: int, in_channels: int = 3) -> KDNet:
    """The KD network ``name`` (a key of ``KD_MODELS`` or an alias) with a ``num_classes``-way classifier."""
    key = KD_MODEL_ALIASES.get(name, name)
    if key not in KD_MODELS:
        raise ValueError(f"unknown KD model {name!r}; known: {', '.join(KD_MODELS)}")
    return KD_MODELS[key](num_classes=num_classes, in_channels=in_channels)


__all__ = ["KD_MODELS", "KD_MODEL_ALIASES", "KDNet", "build_kd_model", "feature_shapes"]
