"""Every fact the suite knows about a dataset, one `DatasetSpec` per dataset, in `DATASETS`.

Torch-free on purpose: the CLI's fast paths (`semcl plan`'s cost estimate) read it. The reader
and the synthetic writer are named by lazy "module:function" references and imported only when
`semcl.data.load` or `semcl.data.write_synthetic` needs them. A dataset family keeps its reader
and writer together in one module under `semcl.data.sets`.

Reader protocol:  reader(spec, root, split, image_size) -> ImageSet | FileImageSet
    `root` is an existing data root, `split` a key of `spec.splits`, `image_size` the decode size
    (file-backed sets; the in-memory readers return images at their native `spec.size`).
Writer protocol:  writer(out, splits) -> None
    writes the synthetic stand-in into the empty folder `out` (the dataset's `folder`) in the
    real on-disk format; `splits` maps "train" / "test" to (HWC uint8 images, labels).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from semcl.data import classnames as cn
from semcl.errors import DataError

Stats = tuple[tuple[float, ...], tuple[float, ...]]


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset: layout, sizes, statistics, hierarchy, reader and synthetic writer.

    `splits` maps each split name `load` accepts to what it reads on disk (relative to `folder`),
    which is where the val/test rule lives: iNaturalist 2018 and ImageNet have no labelled test
    set, so their "test" reads the official val split, as every paper does.
    """

    name: str
    folder: str  # top-level folder under the data root (the name the official archive unpacks to)
    num_classes: int  # of the real data
    num_train: int  # real training-split size (the long-tailed sets: the long-tailed split file)
    num_test: int  # real size of the split the tables test on
    channels: int
    size: int  # image side: native for in-memory sets, default decode size for file-backed ones
    mean: tuple[float, ...]  # per-channel statistics of the training set, pixels in [0, 1]
    std: tuple[float, ...]
    reader: str  # "module:function", see the reader protocol above
    writer: str  # "module:function", see the writer protocol above
    splits: dict[str, str] = field(default_factory=lambda: {"train": "train", "test": "test"})
    has_coarse: bool = False  # the reader returns coarse (superclass) labels
    file_backed: bool = False  # images decoded per batch (FileImageSet), not held in memory
    synthetic_groups: tuple[int, ...] = ()  # visual group of each class of the synthetic stand-in
    synthetic_size: int | None = None  # image side of the synthetic stand-in (None: `size`)
    # a video set: the reader returns a semcl.data.video.VideoSet (clips decoded per batch), and the
    # writer writes the whole synthetic folder itself: writer(root, *, train_per_class, test_per_class, seed)
    video: bool = False
    # "module:function" of the cheap completeness check run before submitting (semcl.data.check)
    check: str = "semcl.data.check:check_image_folders"

    @property
    def stats(self) -> Stats:
        return self.mean, self.std

    @property
    def synthetic_classes(self) -> int:
        return len(self.synthetic_groups)

    @property
    def synthetic_side(self) -> int:
        return self.synthetic_size or self.size


