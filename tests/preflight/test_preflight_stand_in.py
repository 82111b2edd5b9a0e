"""Preflight details found by the full-size paper check: the stand-in is large enough for a neighbour
search over k, and BN statistics come from the step's batch before the evaluation."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from semcl.preflight.check import _calibrate_norm, stand_in_images_per_class
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table


def _run(table: str, label: str):
    return next(r for r in plan_runs(get_table(table), "paper") if r.row_label == label)


def test_stand_in_holds_more_than_k_images_for_neighbour_search():
    # HSA k 40 on the 20-class ImageNet stand-in: ceil(41 / 20) + 1 = 4 per class, 80 images > 40
    assert _run("hsa/abl-k", "k 40").config.method.k == 40
    assert stand_in_images_per_class(_run("hsa/abl-k", "k 40")) == 4
    assert stand_in_images_per_class(_run("hsa/abl-k", "k 5")) == 2  # ceil(6 / 20) + 1
    assert stand_in_images_per_class(_run("rince/tab2", "Cross-entropy")) == 2  # no k


class _Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(3, 2, bias=False), nn.BatchNorm1d(2, momentum=0.1))
        self.backbone[0].weight.data = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 1.0]])

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)


def test_bn_statistics_are_the_batch_s_own_and_momentum_is_restored():
    m = _Tiny()
    bn = m.backbone[1]
    bn.running_mean.fill_(7.0)
    bn.running_var.fill_(9.0)
    x = torch.tensor([[1.0, 2.0, 0.0], [3.0, 0.0, 4.0], [5.0, 1.0, 1.0]])
    _calibrate_norm(m, [x, x + 1])  # the first view is the one forwarded
    # BN inputs: column 0 = (1, 3, 5), column 1 = 2*x1 + x2 = (4, 4, 3); unbiased variance, as BN keeps it
    assert torch.allclose(bn.running_mean, torch.tensor([3.0, 11.0 / 3.0]))
    assert torch.allclose(bn.running_var, torch.tensor([4.0, 1.0 / 3.0]))
    assert bn.momentum == 0.1 and int(bn.num_batches_tracked) == 1


def test_a_damaged_preflight_status_file_is_one_line_naming_it(tmp_path):
    from semcl.errors import ResultsError
    from semcl.preflight.report import RowCheck, read_status, write_status

    path = tmp_path / "preflight" / "paper.json"
    write_status(path, "paper", [RowCheck("a/t", "row 1", "r1"), RowCheck("a/t", "row 2", "r2", error="x: boom")])
    row = {"run_id": "r1", "status": "ready", "est_gpu_gb": None, "memory": None, "memory_batch_per_gpu": None,
           "memory_px": None, "real_step_px": None, "reduced": None}
    assert read_status(path) == {"a/t": {"ok": False, "run_ids": ["r1", "r2"], "errors": ["row 2: x: boom"],
                                         "rows": {"row 1": row, "row 2": {**row, "run_id": "r2", "status": "ERROR"}}}}
    path.write_text('{"a/t": {"ok": tr')  # cut short mid-write by something else
    with pytest.raises(ResultsError, match=r"paper\.json: not valid JSON .*rerun `semcl check`"):
        read_status(path)
    assert path.read_text() == '{"a/t": {"ok": tr'  # left as it was for the user to look at
