"""Facts about the datasets the suite reads, kept free of torch so the CLI's fast paths can use them."""

from dataclasses import dataclass


@dataclass(frozen=True)
class DatasetInfo:
    num_classes: int
    num_train: int
    num_test: int
    channels: int
    size: int
    has_coarse: bool


DATASETS: dict[str, DatasetInfo] = {
    "cifar100": DatasetInfo(100, 50_000, 10_000, 3, 32, True),
    "cifar10": DatasetInfo(10, 50_000, 10_000, 3, 32, False),
    "tinyimagenet": DatasetInfo(200, 100_000, 10_000, 3, 64, False),
    "fashion_mnist": DatasetInfo(10, 60_000, 10_000, 1, 28, True),
    "mnist": DatasetInfo(10, 60_000, 10_000, 1, 28, False),
    # long-tailed split files (training-split sizes; test = the split the tables read)
    "imagenet_lt": DatasetInfo(1000, 115_846, 50_000, 3, 224, False),
    "places_lt": DatasetInfo(365, 62_500, 36_500, 3, 224, False),
    "inat18": DatasetInfo(8142, 437_513, 24_426, 3, 224, False),
    "imagenet": DatasetInfo(1000, 1_281_167, 50_000, 3, 224, False),
}

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
