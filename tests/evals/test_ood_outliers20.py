"""The outliers20 OOD column variant: TinyImageNet restricted to its 20 outlier classes (rince.md §g.7)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from semcl.data import classnames as cn
from semcl.data.imagenet100 import wnid_list
from semcl.data.ood_subsets import ood_subset_rows, tinyimagenet_class_wnids, tinyimagenet_real_wnids
from semcl.errors import ConfigError
from semcl.evals.ood import class_gaussian_auroc
from semcl.evals.protocols import validate_column
from semcl.evals.protocols.ood import metric_key, run


def _tiny_root(root: Path, wnids: list[str]) -> None:
    """tiny-imagenet-200 with one 64x64 val JPEG per class i (in ``wnids`` order), pixel value 1 + i."""
    base = root / "tiny-imagenet-200"
    (base / "val" / "images").mkdir(parents=True)
    (base / "wnids.txt").write_text("\n".join(wnids) + "\n")
    (base / "words.txt").write_text("".join(f"{w}\tthing {i}\n" for i, w in enumerate(wnids)))
    lines = []
    for i, w in enumerate(wnids):
        Image.fromarray(np.full((64, 64, 3), 1 + i, dtype=np.uint8)).save(base / "val" / "images" / f"v{i}.JPEG",
                                                                         quality=100)
        lines.append(f"v{i}.JPEG\t{w}\t0\t0\t63\t63\n")
    (base / "val" / "val_annotations.txt").write_text("".join(lines))


def test_real_wnid_list_and_synthetic_positions(tmp_path):
    real = tinyimagenet_real_wnids()
    assert len(real) == 200 and real == sorted(real) and set(wnid_list("tiny_imagenet_outliers")) <= set(real)
    synth = [cn.tinyimagenet_synthetic_wnid(i) for i in range(200)]
    _tiny_root(tmp_path, synth)
    wnids, synthetic = tinyimagenet_class_wnids(tmp_path)
    assert synthetic and wnids == real
    labels = torch.arange(200).repeat(2)  # every class twice
    rows = ood_subset_rows("outliers20", labels, tmp_path)
    outlier_positions = sorted(real.index(w) for w in wnid_list("tiny_imagenet_outliers"))
    assert sorted(set(labels[rows].tolist())) == outlier_positions and len(rows) == 40


def test_metric_key_and_bad_columns():
    col = validate_column({"key": "c", "label": "C", "eval": "ood", "out": "tinyimagenet", "classes": "outliers20"},
                          "x.yaml", 0)
    assert metric_key(col, {}) == "ood_auroc_tinyimagenet_outliers20"
    assert metric_key(col, {"tinyimagenet": "mnist"}) is None  # a substitute lacks those classes
    assert metric_key(col, {"tinyimagenet": None}) is None
    with pytest.raises(ConfigError, match="x.yaml: column 'c': key 'classes' = 'outliers20' restricts tinyimagenet"):
        validate_column({"key": "c", "label": "C", "eval": "ood", "out": "cifar10", "classes": "outliers20"}, "x.yaml", 0)
    with pytest.raises(ConfigError, match="key 'classes' = 'few' is not one of \\['outliers20'\\]"):
        validate_column({"key": "c", "label": "C", "eval": "ood", "out": "tinyimagenet", "classes": "few"}, "x.yaml", 0)


@pytest.mark.parametrize("limit", [None, 4])
def test_run_measures_the_subset_from_the_same_features(tmp_path, limit):
    outliers = wnid_list("tiny_imagenet_outliers")
    inliers = ["n01443537", "n01629819", "n01641577", "n01644900", "n01698640"]
    wnids = sorted(inliers + outliers)
    _tiny_root(tmp_path, wnids)
    g = torch.Generator().manual_seed(0)
    train_f = torch.randn(40, 3, generator=g, dtype=torch.float64)
    train_y = torch.arange(4).repeat(10)
    test_f = torch.randn(12, 3, generator=g, dtype=torch.float64)

    def features_of(images):  # a 3-d feature from the pixel value 1 + class position (a flat JPEG decodes exactly)
        v = images.double().mean(dim=(1, 2, 3))
        return torch.stack([v / 10, torch.sin(v), torch.cos(v / 3)], dim=1)

    ctx = SimpleNamespace(cfg=SimpleNamespace(eval=SimpleNamespace(ood=["tinyimagenet"], ood_limit=limit)),
                          train=SimpleNamespace(images=torch.zeros(1, 3, 64, 64), labels=train_y),
                          train_features=train_f,
                          test_features=test_f, data_root=tmp_path, size=64, features_of=features_of)
    metrics = run(ctx)
    # reference: val rows are in class order (one image each), so row i is class i
    pix = torch.tensor([1.0 + i for i in range(len(wnids))], dtype=torch.float64)
    ref_f = torch.stack([pix / 10, torch.sin(pix), torch.cos(pix / 3)], dim=1)
    out_rows = [i for i, w in enumerate(wnids) if w in outliers]
    full = list(range(len(wnids)))
    if limit:
        full, out_rows = full[:limit], out_rows[:limit]
    assert metrics["ood_auroc_tinyimagenet"] == pytest.approx(
        100 * class_gaussian_auroc(train_f, train_y, test_f, ref_f[full]), abs=1e-9)
    assert metrics["ood_auroc_tinyimagenet_outliers20"] == pytest.approx(
        100 * class_gaussian_auroc(train_f, train_y, test_f, ref_f[out_rows]), abs=1e-9)
