"""Encoders, heads and momentum machinery shared by the contrastive methods."""

from semcl.models.backbones import (
    BACKBONES,
    BasicBlock,
    Bottleneck,
    CifarResNet,
    build_backbone,
    resnet18_cifar,
    resnet50_cifar,
    resnet_tiny,
)
from semcl.models.heads import LinearClassifier, NormalizedLinear, ProjectionHead
from semcl.models.momentum import (
    MemoryBank,
    MomentumQueue,
    gather_from_all_ranks,
    momentum_copy,
    momentum_update_,
    shuffled_forward,
)

__all__ = [
    "MomentumQueue",
    "BACKBONES",
    "BasicBlock",
    "Bottleneck",
    "CifarResNet",
    "LinearClassifier",
    "MemoryBank",
    "NormalizedLinear",
    "ProjectionHead",
    "build_backbone",
    "gather_from_all_ranks",
    "shuffled_forward",
    "momentum_copy",
    "momentum_update_",
    "resnet18_cifar",
    "resnet50_cifar",
    "resnet_tiny",
]
