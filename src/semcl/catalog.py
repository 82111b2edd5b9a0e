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
    "resnet200": 3 * 15.0,
    "resnet18": 3 * 1.82,
    "resnet50": 3 * 4.1,
    "resnet101": 3 * 7.8,
    "resnet152": 3 * 11.5,
    "resnext50_32x4d": 3 * 4.3,
    "resnext101_32x4d": 3 * 8.0,
}
