"""Robustness sets and metrics (GPaCo Sec. IV-C): readers against files written in the real layouts,
mCE in both forms against a hand computation, the ImageNet-R logit mask, and the data files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from semcl.data import dataset_spec, load
from semcl.data.sets.imagenet import save_jpeg
from semcl.data.sets.robustness import CORRUPTIONS, SEVERITIES, alexnet_errors, imagenet_r_wnids, read_corruption
from semcl.errors import ConfigError, DataError
from semcl.evals.protocols import metric_key, validate_column
from semcl.evals.robustness import mce_alexnet, mce_unnormalised, top1

IMG = np.full((8, 8, 3), 100, np.uint8)


def test_mce_forms_against_hand_computation():
    errors = {"gaussian_noise": [10, 20, 30, 40, 50], "brightness": [5, 5, 5, 5, 5]}
    # unnormalised: mean(30, 5) = 17.5
    assert mce_unnormalised(errors) == pytest.approx(17.5)
    # normalised: CE_gauss = 150 / (5 * 88.6428) , CE_bright = 25 / (5 * 56.4592); 100 * mean
    hand = 100 * (150 / 443.214 + 25 / 282.296) / 2
    assert mce_alexnet(errors, alexnet_errors()) == pytest.approx(hand, rel=1e-9)
    assert hand == pytest.approx(21.3497, abs=1e-3)
    with pytest.raises(ValueError, match="no AlexNet error for corruption 'speckle'"):
        mce_alexnet({"speckle": [1.0] * 5}, alexnet_errors())


def test_data_files():
    wnids = imagenet_r_wnids()
    assert len(wnids) == 200 == len(set(wnids)) and wnids == sorted(wnids)
    assert wnids[:3] == ["n01443537", "n01484850", "n01494475"] and wnids[-1] == "n12267677"
    alex = alexnet_errors()
    assert list(alex) == list(CORRUPTIONS) and alex["gaussian_noise"] == 0.886428 and alex["jpeg_compression"] == 0.6065


def test_masked_top1():
    logits = torch.tensor([[9.0, 1.0, 2.0, 0.0], [9.0, 0.0, 1.0, 3.0]])
    # full argmax: class 0 for both; over columns [1, 3]: column 0 (class 1) then column 1 (class 3)
    assert top1(logits, torch.tensor([0, 0])) == 100.0
    assert top1(logits, torch.tensor([0, 1]), torch.tensor([1, 3])) == 100.0
    assert top1(logits, torch.tensor([1, 1]), torch.tensor([1, 3])) == 50.0


def test_imagenet_c_reader(tmp_path: Path):
    spec = dataset_spec("imagenet_c")
    for c in CORRUPTIONS:
        for s in SEVERITIES:
            for w in ("n01443537", "n01440764"):
                save_jpeg(tmp_path / "imagenet-c" / c / str(s) / w / f"{c}{s}.JPEG", IMG)
    one = read_corruption(spec, tmp_path, "fog", 3, 8)
    assert one.class_names == ["n01440764", "n01443537"] and one.labels.tolist() == [0, 1]
    assert one.paths[0] == tmp_path / "imagenet-c/fog/3/n01440764/fog3.JPEG"
    assert len(load("imagenet_c", tmp_path, "test", 8)) == 15 * 5 * 2
    (tmp_path / "imagenet-c/fog/3/n01440764/fog3.JPEG").unlink()
    (tmp_path / "imagenet-c/fog/3/n01440764").rmdir()
    assert read_corruption(spec, tmp_path, "fog", 3, 8).class_names == ["n01443537"]
    import shutil
    shutil.rmtree(tmp_path / "imagenet-c/snow/5")
    with pytest.raises(DataError, match="missing imagenet-c/snow/5"):
        load("imagenet_c", tmp_path, "test", 8)


def test_imagenet_r_and_sketch_readers(tmp_path: Path):
    for w in ("n01443537", "n01484850"):
        save_jpeg(tmp_path / "imagenet-r" / w / "a.jpg", IMG)
        save_jpeg(tmp_path / "sketch" / w / "b.JPEG", IMG)
    r = load("imagenet_r", tmp_path, "test", 8)
    assert r.class_names == ["n01443537", "n01484850"] and r.images[[1]].shape == (1, 3, 8, 8)
    assert load("imagenet_sketch", tmp_path, "test", 8).labels.tolist() == [0, 1]
    save_jpeg(tmp_path / "imagenet-r" / "n01440764" / "c.jpg", IMG)  # tench: not an ImageNet-R class
    with pytest.raises(DataError, match="n01440764: not one of the 200 ImageNet-R classes"):
        load("imagenet_r", tmp_path, "test", 8)


def test_columns():
    col = validate_column({"key": "c", "label": "C", "eval": "robustness", "testset": "imagenet_c",
                           "score": "mce_alexnet"}, "x.yaml", 0)
    assert metric_key(col, {}) == "imagenet_c_mce_alexnet"
    with pytest.raises(ConfigError, match="x.yaml: column 'c': key 'score' = 'mce' is not one of"):
        validate_column({"key": "c", "label": "C", "eval": "robustness", "testset": "imagenet_r", "score": "mce"},
                        "x.yaml", 0)
