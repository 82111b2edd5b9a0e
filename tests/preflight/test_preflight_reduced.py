"""A row's report says what its small real step ran below the row's own config (semcl.preflight.check.reductions),
in the text table and in the status file, while its memory figure is the fake step's at the row's own size."""

from __future__ import annotations

import dataclasses

import pytest

from semcl.preflight import check as check_module
from semcl.preflight import fake as fake_module
from semcl.preflight.plan import check_tables
from semcl.preflight.report import read_status, render, write_status
from semcl.registry.tables import get_table

LABEL = "GPaCo ResNet-50"  # gpaco/tab5: full ImageNet at 224 px, batch 512 over 8 GPUs


@pytest.mark.usefixtures("single_thread")
def test_an_imagenet_resnet50_row_steps_at_64_px_and_is_measured_at_224(tmp_path, monkeypatch):
    monkeypatch.setenv("SEMCL_LOADER_WORKERS", "0")
    table = get_table("gpaco/tab5")
    table = dataclasses.replace(table, rows=[r for r in table.rows if r.label == LABEL])
    real_sides, faked = [], []  # the real step's image side; (batch, side) of the fake step
    real_calibrate, real_fake_peak = check_module._calibrate_norm, fake_module.fake_peak

    def calibrate(method, views):  # the real step's views (its BN calibration reads them)
        real_sides.append(views[0].shape[-1])
        return real_calibrate(method, views)

    def counted(method, cfg, opt, batch, size, n_train):
        faked.append((size, batch.views[0].shape[-1]))
        return real_fake_peak(method, cfg, opt, batch, size, n_train)

    monkeypatch.setattr(check_module, "_calibrate_norm", calibrate)
    monkeypatch.setattr(fake_module, "fake_peak", counted)
    [row] = check_tables([table], "paper", tmp_path / "w", 80.0)
    assert row.error is None, row.error
    assert real_sides == [64] and faked == [(64, 224)]  # 512 images over 8 GPUs, faked at the row's 224 px
    assert (row.real_step_px, row.input_px, row.batch_per_gpu) == (64, 224, 64)
    assert row.reduced == "input 224→64 px for the real step and evaluations"
    assert row.fake_gpu_gb is not None and row.est_gpu_gb == row.fake_gpu_gb
    line = render([row]).splitlines()[1]
    assert "reduced: input 224→64 px for the real step and evaluations" in line
    assert "memory: fake-tensor step at batch 64, 224 px" in line
    status = tmp_path / "paper.json"
    write_status(status, "paper", [row])
    doc = read_status(status)["gpaco/tab5"]["rows"][LABEL]
    assert doc == {"run_id": row.run_id, "status": "ready", "est_gpu_gb": row.est_gpu_gb, "memory": "fake step",
                   "memory_batch_per_gpu": 64, "memory_px": 224, "real_step_px": 64,
                   "reduced": "input 224→64 px for the real step and evaluations"}


def test_a_row_at_its_native_size_reports_nothing_reduced_and_long_accumulation_is_named():
    """CIFAR rows step at their own 32 px; a row accumulating 8 batches steps with 2 (REAL_STEP_ACCUM)."""
    from semcl.registry.plan import plan_runs

    run = plan_runs(get_table("gpaco/cifar100-lt"), "paper")[0]
    assert check_module.reductions(run, None) is None and check_module.own_side(run) is None
    cfg = run.config
    longer = dataclasses.replace(run, config=dataclasses.replace(cfg, optim=dataclasses.replace(cfg.optim,
                                                                                              accum_steps=8)))
    assert check_module.reductions(longer, None) == "gradient accumulation 8→2 batches"
