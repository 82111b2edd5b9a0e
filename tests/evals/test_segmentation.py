"""Segmentation: confusion-matrix mIoU against a hand computation, the readers against label maps written
in the real layouts (void handling), and one GPaCo segmenter step equal to CE + the pixel loss."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from semcl.data import load
from semcl.errors import DataError
from semcl.evals.segmentation import confusion, mean_iou, multi_scale_logits
from semcl.methods.base import run_step


def test_miou_against_hand_computation():
    target = torch.tensor([[0, 0, 1, 1], [2, 2, 255, 1]])
    pred = torch.tensor([[0, 1, 1, 1], [2, 0, 0, 1]])
    conf = confusion(pred, target, 3)
    # rows = truth: class 0 -> (0, 1); class 1 -> (1, 1, 1); class 2 -> (2, 0); the void pixel is skipped
    assert conf.tolist() == [[1, 1, 0], [0, 3, 0], [1, 0, 1]]
    # IoU0 = 1 / (2 + 2 - 1) = 1/3, IoU1 = 3 / (3 + 4 - 3) = 3/4, IoU2 = 1 / (2 + 1 - 1) = 1/2
    assert mean_iou(conf) == pytest.approx(100 * (1 / 3 + 3 / 4 + 1 / 2) / 3)
    # a class absent from truth and prediction does not count (mmseg's nanmean)
    assert mean_iou(confusion(pred, target, 4)) == pytest.approx(mean_iou(conf))


def test_multi_scale_at_scale_one_is_softmax():
    x = torch.randn(1, 3, 4, 4)
    seg = lambda t: t[:, :2] * 3  # noqa: E731
    assert torch.allclose(multi_scale_logits(seg, x, [1.0], flip=False), seg(x).softmax(1))
    assert torch.allclose(multi_scale_logits(seg, x, [1.0], flip=True), 2 * seg(x).softmax(1), atol=1e-6)


def _save(path: Path, arr: np.ndarray, mode: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr, mode).save(path)


def test_ade20k_reduce_zero_and_cityscapes_train_ids(tmp_path: Path):
    img = np.zeros((4, 4, 3), np.uint8)
    ade = tmp_path / "ADEChallengeData2016"
    for split in ("training", "validation"):
        _save(ade / "images" / split / "a.jpg", img, "RGB")
        _save(ade / "annotations" / split / "a.png", np.array([[0, 1, 150, 2]] * 4, np.uint8), "L")
    s = load("ade20k", tmp_path, "test", 4)
    assert s.num_classes == 150 and s.masks[[0]][0, 0].tolist() == [255, 0, 149, 1]
    city = tmp_path / "cityscapes"
    for split in ("train", "val"):
        _save(city / "leftImg8bit" / split / "aachen" / "aachen_000000_000019_leftImg8bit.png", img, "RGB")
        _save(city / "gtFine" / split / "aachen" / "aachen_000000_000019_gtFine_labelTrainIds.png",
              np.array([[0, 18, 255, 3]] * 4, np.uint8), "L")
    c = load("cityscapes", tmp_path, "train", 4)
    assert c.num_classes == 19 and c.masks[[0]][0, 1].tolist() == [0, 18, 255, 3]
    (city / "gtFine" / "val" / "aachen" / "aachen_000000_000019_gtFine_labelTrainIds.png").unlink()
    with pytest.raises(DataError, match="aachen_000000_000019_gtFine_labelTrainIds.png: missing label map"):
        load("cityscapes", tmp_path, "test", 4)


def test_gpaco_segmenter_step_is_ce_plus_pixel_loss(tmp_path: Path):
    import torch.nn.functional as F

    from semcl.config import RunConfig
    from semcl.data import write_synthetic
    from semcl.losses.gpaco_seg import gpaco_pixel_loss
    from semcl.methods.base import Batch, DataInfo, TrainContext
    from semcl.methods.segmentation import GPacoSegMethod
    from semcl.methods.segmentation.method import GPacoSegmenter

    write_synthetic("cityscapes", tmp_path, train_per_class=1, test_per_class=1)
    train = load("cityscapes", tmp_path, "train", 16)
    cfg = RunConfig()
    cfg.data.name = "cityscapes"
    cfg.method = GPacoSegMethod(segmenter="deeplabv3_tiny", flip=False, num_samples=-1)
    torch.manual_seed(0)
    m = GPacoSegmenter(cfg, DataInfo(train.num_classes, 3, None)).eval()
    m.on_train_start(TrainContext(train, [], torch.device("cpu"), None, 0))
    batch = Batch.of([train.images[[0, 1]]], torch.zeros(2, dtype=torch.long))
    out = run_step(m, batch)
    prepared = m.prepare(batch)
    x, y = (prepared.images - m.mean) / m.std, prepared.masks
    hidden, logits = m.decode(x)
    ce = F.cross_entropy(F.interpolate(logits, size=(16, 16), mode="bilinear", align_corners=False), y,
                         ignore_index=255)
    small = y[:, ::8, ::8]  # nearest downsampling 16 -> 2 picks pixels 0 and 8
    ref = ce + gpaco_pixel_loss(m.mlp(hidden), logits, small, alpha=0.01, tau=0.07, num_samples=-1)
    assert float(out["loss"].detach()) == pytest.approx(float(ref.detach()), rel=1e-5)


def test_mmseg_export_writes_configs_and_names_the_missing_package(tmp_path: Path):
    import importlib.util

    from semcl.methods.segmentation import mmseg_export as mx

    paths = mx.export(tmp_path, data_root="/data/ADEChallengeData2016")
    assert len(paths) == 20 and (tmp_path / "gpaco_mmseg_plugin.py").exists()
    text = (tmp_path / "gpaco_cityscapes_resnet_18_deeplabv3.py").read_text()
    assert "_base_ = ['mmseg::deeplabv3plus/deeplabv3plus_r18-d8_4xb2-80k_cityscapes-512x1024.py']" in text
    assert "type='GPaCoDepthwiseSeparableASPPHead', gpaco=dict(alpha=0.01, tau=0.07" in text
    assert "GPaCo" not in (tmp_path / "baseline_ade20k_swin_t_upernet.py").read_text().split("\n", 1)[1]
    assert "ade20k-512x512.py" in (tmp_path / "gpaco_ade20k_swin_l_upernet.py").read_text()  # official 512 crop
    coco = (tmp_path / "gpaco_coco_stuff_10k_resnet_101_deeplabv3.py").read_text()
    assert "'mmseg::_base_/schedules/schedule_40k.py'" in coco and "backbone=dict(depth=101)" in coco
    assert "decode_head=dict(type='GPaCoDepthwiseSeparableASPPHead', gpaco=dict(alpha=0.01" in coco
    assert "num_classes=171)" in coco and coco.count("decode_head=dict(") == 1
    assert "alpha=0.03" in (tmp_path / "gpaco_cityscapes_resnet_50_deeplabv3.py").read_text()
    plugin = (tmp_path / "gpaco_mmseg_plugin.py").read_text()
    assert "ConvModule(c, c, 1, **conv)" in plugin and "norm_cfg=self.norm_cfg" in plugin
    compile(plugin, "plugin", "exec")
    if importlib.util.find_spec("mmseg") is None:
        with pytest.raises(SystemExit, match="mmsegmentation is not installed: pip install"):
            mx.run(paths[0], tmp_path / "work")


def test_segmenters_start_from_the_users_imagenet_resnet_and_refuse_a_misfit(tmp_path: Path):
    from torchvision.models import resnet50

    from semcl.errors import ConfigError
    from semcl.methods.base import DataInfo
    from semcl.methods.segmentation.method import Segmenter
    from semcl.run_config import build_config

    torch.manual_seed(0)
    weights = resnet50().state_dict()  # a torchvision-layout file as the user would give it (fc included)
    path = tmp_path / "resnet50.pth"
    torch.save(weights, path)

    def build(segmenter):
        cfg = build_config({"data": {"name": "coco_stuff10k"}, "model": {"pretrained": str(path)},
                            "method": {"name": "seg_baseline", "segmenter": segmenter}}, where="test")
        return Segmenter(cfg, DataInfo(5, 3, None))

    got = build("deeplabv3_resnet50").backbone.state_dict()
    assert all(torch.equal(got[k], v) for k, v in weights.items() if not k.startswith("fc."))
    with pytest.raises(ConfigError, match="'model.pretrained' does not fit the backbone"):
        build("deeplabv3_tiny")
