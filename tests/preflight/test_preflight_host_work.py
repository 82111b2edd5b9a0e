"""Registered rows whose step does host work on values (a negative sampler keyed by labels, MAE's mixup seed,
DeepLabV3's batch read and flips) run the preflight's fake step at paper size: a memory figure measured at the
row's batch per GPU, not the formula's fallback (CRD, SCNS-SupCon, the MAE fine-tunes and the segmentation
rows all fell back before, the last two to a whole check at full size)."""

from __future__ import annotations

import dataclasses

import pytest

from semcl.preflight.plan import check_tables
from semcl.registry.tables import get_table

ROWS = [
    ("scns/kd-cifar100", ["Teacher resnet56", "CRD resnet56 to resnet20"]),
    ("scns/sup-cifar10", ["uniform negatives resnet18_cifar"]),
    ("gpaco/mae-robustness", ["CE (MAE fine-tune) ViT-B"]),
    ("gpaco/seg", ["GPaCo Cityscapes ResNet-50 (torchvision DeepLabV3 stand-in)"]),
]


@pytest.mark.usefixtures("single_thread")
@pytest.mark.parametrize(("table_id", "labels"), ROWS, ids=[t for t, _ in ROWS])
def test_rows_with_host_work_get_a_fake_step_figure(table_id, labels, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # user-supplied weights (gpaco/seg) are absent here: the row's error, not its memory's
    monkeypatch.setenv("SEMCL_LOADER_WORKERS", "0")
    table = get_table(table_id)
    table = dataclasses.replace(table, rows=[r for r in table.rows if r.label in labels])
    assert [r.label for r in table.rows] == labels
    res = {r.row: r for r in check_tables([table], "paper", tmp_path / "w", 80.0)}
    row = res[labels[-1]]
    assert row.fake_note is None, row.fake_note
    assert row.fake_gpu_gb is not None and row.est_gpu_gb == row.fake_gpu_gb
    if table_id == "gpaco/seg":
        assert row.error is not None and "key 'model.pretrained'" in row.error and row.real_step_px == 64
    else:
        assert row.error is None, row.error


@pytest.mark.usefixtures("single_thread")
def test_a_memory_check_runs_the_teachers_caching_pass_on_two_images_with_the_same_figure(tmp_path, monkeypatch):
    """SCNS-instance's pools need the teacher's features of every training image (a pass that was most of the
    kd-tinyimagenet preflight); a memory check needs their shapes only (TrainContext.shapes_only): one batch's
    two images' outputs, repeated. The figures equal those with the whole pass (SHAPES_ONLY_IMAGES the stand-in's
    count)."""
    from semcl.methods.distill import core, teacher

    monkeypatch.setenv("SEMCL_LOADER_WORKERS", "0")
    table = get_table("scns/kd-cifar100")
    labels = ["Teacher resnet56", "Teacher resnet110", "SCNS-instance resnet56 to resnet20",
              "SCNS-instance resnet110 to resnet20"]
    table = dataclasses.replace(table, rows=[r for r in table.rows if r.label in labels])
    passes: list[int] = []
    real_pass = teacher.teacher_pass

    def counted(net, images, *args, **kw):
        passes.append(images.shape[0])
        return real_pass(net, images, *args, **kw)

    monkeypatch.setattr(core, "teacher_pass", counted)
    one = {r.row: r for r in check_tables([table], "paper", tmp_path / "w", 80.0)}
    n = max(passes)
    # the whole check's pass (SCNS-instance resnet56) reads every image, the memory check (resnet110) two
    assert sorted(passes) == [2, n] and n > 2, passes
    passes.clear()
    monkeypatch.setattr(core, "SHAPES_ONLY_IMAGES", 10**6)
    whole = {r.row: r for r in check_tables([table], "paper", tmp_path / "w2", 80.0)}
    assert passes == [n, n]
    row = "SCNS-instance resnet110 to resnet20"
    assert one[row].fake_note is None and one[row].same_shape_as is None
    assert one[row].fake_gpu_gb == whole[row].fake_gpu_gb


@pytest.mark.usefixtures("single_thread")
def test_a_memory_check_mines_hsa_neighbours_on_two_images_with_the_same_figures(tmp_path, monkeypatch):
    """An ImageNet-size HSA row's memory check (at 224 px: its whole check steps at 64 px) mined on the stand-in's
    every image at 224 px, ~3-10 s of a row; its step and mining figures need the table's shape only. Mined on
    SHAPES_ONLY_IMAGES, the figures equal those of a mining over every image."""
    from semcl.methods import base
    from semcl.methods.hsa import method as hsa

    monkeypatch.setenv("SEMCL_LOADER_WORKERS", "0")
    table = get_table("hsa/abl-k")
    table = dataclasses.replace(table, rows=[r for r in table.rows if r.label == "k 40"])
    encoded: list[int] = []
    real = hsa.HSA._encoded

    def counted(self, images):
        encoded.append(images.shape[0])
        return real(self, images)

    monkeypatch.setattr(hsa.HSA, "_encoded", counted)
    quick = check_tables([table], "paper", tmp_path / "w", 80.0)[0]
    n = max(encoded)
    assert sorted(encoded) == [base.SHAPES_ONLY_IMAGES, n] and n > base.SHAPES_ONLY_IMAGES, encoded  # memory, whole
    encoded.clear()
    monkeypatch.setattr(hsa, "SHAPES_ONLY_IMAGES", 10**6)
    whole = check_tables([table], "paper", tmp_path / "w2", 80.0)[0]
    assert encoded == [n, n]
    assert quick.fake_note is None and quick.mining_gpu_gb is not None
    assert (quick.fake_gpu_gb, quick.mining_gpu_gb) == (whole.fake_gpu_gb, whole.mining_gpu_gb)
