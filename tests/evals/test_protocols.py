"""Evaluations as one module each: the EVALUATIONS table validates columns, names their metric keys,
builds the run's eval config, and runs; a kNN column end to end through `semcl run --profile smoke`."""

from __future__ import annotations

import dataclasses
import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from semcl.cli.main import main
from semcl.config import hashable_config
from semcl.errors import ConfigError
from semcl.evals import protocols
from semcl.evals.protocols import EVALUATIONS, Column, EvalConfig, describe, metric_key, validate_column
from semcl.evals.protocols.spec import COMMON_FIELDS
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table, load_registry, load_table
from semcl.store import Store


def test_every_evaluation_is_registered_under_its_name_and_owns_its_fields():
    assert all(name == e.name for name, e in EVALUATIONS.items())
    # the column type is exactly the common fields plus what the evaluations declare (video retrieval
    # declares retrieval's `measure` alike), and every evaluation module is registered once
    optional = {f.name for f in dataclasses.fields(Column)} - COMMON_FIELDS
    assert {f for e in EVALUATIONS.values() for f in e.fields} == optional
    modules = {p.stem for p in Path(protocols.__file__).parent.glob("*.py")} - {"__init__", "spec", "assemble", "context"}
    assert sorted(e.validate.__module__.rpartition(".")[2] for e in EVALUATIONS.values()) == sorted(modules)
    # and the run config's eval section is exactly their settings, each default "off" but the four that were on
    settings = {f.name: f for f in dataclasses.fields(EvalConfig)}
    assert set(settings) == {f.name for e in EVALUATIONS.values() if e.settings for f in dataclasses.fields(e.settings)}
    on = {name for name, f in settings.items() if f.default is not None}
    assert on == {"linear_probe", "retrieval", "retrieval_ks", "ood"}  # what every run id already hashes


@pytest.mark.parametrize("column, key", [
    ({"eval": "linear_probe", "epoch": "best"}, "linear_top1_best"),
    ({"eval": "retrieval", "labels": "coarse", "measure": "R@10"}, "retrieval_coarse_R@10"),
    ({"eval": "retrieval", "labels": "fine", "measure": "AP"}, "retrieval_fine_AP"),
    ({"eval": "ood", "out": "cifar10"}, "ood_auroc_mnist"),  # the profile substitutes mnist
    ({"eval": "ood", "out": "tinyimagenet"}, None),  # ... and drops tinyimagenet
    ({"eval": "accuracy", "group": "few", "thresholds": "oltr"}, "acc_few_oltr"),
    ({"eval": "accuracy", "group": "overall", "thresholds": "oltr"}, "acc_overall"),
    ({"eval": "latency"}, "latency_ms"),
    ({"eval": "reported"}, None),
    ({"eval": "knn"}, "knn_top1_k20"),
    ({"eval": "knn", "k": 200}, "knn_top1_k200"),
    ({"eval": "stage_probe", "stage": "layer2"}, "stage_probe_top1_layer2"),
    ({"eval": "detection", "key": "ap75"}, "ap75"),
    ({"eval": "alignment", "quantity": "alignment"}, "feature_alignment"),
    ({"eval": "alignment", "quantity": "uniformity"}, "feature_uniformity"),
])
def test_metric_keys(column, key):
    col = validate_column({"key": "c", "label": "C", **column}, "x.yaml", 0)
    assert metric_key(col, {"cifar10": "mnist", "tinyimagenet": None}) == key
    assert describe(col)


@pytest.mark.parametrize("column, message", [
    ({"eval": "retrieval", "labels": "fine", "measure": "ap"}, "column 'c': key 'measure' = 'ap': retrieval measures"),
    ({"eval": "retrieval", "labels": "fine", "measure": "R@two"}, "key 'measure' = 'R@two'"),
    ({"eval": "retrieval", "labels": "fine", "measure": "R@-1"}, "key 'measure' = 'R@-1'"),
    ({"eval": "retrieval", "labels": "fine"}, "key 'measure' = None"),
    ({"eval": "retrieval", "labels": "medium", "measure": "AP"}, "key 'labels' = 'medium'"),
    ({"eval": "linear_probe", "epoch": "first"}, "key 'epoch' = 'first' is not one of ['last', 'best']"),
    ({"eval": "accuracy", "epoch": "best", "group": "few"}, "key 'epoch' does not apply to eval 'accuracy'"),
    ({"eval": "knn", "k": 0}, "'columns[0].k' must be > 0, got 0"),
    ({"eval": "knn", "k": "20"}, "'columns[0].k' must be an integer, got '20'"),
    ({"eval": "knn", "measure": "R@1"}, "key 'measure' does not apply to eval 'knn' (it takes: k)"),
    ({"eval": "stage_probe", "stage": "layer5"}, "key 'stage' = 'layer5' is not one of ['stem', 'layer1'"),
    ({"eval": "stage_probe", "k": 3, "stage": "stem"}, "key 'k' does not apply to eval 'stage_probe' (it takes: stage)"),
    ({"eval": "reported", "out": "x"}, "key 'out' does not apply to eval 'reported' (it takes: no other key)"),
    ({"eval": "mAP"}, "key 'eval' = 'mAP' is not one of"),
    ({"eval": "ood", "colour": "red"}, "unknown key 'columns[0].colour'"),
    ({"eval": "alignment"}, "key 'quantity' = None: alignment measures one of ['alignment', 'uniformity']"),
    ({"eval": "alignment", "quantity": "spread"}, "key 'quantity' = 'spread'"),
])
def test_bad_columns_are_one_line_naming_file_and_key(column, message):
    with pytest.raises(ConfigError) as err:
        validate_column({"key": "c", "label": "C", **column}, "x.yaml", 0)
    assert str(err.value).startswith("x.yaml: ") and message in str(err.value) and "\n" not in str(err.value)