def resolve(ref: str) -> Callable[..., Any]:
    """The object a "package.module:attribute" reference names (imports the module)."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


_SETS = "semcl.data.sets"
_CIFAR100 = ((0.5071, 0.4867, 0.4408), (0.2675, 0.2565, 0.2761))  # the SupCon code base's values
_CIFAR10 = ((0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010))
_TINY = ((0.4802, 0.4481, 0.3975), (0.2302, 0.2265, 0.2262))
_IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))  # also Places-LT (official PaCo/GPaCo code)
_INAT = ((0.466, 0.471, 0.380), (0.195, 0.194, 0.192))
# torchvision's video models were trained on Kinetics-400 with these (semcl.data.video.KINETICS_STATS)
_KINETICS = ((0.43216, 0.394666, 0.37645), (0.22803, 0.22145, 0.216989))
# mnist_motion: MNIST's pixel statistics (mean 0.1307, E[x^2] = 0.3081^2 + 0.1307^2) diluted by
# one 28x28 digit on a black 64x64 canvas: mean 0.1307·784/4096, std sqrt(0.112·784/4096 − mean^2)
_MNIST_MOTION = ((0.025,) * 3, (0.144,) * 3)
_TINY_GROUPS = tuple(i // cn.TINYIMAGENET_SYNTHETIC_GROUP_SIZE for i in range(cn.TINYIMAGENET_NUM_CLASSES))
_LT_GROUPS = tuple(i // 5 for i in range(20))  # synthetic long-tailed sets: 20 classes in groups of 5


# the completeness check of each family's on-disk format (semcl.data.check)
_CHECKS = {"cifar": "check_cifar", "mnist": "check_idx", "tinyimagenet": "check_tinyimagenet",
           "splitfile": "check_split_files", "imagenet": "check_image_folders", "robustness": "check_image_folders",
           "segmentation": "check_segmentation", "video": "check_video_splits",
           "imagenet_subsets": "check_image_folders", "awa2": "check_image_folders"}


_SEG_GROUPS = (0, 0, 1, 1, 2, 2)  # synthetic segmentation sets: 6 classes
_TEST_ONLY = {"train": ".", "test": "."}  # test-only sets: no training split exists
_IN_FOLDERS = {"train": "train", "val": "val", "test": "val"}
_SUBSET_GROUPS = tuple(i // 10 for i in range(100))  # synthetic stand-ins of the 100-class subsets


def _split_files(prefix: str, test: str = "test") -> dict[str, str]:
    return {"train": f"{prefix}_train.txt", "val": f"{prefix}_val.txt", "test": f"{prefix}_{test}.txt"}


def _spec(name: str, folder: str, classes: int, train: int, test: int, channels: int, size: int,
          stats: Stats, module: str, **kw: Any) -> DatasetSpec:
    reader, writer = kw.pop("reader", "read"), kw.pop("writer", "write")
    kw["check"] = f"semcl.data.check:{kw.pop('check', _CHECKS[module])}"
    return DatasetSpec(name, folder, classes, train, test, channels, size, *stats,
                       f"{_SETS}.{module}:{reader}", f"{_SETS}.{module}:{writer}", **kw)


# One line per dataset: name, folder, classes, train, test, channels, size, stats, family module.
DATASETS: dict[str, DatasetSpec] = {s.name: s for s in (
    _spec("cifar100", "cifar-100-python", 100, 50_000, 10_000, 3, 32, _CIFAR100, "cifar", reader="read_cifar100",
          writer="write_cifar100", has_coarse=True, synthetic_groups=tuple(cn.CIFAR100_FINE_TO_COARSE)),
    _spec("cifar10", "cifar-10-batches-py", 10, 50_000, 10_000, 3, 32, _CIFAR10, "cifar", reader="read_cifar10",
          writer="write_cifar10", splits={"train": " ".join(f"data_batch_{i}" for i in range(1, 6)),
                                          "test": "test_batch"},
          synthetic_groups=tuple(cn.CIFAR10_SYNTHETIC_GROUPS)),
    _spec("tinyimagenet", "tiny-imagenet-200", 200, 100_000, 10_000, 3, 64, _TINY, "tinyimagenet",
          splits={"train": "train", "test": "val"}, synthetic_groups=_TINY_GROUPS),
    _spec("fashion_mnist", "FashionMNIST", 10, 60_000, 10_000, 1, 28, ((0.2860,), (0.3530,)), "mnist",
          reader="read_fashion_mnist", splits={"train": "train", "test": "t10k"}, has_coarse=True,
          synthetic_groups=tuple(cn.FASHION_MNIST_FINE_TO_COARSE)),
    _spec("mnist", "MNIST", 10, 60_000, 10_000, 1, 28, ((0.1307,), (0.3081,)), "mnist", reader="read_mnist",
          splits={"train": "train", "test": "t10k"}, synthetic_groups=tuple(cn.MNIST_SYNTHETIC_GROUPS)),
    _spec("imagenet_lt", "ImageNet_LT", 1000, 115_846, 50_000, 3, 224, _IMAGENET, "splitfile",
          writer="write_imagenet_lt", splits=_split_files("ImageNet_LT"), file_backed=True,
          synthetic_groups=_LT_GROUPS, synthetic_size=32),
    _spec("places_lt", "Places_LT", 365, 62_500, 36_500, 3, 224, _IMAGENET, "splitfile",
          writer="write_places_lt", splits=_split_files("Places_LT"), file_backed=True,
          synthetic_groups=_LT_GROUPS, synthetic_size=32),
    # no public test labels: the official val split is every paper's test set
    _spec("inat18", "iNaturalist18", 8142, 437_513, 24_426, 3, 224, _INAT, "splitfile",
          writer="write_inat18", splits=_split_files("iNaturalist18", test="val"), file_backed=True,
          synthetic_groups=_LT_GROUPS, synthetic_size=32),
    # split 1 of the video sets (docs/papers/rince.md §e.6); sizes in videos; frames decoded at `size` (file-backed)
    _spec("ucf101", "UCF101", 101, 9_537, 3_783, 3, 128, _KINETICS, "video", writer="write_ucf101",
          file_backed=True, video=True, synthetic_groups=(0, 1, 2, 3)),
    _spec("hmdb51", "HMDB51", 51, 3_570, 1_530, 3, 128, _KINETICS, "video", writer="write_hmdb51",
          file_backed=True, video=True, synthetic_groups=(0, 1, 2, 3)),
    # the `mini` set: synthetic motion of real MNIST digits (semcl.data.video.mnist_motion), 20 classes;
    # its sizes are what `semcl prepare-mini` writes
    _spec("mnist_motion", "mnist_motion", 20, 600, 200, 3, 64, _MNIST_MOTION, "video", reader="read_square",
          writer="write_mnist_motion_synthetic", file_backed=True, video=True,
          synthetic_groups=tuple(range(20))),
    # ILSVRC-2012 folders; the val folder is the test set
    _spec("imagenet", "imagenet", 1000, 1_281_167, 50_000, 3, 224, _IMAGENET, "imagenet",
          splits={"train": "train", "val": "val", "test": "val"}, file_backed=True,
          synthetic_groups=_LT_GROUPS, synthetic_size=32),
    # test-only robustness sets (GPaCo Sec. IV-C): every split reads the same images
    _spec("imagenet_c", "imagenet-c", 1000, 3_750_000, 3_750_000, 3, 224, _IMAGENET, "robustness",
          reader="read_imagenet_c", writer="write_imagenet_c", splits=_TEST_ONLY, file_backed=True,
          synthetic_groups=_LT_GROUPS, synthetic_size=32),
    _spec("imagenet_r", "imagenet-r", 200, 30_000, 30_000, 3, 224, _IMAGENET, "robustness",
          reader="read_imagenet_r", writer="write_folder_set", splits=_TEST_ONLY, file_backed=True,
          synthetic_groups=_LT_GROUPS, synthetic_size=32),
    _spec("imagenet_sketch", "sketch", 1000, 50_889, 50_889, 3, 224, _IMAGENET, "robustness",
          reader="read_sketch", writer="write_folder_set", splits=_TEST_ONLY, file_backed=True,
          synthetic_groups=_LT_GROUPS, synthetic_size=32),
    # semantic segmentation (GPaCo Sec. IV-D; mmseg layouts); "test" is the official val split
    _spec("ade20k", "ADEChallengeData2016", 150, 20_210, 2_000, 3, 512, _IMAGENET, "segmentation",
          reader="read_ade20k", writer="write_ade20k", splits={"train": "training", "test": "validation"},
          file_backed=True, synthetic_groups=_SEG_GROUPS, synthetic_size=32),
    _spec("coco_stuff10k", "coco_stuff10k", 171, 9_000, 1_000, 3, 512, _IMAGENET, "segmentation",
          reader="read_coco_stuff10k", writer="write_coco_stuff10k", splits={"train": "train2014", "test": "test2014"},
          file_backed=True, synthetic_groups=_SEG_GROUPS, synthetic_size=32),
    _spec("pascal_context59", "VOCdevkit", 59, 4_996, 5_104, 3, 480, _IMAGENET, "segmentation",
          reader="read_pascal_context59", writer="write_pascal_context59", splits={"train": "train", "test": "val"},
          file_backed=True, synthetic_groups=_SEG_GROUPS, synthetic_size=32),
    _spec("cityscapes", "cityscapes", 19, 2_975, 500, 3, 512, _IMAGENET, "segmentation",
          reader="read_cityscapes", writer="write_cityscapes", splits={"train": "train", "test": "val"},
          file_backed=True, synthetic_groups=_SEG_GROUPS, synthetic_size=32),
    # RINCE Table 3: class subsets of the ImageNet folders (wnid lists in semcl/data/files); the
    # ImageNet-100 train size is the sum over its 100 ILSVRC-2012 classes (~1,300 each)
    _spec("imagenet100", "imagenet", 100, 126_689, 5_000, 3, 224, _IMAGENET, "imagenet_subsets",
          writer="write_imagenet100", splits=_IN_FOLDERS, file_backed=True, synthetic_groups=_SUBSET_GROUPS,
          synthetic_size=32),
    # outlier splits: train size approximate (100 classes x ~1,280), used only for cost estimates
    *(_spec(f"imagenet_outliers_split{k}", "imagenet", 100, 128_000, 5_000, 3, 224, _IMAGENET,
            "imagenet_subsets", writer=f"write_outliers_split{k}", splits=_IN_FOLDERS, file_backed=True,
            synthetic_groups=_SUBSET_GROUPS, synthetic_size=32) for k in (1, 2, 3)),
    # AwA2: one folder of 37,322 images in 50 class folders, no split (OOD only)
    _spec("awa2", "Animals_with_Attributes2", 50, 37_322, 37_322, 3, 224, _IMAGENET, "awa2",
          splits={"train": "JPEGImages", "test": "JPEGImages"}, file_backed=True, synthetic_groups=_LT_GROUPS,
          synthetic_size=32),
)}


def dataset_spec(name: str) -> DatasetSpec:
    """The spec of dataset `name`; DataError naming the known ones otherwise."""
    if name not in DATASETS:
        raise DataError(f"unknown dataset '{name}' (known: {', '.join(sorted(DATASETS))})")
    return DATASETS[name]


def stats(name: str) -> Stats:
    """(mean, std) per channel of dataset `name`, for normalisation."""
    return dataset_spec(name).stats
