"""semcl plan's estimate against hand arithmetic from the public figures in train_throughput.csv."""

import pytest

from semcl.data.registry import DATASETS
from semcl.estimate.gpu_hours import COUNTED_FLOPS, estimate, seconds_per_sample
from semcl.estimate.throughput import measured_rate, rows
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table

A100_TF32, A100_AMP, A100_AMP_8 = 938.0, 2470.0, 2077.6  # NVIDIA DLE ResNet-50, img/s per GPU (8 GPUs: 16621 / 8)
TIMM_R50 = 826.06  # timm RTX 3090 AMP ResNet-50


def _row(table, label):
    t = get_table(table)
    run = next(r for r in plan_runs(t, "paper") if r.row_label == label)
    return run.config, t.resources_for(label, "paper").gpus


def test_every_figure_names_its_source():
    for r in rows():
        assert r["source"] and float(r["value"]) > 0
        if r["kind"] in ("train", "anchor"):
            assert "@" in r["source"] and r["gpu"] and r["precision"]
    assert measured_rate("vit_large_patch16", True) == pytest.approx(117.08 * A100_AMP / TIMM_R50)
    assert measured_rate("resnet_tiny", True) is None  # not in timm: the FLOP formula


def test_gpaco_vit_large_is_maes_published_run_on_an_a100():
    cfg, gpus = _row("gpaco/mae-robustness", "GPaCo ViT-L")
    est = estimate(cfg, gpus)
    # MAE's ViT-L fine-tune: 62.7 img/s per V100 on 32 GPUs (AMP), brought to one GPU by the V100 8-GPU figure
    # (8322 / 8 of 1200) and to an A100 by 2470 / 1200; then the A100's own 8-GPU efficiency
    one_a100 = 62.7 / (1040.3 / 1200) * A100_AMP / 1200
    rate = one_a100 * (A100_AMP_8 / A100_AMP)
    want_h = 50 * DATASETS["imagenet"].num_train * 2.0 / (8 * rate) / 3600  # 2 views, 50 epochs
    assert (gpus, est.bound) == (8, "model")
    assert est.train_wall_h == pytest.approx(want_h, rel=1e-9)


def test_resnet200_is_timm_arithmetic_and_the_slower_of_it_and_its_two_jpeg_views_sets_the_pace():
    from semcl.estimate import throughput
    from semcl.estimate.gpu_hours import network_rate

    cfg, gpus = _row("paco/full-imagenet", "PaCo ResNet-200")
    assert network_rate(cfg) == pytest.approx(276.62 * A100_AMP / TIMM_R50)
    est = estimate(cfg, gpus)
    eff = 1 - (1 - A100_AMP_8 / A100_AMP) * 2 / 3  # log2(4) / log2(8)
    model_h = 400 * DATASETS["imagenet"].num_train * (4 / 3) / (4 * 276.62 * A100_AMP / TIMM_R50 * eff) / 3600
    # 7 workers per GPU at the measured two-view rate (bench/results.md loader row 1, which bench_loader.py --write
    # also puts in the estimate's table)
    rate = throughput.loader_rate("jpeg224_2views")
    loader_h = 400 * DATASETS["imagenet"].num_train / (4 * 7 * rate) / 3600
    assert est.bound == ("loader" if loader_h > model_h else "model")
    assert est.train_wall_h == pytest.approx(max(loader_h, model_h))


def test_kd_student_adds_its_teachers_forward_by_the_flop_formula():
    cfg, _ = _row("scns/kd-cifar100", "KD resnet110 to resnet20")
    flops_per_s = A100_TF32 * 3 * 2 * 4.1e9
    want = 0.244e9 / flops_per_s + (1 / 3) * 1.518e9 / flops_per_s  # counted fwd+bwd FLOPs (catalog)
    assert seconds_per_sample(cfg) == pytest.approx(want, rel=1e-9)


def test_video_pretraining_is_loader_bound():
    cfg, gpus = _row("rince/tab4", "RINCE")
    est = estimate(cfg, gpus, cpus_per_gpu=8)
    from semcl.estimate import throughput

    # 7 workers at the measured per-worker rate (bench/results.md video row 4, put in the estimate's table by
    # `make bench`) < the 3-D ResNet's pace
    rate = throughput.loader_rate("video_frames")
    assert est.bound == "loader"
    want = cfg.schedule.epochs * DATASETS["ucf101"].num_train / (7 * rate) / 3600
    assert est.train_wall_h == pytest.approx(want, rel=1e-9)
    assert estimate(cfg, gpus, cpus_per_gpu=33).train_wall_h < est.train_wall_h  # more workers, faster


def test_counted_flops_are_the_kd_zoo():
    from semcl.models.kd import KD_MODELS

    assert COUNTED_FLOPS == set(KD_MODELS)


def test_training_pace_is_the_slower_of_model_and_loader():
    from semcl.estimate.gpu_hours import training_pace

    cfg, _ = _row("rince/tab4", "RINCE")
    from semcl.estimate import throughput

    # loader-bound: 7 workers at bench video row 4's rate (the estimate's table)
    assert training_pace(cfg) == pytest.approx(7 * throughput.loader_rate("video_frames"))
    cfg, _ = _row("gpaco/mae-robustness", "GPaCo ViT-L")
    one_a100 = 62.7 / (1040.3 / 1200) * A100_AMP / 1200  # MAE's published ViT-L run (model-bound, 1 GPU)
    assert training_pace(cfg) == pytest.approx(one_a100 / 2.0)


def test_a_logit_ensemble_holds_no_gpu_and_costs_no_gpu_hour():
    # summing saved logits is CPU work: the job asks SLURM for no GPU, and the bill has nothing for it
    from semcl.registry.resources import CPU_ONLY

    label = "GPaCo ensemble (2 x ResNeXt-101, logit sum)"
    cfg, gpus = _row("gpaco/imagenet-lt", label)
    assert get_table("gpaco/imagenet-lt").resources_for(label, "paper") == CPU_ONLY
    assert gpus == 0 and estimate(cfg, gpus).gpu_hours == 0.0
    assert get_table("gpaco/imagenet-lt").resources_for("GPaCo ResNeXt-101 32x4d (code lr 0.06)", "paper").gpus == 4


@pytest.mark.parametrize(("table", "label", "iters", "trials", "s_per_iter"), [
    ("hsa/transfer-coco", "CsMl 200 ep", 180_000, 1, 0.584),  # Mask R-CNN R50-C4, detectron2 MODEL_ZOO.md
    ("hsa/transfer-voc", "CsMl 200 ep", 24_000, 5, 0.551),  # Faster R-CNN R50-C4
])
def test_a_detectron2_transfer_costs_detectron2s_published_pace(table, label, iters, trials, s_per_iter):
    cfg, gpus = _row(table, label)
    est = estimate(cfg, gpus)
    assert (gpus, est.bound) == (8, "published")
    # iterations x trials x s/iter on the zoo's 8 GPUs, held for that long by 8 GPUs
    assert est.gpu_hours == pytest.approx(iters * trials * s_per_iter * 8 / 3600, rel=1e-12)
