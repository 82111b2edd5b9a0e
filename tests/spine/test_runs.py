"""Run ids: stable, seed- and config-sensitive, blind to launch-only and None-valued keys."""

from __future__ import annotations

import json

import pytest

from semcl.errors import ResultsError
from semcl.files import write_json_atomic
from semcl.registry.plan import make_run_id, plan_runs
from semcl.registry.tables import get_table
from semcl.run_config import build_config
from semcl.store import Store


def test_run_id_is_a_pure_function_of_config_and_seed():
    a = build_config({"method": {"name": "scl"}}, where="x")
    b = build_config({"method": {"name": "scl", "tau": 0.1}}, where="x")  # the default, spelled out
    assert make_run_id(a, 123) == make_run_id(b, 123)
    assert make_run_id(a, 123) != make_run_id(a, 546)
    c = build_config({"method": {"name": "scl", "tau": 0.07}}, where="x")
    assert make_run_id(a, 123) != make_run_id(c, 123)
    assert len(make_run_id(a, 123)) == 12


def test_run_id_pinned_value():
    # a silent change of the hashing would orphan every user's results: pin one id
    cfg = build_config({"method": {"name": "ce"}}, where="x")
    assert make_run_id(cfg, 123) == PINNED_CE_ID


PINNED_CE_ID = "b6a5143cf86b"


def test_plan_expands_implemented_rows_times_seeds():
    t = get_table("rince/tab2")
    runs = plan_runs(t, "smoke")
    # 19 rows, of which two (Two heads, Label smoothing) select another table's row and run nothing
    assert len(runs) == 17 * 3
    assert len({r.run_id for r in runs}) == 51
    assert [r.seed for r in runs[:3]] == [123, 546, 937]
    assert plan_runs(t, "smoke") == runs  # deterministic


def test_store_statuses(tmp_path):
    store = Store(tmp_path)
    assert store.status("abc")[0] == "missing"
    (store.run_dir("abc") / "checkpoints").mkdir(parents=True)
    (store.run_dir("abc") / "checkpoints" / "last.pt").write_bytes(b"x")
    assert store.status("abc")[0] == "partial"
    write_json_atomic(store.run_dir("abc") / "failed.json", {"error": "ValueError: boom"})
    status, detail = store.status("abc")
    assert status == "failed" and "ValueError: boom" in detail and "log.txt" in detail
    write_json_atomic(store.metrics_path("abc"), {"run_id": "abc", "metrics": {"x": 1.0}})
    assert store.status("abc") == ("done", "")


def test_truncated_metrics_is_a_one_line_error_and_untouched(tmp_path):
    store = Store(tmp_path)
    path = store.metrics_path("abc")
    path.parent.mkdir(parents=True)
    path.write_text('{"run_id": "abc", "metr')
    with pytest.raises(ResultsError) as err:
        store.read_record("abc")
    assert str(err.value).startswith(str(path)) and "\n" not in str(err.value)
    assert path.read_text() == '{"run_id": "abc", "metr'
    assert store.status("abc")[0] == "failed"


def test_atomic_write_leaves_no_temp_files(tmp_path):
    write_json_atomic(tmp_path / "m.json", {"a": 1})
    assert json.loads((tmp_path / "m.json").read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_step_schedule_variant():
    from semcl.engine.schedule import lr_at

    cfg = build_config({"optim": {"lr": 0.1, "cosine": False, "warmup_epochs": 0, "step_milestones": [320, 360],
                                  "step_gamma": 0.1}}, where="x")
    lrs = [lr_at(cfg.optim, 400, e, 0, 10) for e in (0, 319, 320, 359, 360, 399)]
    assert lrs == pytest.approx([0.1, 0.1, 0.01, 0.01, 0.001, 0.001])
    # cosine (SupCon form): floor lr * 0.1**3 at the last epoch, and the default run ids are untouched
    cos = build_config({"optim": {"lr": 0.5, "warmup_epochs": 0}}, where="x")
    assert lr_at(cos.optim, 10, 9, 0, 5) == pytest.approx(0.5 * 1e-3)
    assert make_run_id(build_config({"method": {"name": "ce"}}, where="x"), 123) == PINNED_CE_ID


def test_estimate_costs_the_network_the_row_trains():
    """ViT rows by method.arch, video rows per clip of method.backbone, KD rows with their teacher: each
    against the catalog arithmetic (forward + backward = 3 forwards)."""
    from semcl.estimate.catalog import BACKBONE_GFLOPS, VIDEO_GMACS, VIT_GMACS
    from semcl.estimate.cost import network_gflops

    def row(table, label):
        return next(r for r in plan_runs(get_table(table), "paper") if r.row_label == label).config

    assert network_gflops(row("gpaco/mae-robustness", "GPaCo ViT-L")) == 3 * VIT_GMACS["vit_large_patch16"]
    assert network_gflops(row("gpaco/tab13-vit", "GPaCo ViT-B")) == 3 * VIT_GMACS["vit_base_patch16"]
    # 16 frames at 128 px: (128 / 112)^2 of the 112-px clip
    assert network_gflops(row("rince/tab4", "RINCE")) == pytest.approx(3 * VIDEO_GMACS["hara_r3d18"] * (128 / 112) ** 2)
    assert network_gflops(row("rince/tab4", "RINCE (torchvision r3d_18)")) == pytest.approx(
        3 * VIDEO_GMACS["r3d_18"] * (128 / 112) ** 2)
    kd = row("scns/kd-cifar100", "KD resnet110 to resnet20")
    assert network_gflops(kd) == pytest.approx(BACKBONE_GFLOPS["resnet20"] + BACKBONE_GFLOPS["resnet110"] / 3)
    teacher = next(r for r in plan_runs(get_table("scns/kd-cifar100"), "paper")
                   if r.config.method.name == "kd_teacher" and r.config.method.teacher_arch == "resnet110").config
    assert network_gflops(teacher) == BACKBONE_GFLOPS["resnet110"]
    assert network_gflops(row("rince/tab2", "Cross-entropy")) == BACKBONE_GFLOPS["resnet50_cifar"]
