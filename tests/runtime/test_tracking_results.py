"""Trackers name each run `table/row/seed` (TensorBoard: by its folder under results/tensorboard/), stay keyed by
the run id, and get the evaluation metrics and the run's settings once the record is written. The tracker packages
are stand-ins here (none is installed in the test environment): what is checked is what semcl hands them."""

from __future__ import annotations

import copy
import sys
import types

import semcl.engine.harness as harness_mod
import semcl.engine.job as job_mod
from semcl.engine.job import execute_run
from semcl.registry.plan import Run, make_run_id, plan_runs
from semcl.registry.tables import get_table
from semcl.runtime.tracking import (
    TB_OWNER,
    eval_scalars,
    mlflow_key,
    run_label,
    run_name,
    settings,
    tensorboard_dir,
)
from semcl.store import Store


def test_tensorboard_folder_is_named_by_profile_table_row_seed_and_owned_by_one_run_id(tmp_path):
    label = {"table": "rince/tab2", "row": "RINCE-in / out", "seed": 123, "profile": "mini", "run_id": "aaa111"}
    path = tensorboard_dir(tmp_path, label)
    assert path == tmp_path / "tensorboard" / "mini" / "rince" / "tab2" / "RINCE-in ∕ out" / "123"
    path.mkdir(parents=True)
    (path / TB_OWNER).write_text("aaa111\n")
    assert tensorboard_dir(tmp_path, label) == path  # its own folder again (a resume)
    # a run of another config with the same label: beside it, never into it
    assert tensorboard_dir(tmp_path, {**label, "run_id": "bbb222"}) == path.parent / "123.bbb222"
    assert run_name(label) == "rince/tab2/RINCE-in / out/123"
    assert tensorboard_dir(tmp_path, {"run_id": "ccc333"}) == tmp_path / "tensorboard" / "ccc333"


def test_settings_and_metrics_are_flattened_for_the_trackers(tmp_path):
    config = {"optim": {"lr": 0.5, "min_lr": None, "amp": None}, "eval": {"ood": ["cifar10", "svhn"]},
              "method": {"name": "rince", "taus": [0.1, 0.2]}, "schedule": {"epochs": 2}}
    label = {"table": "t/x", "row": "r", "seed": 7, "profile": "smoke", "run_id": "abc"}
    assert settings(config, label) == {"table": "t/x", "row": "r", "seed": 7, "profile": "smoke", "run_id": "abc",
                                       "optim.lr": 0.5, "eval.ood": "['cifar10', 'svhn']", "method.name": "rince",
                                       "method.taus": "[0.1, 0.2]", "schedule.epochs": 2}
    assert eval_scalars({"top1": 71.5, "retrieval": {"R@1": 90}, "nan": float("nan"), "ok": True, "s": "x"}) == \
        {"eval/top1": 71.5, "eval/retrieval.R@1": 90.0}
    assert mlflow_key("eval/retrieval_fine_R@1") == "eval/retrieval_fine_R_1"
    assert run_label(tmp_path / "runs" / "abc") == {"run_id": "abc"}  # no config.yaml: the id alone


class Calls(list):
    def __call__(self, *args, **kwargs):
        self.append((args, kwargs))


def _fake_trackers(monkeypatch) -> dict[str, Calls]:
    """torch.utils.tensorboard, wandb and mlflow stand-ins recording what they are given."""
    seen = {name: Calls() for name in ("tb_open", "tb_scalar", "tb_summary", "tb_text", "hparams", "wandb_init",
                                       "wandb_log", "wandb_config", "wandb_summary", "mlflow_run", "mlflow_param",
                                       "mlflow_metric")}

    class Writer:
        def __init__(self, log_dir, purge_step=None):
            seen["tb_open"](log_dir, purge_step=purge_step)
            self.file_writer = types.SimpleNamespace(add_summary=seen["tb_summary"])

        def add_scalar(self, tag, value, step):
            seen["tb_scalar"](tag, value, step)

        def add_text(self, tag, text, step):
            seen["tb_text"](tag, text, step)

        def flush(self):
            pass

        def close(self):
            pass

    def hparams(h, m):
        seen["hparams"](h, m)
        return ["experiment", "session start", "session end"]

    tb = types.ModuleType("torch.utils.tensorboard")
    tb.SummaryWriter = Writer
    summary = types.ModuleType("torch.utils.tensorboard.summary")
    summary.hparams = hparams
    wandb = types.ModuleType("wandb")

    def init(**kw):
        seen["wandb_init"](**kw)
        return types.SimpleNamespace(log=seen["wandb_log"], finish=lambda: None,
                                     config=types.SimpleNamespace(update=seen["wandb_config"]),
                                     summary=types.SimpleNamespace(update=seen["wandb_summary"]))

    wandb.init = init
    runs: dict[str, str] = {}

    class Client:
        def __init__(self, tracking_uri):
            pass

        def get_experiment_by_name(self, name):
            return types.SimpleNamespace(experiment_id="1")

        def search_runs(self, ids, filter_string, max_results):
            key = filter_string.split("'")[1]
            return [types.SimpleNamespace(info=types.SimpleNamespace(run_id=runs[key]))] if key in runs else []

        def create_run(self, exp_id, run_name, tags):
            seen["mlflow_run"](run_name, tags)
            runs[tags["semcl.run_id"]] = f"mlflow-{len(runs)}"
            return types.SimpleNamespace(info=types.SimpleNamespace(run_id=runs[tags["semcl.run_id"]]))

        def log_param(self, run_id, key, value):
            seen["mlflow_param"](run_id, key, value)

        def log_metric(self, run_id, key, value, step):
            seen["mlflow_metric"](run_id, key, value, step)

    mlflow, tracking = types.ModuleType("mlflow"), types.ModuleType("mlflow.tracking")
    tracking.MlflowClient = Client
    mlflow.tracking = tracking
    for name, module in {"torch.utils.tensorboard": tb, "torch.utils.tensorboard.summary": summary, "wandb": wandb,
                         "mlflow": mlflow, "mlflow.tracking": tracking}.items():
        monkeypatch.setitem(sys.modules, name, module)
    return seen