def test_tables_without_new_columns_keep_their_eval_config():
    t = get_table("rince/tab2")
    cfg = t.resolve(t.rows[0], "mini")
    assert cfg.eval.linear_probe and cfg.eval.retrieval == ["coarse", "fine"] and cfg.eval.ood == ["mnist"]
    assert cfg.eval.retrieval_ks == [1, 5, 10, 20]
    for table in load_registry().values():  # only the tables with such columns get knn / stage_probe keys
        knn = any(c.eval == "knn" for c in table.columns)
        stages = any(c.eval == "stage_probe" for c in table.columns)
        for row in (r for r in table.rows if r.implemented and not r.derived and not r.select and not r.reference):
            hashed = hashable_config(table.resolve(row, "paper"))["eval"]
            assert ("knn" in hashed) == knn and "knn_temperature" not in hashed
            assert ("stage_probe" in hashed) == stages


TINY = """\
id: test/knn
paper: rince
source: "test"
title: kNN on a tiny table
seeds: [0]
columns:
  - {key: top1, label: "Top-1", eval: accuracy, group: overall}
  - {key: knn20, label: "20-NN", eval: knn}
  - {key: knn5, label: "5-NN", eval: knn, k: 5}
  - {key: r2, label: "R@2", eval: retrieval, labels: fine, measure: "R@2"}
rows:
  - {label: CE, method: ce}
profiles:
  smoke:
    overrides:
      data.name: cifar10
      data.synthetic: true
      data.synthetic_train_per_class: 6
      data.synthetic_test_per_class: 3
      data.augment: crop_flip
      model.backbone: resnet_tiny
      optim.batch_size: 30
      optim.warmup_epochs: 0
      optim.cosine: false
      schedule.epochs: 1
"""


def test_columns_shape_the_eval_config(tmp_path):
    path = tmp_path / "knn.yaml"
    path.write_text(TINY)
    table = load_table(path, tmp_path)
    ev = table.resolve(table.rows[0], "smoke").eval
    assert ev.knn == [5, 20, 200]  # the protocol's 20 and 200, plus each column's k
    assert ev.retrieval == ["fine"] and ev.retrieval_ks == [1, 2, 5, 10, 20]  # R@2 joins the cutoffs
    assert ev.accuracy == ["paco"] and ev.linear_probe is False and ev.ood == []


def test_knn_column_end_to_end(tmp_path, monkeypatch):
    registry = tmp_path / "experiments"
    (registry / "test").mkdir(parents=True)
    (registry / "test" / "knn.yaml").write_text(TINY)
    monkeypatch.setenv("SEMCL_REGISTRY", str(registry))
    load_registry.cache_clear()
    res, data = tmp_path / "results", tmp_path / "data"
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["--results", str(res), "run", "test/knn", "--profile", "smoke", "--executor", "debug",
                     "--data-root", str(data)])
    assert code == 0, out.getvalue()
    (run,) = plan_runs(load_registry()["test/knn"], "smoke")
    metrics = json.loads(Store(res).metrics_path(run.run_id).read_text())["metrics"]
    n_test = 10 * 3
    for key in ("knn_top1_k5", "knn_top1_k20", "knn_top1_k200", "retrieval_fine_R@2", "acc_overall"):
        value = metrics[key]
        assert 0.0 <= value <= 100.0
        if key != "retrieval_fine_R@2":  # a top-1 over 30 test images is a multiple of 100 / 30
            assert abs(value * n_test / 100 - round(value * n_test / 100)) < 1e-6, (key, value)
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--results", str(res), "table", "test/knn", "--profile", "smoke", "--format", "csv"]) == 0
    cells = {line.split(",")[1]: line.split(",")[5] for line in out.getvalue().splitlines()[1:]}
    assert float(cells["knn20"]) == pytest.approx(metrics["knn_top1_k20"])  # the column shows its number, not "—"
    assert float(cells["knn5"]) == pytest.approx(metrics["knn_top1_k5"])
    assert float(cells["r2"]) == pytest.approx(metrics["retrieval_fine_R@2"])


def test_registry_imports_no_torch():
    import subprocess
    import sys

    code = "import sys, semcl.registry.tables, semcl.evals.protocols; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2]).returncode == 0
