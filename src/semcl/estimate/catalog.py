"""Backbone compute costs for `semcl plan`'s estimate, kept free of torch.

Dataset facts (sizes, classes, statistics, layout) are the dataset registry's:
semcl.data.registry.DATASETS.
"""

# Forward+backward cost of one image in GFLOPs (3x the forward pass) at the size each
# backbone is used with; only for `semcl plan`'s rough cost estimate.
BACKBONE_GFLOPS: dict[str, float] = {
    "resnet50_cifar": 3 * 1.30,
    "resnet18_cifar": 3 * 0.56,
    "resnet_tiny": 3 * 0.016,
    "resnet32_cifar": 3 * 0.07,
    "resnet32_ldam": 3 * 0.07,  # resnet32_cifar with parameter-free shortcuts: the same count
    "resnet200": 3 * 15.0,
    "resnet18": 3 * 1.82,
    "resnet50": 3 * 4.1,
    "resnet101": 3 * 7.8,
    "resnet152": 3 * 11.5,
    "resnext50_32x4d": 3 * 4.3,
    "resnext101_32x4d": 3 * 8.0,
    # The KD zoo (semcl.models.kd, RepDistiller's names), counted by scripts/count_kd_gflops.py:
    # torch.utils.flop_counter over one forward + backward of a 3x32x32 image, 100 classes, torch 2.x
    # (2 FLOPs per multiply-add; the comment is the forward alone). FlopCounterMode counts the
    # backward of grouped / depthwise convolutions as dense, so MobileNetV2 / ShuffleV1 / V2 are
    # overstated (backward >> 2x forward); kept as counted.
    "resnet8": 0.07416,  # fwd 0.02501
    "resnet14": 0.1591,  # fwd 0.05333
    "resnet20": 0.244,  # fwd 0.08164
    "resnet32": 0.4139,  # fwd 0.1383
    "resnet44": 0.5838,  # fwd 0.1949
    "resnet56": 0.7536,  # fwd 0.2515
    "resnet110": 1.518,  # fwd 0.5063
    "resnet8x4": 1.061,  # fwd 0.3541
    "resnet32x4": 6.496,  # fwd 2.166
    "ResNet50": 7.785,  # fwd 2.596
    "wrn_16_1": 0.1591,  # fwd 0.05333
    "wrn_16_2": 0.6058,  # fwd 0.2022
    "wrn_40_1": 0.4988,  # fwd 0.1666
    "wrn_40_2": 1.965,  # fwd 0.6552
    "vgg8": 0.5736,  # fwd 0.1924
    "vgg11": 1.253,  # fwd 0.4189
    "vgg13": 1.706,  # fwd 0.5699
    "vgg16": 2.386,  # fwd 0.7964
    "vgg19": 3.065,  # fwd 1.023
    "MobileNetV2": 0.249,  # fwd 0.01305
    "ShuffleV1": 0.6111,  # fwd 0.07738
    "ShuffleV2": 0.5458,  # fwd 0.08901
}

# Networks a row names in its method config rather than in model.backbone, in GMACs of one forward at
# their reference input (the unit of the ResNet entries above: torchvision's and timm's "GFLOPS" columns
# count multiply-adds), so the estimate costs the network the row really trains.
# ViTs at 224 px (timm's model table: ViT-B/16 17.6, ViT-L/16 61.6 GMACs); the test ViT is negligible.
VIT_GMACS: dict[str, float] = {"vit_base_patch16": 17.6, "vit_large_patch16": 61.6, "vit_tiny_test": 0.01}
# 3-D ResNets per 16-frame clip at 112 px (torchvision's R3D_18 weights table: 40.7; Hara et al.'s 3D-ResNet-18
# 8.3, counted by the semcl project over its convolutions: the max-pool quarters layer1-4); scaled by frames
# and pixels to the row's clip
VIDEO_GMACS: dict[str, float] = {"r3d_18": 40.7, "hara_r3d18": 8.3, "hara_r3d18_b": 8.3, "r3d_small": 0.5}