def test_a_tracked_run_is_named_by_its_label_and_ends_with_its_metrics_and_settings(tmp_path, monkeypatch):
    seen = _fake_trackers(monkeypatch)
    monkeypatch.setenv("SEMCL_TRACKING", "tensorboard,wandb,mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "file:///unused")
    monkeypatch.setattr(harness_mod, "evaluate", lambda *a, **k: {"probe": 12.5, "retrieval_fine_R@1": 40.0})
    base = next(r for r in plan_runs(get_table("rince/tab2"), "smoke") if r.row_label == "Cross-entropy")
    cfg = copy.deepcopy(base.config)
    cfg.schedule.epochs, cfg.data.synthetic_train_per_class = 2, 3
    run = Run(base.table_id, base.row_label, base.seed, "smoke", cfg, make_run_id(cfg, base.seed))
    store = Store(tmp_path / "results")
    record = execute_run(run, store, tmp_path / "unused")
    name = f"rince/tab2/Cross-entropy/{run.seed}"
    tb_dir = str(tmp_path / "results" / "tensorboard" / "smoke" / "rince" / "tab2" / "Cross-entropy" / str(run.seed))
    # TensorBoard: one folder named by the label, opened for training and again for the results (no purge)
    assert seen["tb_open"] == [((tb_dir,), {"purge_step": None})] * 2
    assert (tmp_path / "results" / "tensorboard" / "smoke" / "rince" / "tab2" / "Cross-entropy" / str(run.seed)
            / TB_OWNER).read_text() == f"{run.run_id}\n"
    assert seen["tb_text"][0][0] == ("run", f"{name} (run {run.run_id})", 0)
    losses = [h["loss"] for h in record["history"]]
    assert [a for a, _ in seen["tb_scalar"] if a[0] == "train/loss"] == [("train/loss", losses[0], 1),
                                                                         ("train/loss", losses[1], 2)]
    metrics = {"eval/probe": 12.5, "eval/retrieval_fine_R@1": 40.0}
    assert [a for a, _ in seen["tb_scalar"] if a[0].startswith("eval/")] == [(k, v, 2) for k, v in metrics.items()]
    (hp, hp_metrics), _ = seen["hparams"][0]
    assert hp_metrics == metrics and len(seen["tb_summary"]) == 3
    assert {k: hp[k] for k in ("table", "row", "seed", "profile", "run_id", "optim.lr", "schedule.epochs")} == \
        {"table": "rince/tab2", "row": "Cross-entropy", "seed": run.seed, "profile": "smoke", "run_id": run.run_id,
         "optim.lr": cfg.optim.lr, "schedule.epochs": 2}
    # W&B: the label as its name, the run id as its id (a resume continues it); settings and summary at the end
    inits = [kw for _, kw in seen["wandb_init"]]
    assert [(kw["name"], kw["id"], kw["resume"]) for kw in inits] == [(name, run.run_id, "allow")] * 2
    assert seen["wandb_config"] == [((hp,), {"allow_val_change": True})]
    assert seen["wandb_summary"] == [((metrics,), {})]
    # MLflow: created once under the label, found again by the run id's tag; metric keys MLflow accepts
    assert seen["mlflow_run"] == [((name, {"semcl.run_id": run.run_id}), {})]
    assert ("mlflow-0", "row", "Cross-entropy") in [a for a, _ in seen["mlflow_param"]]
    assert [a for a, _ in seen["mlflow_metric"] if a[1].startswith("eval/")] == [
        ("mlflow-0", "eval/probe", 12.5, 2), ("mlflow-0", "eval/retrieval_fine_R_1", 40.0, 2)]


def test_a_tracker_failing_at_the_end_costs_its_summary_not_the_run(tmp_path, monkeypatch, caplog):
    run = plan_runs(get_table("rince/tab2"), "smoke")[0]
    store = Store(tmp_path / "results")
    monkeypatch.setattr(job_mod, "log_results", lambda *a: (_ for _ in ()).throw(RuntimeError("offline store full")))
    monkeypatch.setattr(harness_mod, "train", lambda *a, **k: [])
    monkeypatch.setattr(harness_mod, "evaluate", lambda *a, **k: {"probe": 1.0})
    with caplog.at_level("WARNING", logger="semcl.job"):
        record = execute_run(run, store, tmp_path / "unused")
    assert record["metrics"] == {"probe": 1.0} and store.status(run.run_id)[0] == "done"
    assert "trackers: the evaluation was not logged (RuntimeError: offline store full)" in caplog.text
