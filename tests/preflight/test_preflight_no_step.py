"""Rows with no training step of ours still get a GPU-memory figure per GPU: a logit ensemble holds no GPU (0),
a detectron2 transfer has detectron2's published peak for the nearest config (plus the CUDA context), named."""

from __future__ import annotations

import pytest

from semcl.preflight.check import CONTEXT_GB, _memory_without_a_step
from semcl.preflight.report import RowCheck, render
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table


def _check(table_id: str, label: str) -> RowCheck:
    table = get_table(table_id)
    run = next(r for r in plan_runs(table, "paper") if r.row_label == label)
    res = table.resources_for(label, "paper")
    out = RowCheck(table_id, label, run.run_id, gpus=res.gpus, gpu_mem_gb=80.0, batch_per_gpu=32.0)
    _memory_without_a_step(out, run)
    return out


def test_an_ensemble_row_holds_no_gpu_and_says_so():
    out = _check("gpaco/inat18", "GPaCo ensemble (2 x ResNet-152, logit sum)")
    assert (out.gpus, out.est_gpu_gb, out.batch_per_gpu, out.ok) == (0, 0.0, None, True)
    line = render([out]).splitlines()[1]
    assert "0.0 / 80 GiB" in line and "no GPU: sums the members' saved logits on the CPU" in line


@pytest.mark.parametrize(("table_id", "label", "published"), [
    ("hsa/transfer-coco", "CsMl 200 ep", 5.2),  # Mask R-CNN R50-C4 1x, detectron2 MODEL_ZOO.md
    ("hsa/transfer-voc", "CsMl 200 ep", 4.8),  # Faster R-CNN R50-C4 1x
])
def test_a_detectron2_row_has_the_published_peak_and_names_it(table_id, label, published):
    out = _check(table_id, label)
    assert out.gpus == 8 and out.est_gpu_gb == pytest.approx(published + CONTEXT_GB)
    assert f"published {published:g} GB per GPU (detectron2 MODEL_ZOO.md @02478d2" in render([out])
