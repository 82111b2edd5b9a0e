"""Shot-group accuracy from the evaluation through the registry's accuracy columns to the table."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from semcl.data import ImageSet
from semcl.engine.evaluate import evaluate
from semcl.errors import ConfigError
from semcl.evals.protocols import metric_key
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import _column, get_table
from semcl.report.tables import long_table, render, summary
from semcl.store import Store

# 4 classes with 150 / 100 / 20 / 5 training images; 2 test images each
TRAIN_COUNTS = [150, 100, 20, 5]
TEST_LABELS = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
PREDS = torch.tensor([0, 0, 1, 0, 3, 3, 3, 3])  # per-class accuracy 100 / 50 / 0 / 100


class FixedLogits(nn.Module):
    """A 'method' whose classifier returns prepared logits, in test order."""

    has_classifier = True

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Flatten()
        self.dummy = nn.Parameter(torch.zeros(1))

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(PREDS[: len(x)], 4).float()


def _set(labels: torch.Tensor) -> ImageSet:
    return ImageSet("cifar100", torch.zeros((len(labels), 3, 8, 8), dtype=torch.uint8), labels,
                    [str(i) for i in range(4)])


def _metrics() -> dict:
    t = get_table("gpaco/cifar100-lt")
    cfg = t.resolve(t.rows[0], "paper")
    cfg.eval.accuracy = ["paco", "oltr"]
    train = _set(torch.arange(4).repeat_interleave(torch.tensor(TRAIN_COUNTS)))
    return evaluate(FixedLogits(), cfg, train, _set(TEST_LABELS), data_root=None, seed=0)


def test_evaluation_reports_both_threshold_conventions():
    m = _metrics()
    assert m["acc_overall"] == pytest.approx(62.5) and m["head_top1"] == pytest.approx(62.5)
    # paco: many > 100 {0}, 20 <= medium <= 100 {1, 2}, few < 20 {3}
    assert (m["acc_many"], m["acc_medium"], m["acc_few"]) == pytest.approx((100.0, 25.0, 100.0))
    # oltr: many >= 100 {0, 1}, medium empty, few <= 20 {2, 3}
    assert m["acc_many_oltr"] == pytest.approx(75.0) and m["acc_few_oltr"] == pytest.approx(50.0)
    assert m["acc_medium_oltr"] is None  # no class in the group: null in the record, not NaN


def test_table_shows_many_medium_few_columns(tmp_path):
    t = get_table("gpaco/cifar100-lt")
    assert t.resolve(t.rows[0], "paper").eval.accuracy == ["paco"]
    store, metrics = Store(tmp_path), _metrics()
    for run in plan_runs(t, "paper"):
        write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": metrics})
    md = render(t, "paper", summary(t, "paper", long_table(t, "paper", store)), "md")
    assert "| Row | Top-1 | Many | Medium | Few |" in md
    # no paper value in the table: a cell is ours alone (no "/ — / —")
    assert "| CE, IF 100 | 62.50 ± 0.00 (n=3) | 100.00 ± 0.00 (n=3) | 25.00 ± 0.00 (n=3) | 100.00 ± 0.00 (n=3) |" in md
    assert "many > 100, 20 <= medium <= 100, few < 20 training images" in md


def test_accuracy_columns_are_validated():
    col = _column({"key": "m", "label": "M", "eval": "accuracy", "group": "many", "thresholds": "oltr"}, "x.yaml")
    assert metric_key(col, {}) == "acc_many_oltr"
    with pytest.raises(ConfigError, match="x.yaml: column 'm': accuracy needs 'group'"):
        _column({"key": "m", "label": "M", "eval": "accuracy", "group": "tail"}, "x.yaml")
    match = "x.yaml: column 'm': key 'group' does not apply to eval 'ood' \\(it takes: classes, out\\)"
    with pytest.raises(ConfigError, match=match):
        _column({"key": "m", "label": "M", "eval": "ood", "out": "mnist", "group": "many"}, "x.yaml")
