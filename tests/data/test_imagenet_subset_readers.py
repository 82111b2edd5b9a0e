"""Readers of RINCE Table 3's data: ImageNet-100 / outlier splits (wnid subsets of the ImageNet
folders) and AwA2, against folders written by the test in the real layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from semcl.data import load
from semcl.data.imagenet100 import imagenet100_wnids, imagenet_outlier_wnids
from semcl.errors import DataError


def _jpeg(path: Path, value: int, size=(8, 8)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((size[1], size[0], 3), value, dtype=np.uint8)).save(path, quality=100)


def test_imagenet100_reads_only_its_classes_in_sorted_order(tmp_path):
    wnids = imagenet100_wnids()
    extra = imagenet_outlier_wnids(1)[0]  # a class of full ImageNet that is not in ImageNet-100
    for split in ("train", "val"):
        for w in wnids[::-1] + [extra]:  # written in another order
            _jpeg(tmp_path / "imagenet" / split / w / f"{w}_0.JPEG", 0)
    s = load("imagenet100", tmp_path, "test", image_size=8)
    assert s.num_classes == 100 and len(s) == 100 and s.class_names == sorted(wnids)
    assert [p.parent.name for p in s.paths] == sorted(wnids) and s.labels.tolist() == list(range(100))
    (tmp_path / "imagenet" / "val" / wnids[3] / f"{wnids[3]}_0.JPEG").unlink()
    with pytest.raises(DataError, match=f"{wnids[3]}: no images \\(dataset imagenet100\\)"):
        load("imagenet100", tmp_path, "test")
    (tmp_path / "imagenet" / "val" / wnids[3]).rmdir()
    with pytest.raises(DataError, match=f"missing imagenet/val/{wnids[3]} \\(dataset imagenet100"):
        load("imagenet100", tmp_path, "test")


def test_outlier_split_reads_its_100_classes(tmp_path):
    split2 = imagenet_outlier_wnids(2)
    for w in split2 + imagenet100_wnids()[:3]:
        _jpeg(tmp_path / "imagenet" / "val" / w / "a.JPEG", 0)
    s = load("imagenet_outliers_split2", tmp_path, "test", image_size=8)
    assert s.class_names == sorted(split2) and len(s) == 100


def test_awa2_all_images_and_the_eval_transform(tmp_path):
    base = tmp_path / "Animals_with_Attributes2" / "JPEGImages"
    # 512x256, left half black, right half white: Resize(256) keeps it, CenterCrop(224) takes x in [144, 368)
    img = np.zeros((256, 512, 3), dtype=np.uint8)
    img[:, 256:] = 255
    (base / "killer+whale").mkdir(parents=True)
    Image.fromarray(img).save(base / "killer+whale" / "a.jpg", quality=100)
    _jpeg(base / "antelope" / "b.jpg", 128)
    _jpeg(base / "antelope" / "c.jpg", 128)
    s = load("awa2", tmp_path, "test")
    assert s.class_names == ["antelope", "killer whale"] and s.labels.tolist() == [0, 0, 1]
    x = s.images[[2]][0].float()
    assert x.shape == (3, 224, 224)
    assert x[:, :, :100].max() < 8 and x[:, :, 124:].min() > 247  # 112 black columns, then 112 white
    assert load("awa2", tmp_path, "train").labels.tolist() == [0, 0, 1]  # one folder, no split
