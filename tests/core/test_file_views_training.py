"""Training on a file-backed set: the same weights with 0 or 2 loader workers, and after a mid-epoch resume."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch

import semcl.engine.train as train_mod
from semcl.launch import RunBatch, prepare_synthetic_data
from semcl.registry import get_table
from semcl.runs import Store, plan_runs

# ImageNet-LT's file layout (synthetic JPEGs), 2 epochs of 6 steps, two views (PaCo-style "+" recipes)
TABLE = """\
id: test/files
paper: gpaco
source: "test"
title: a tiny CE run on files
preset: paco_imagenet_lt_resnet50
seeds: [5]
columns:
  - {key: top1, label: "Top-1", eval: accuracy, group: overall}
rows:
  - {label: CE, method: ce}
profiles:
  smoke:
    overrides:
      data.synthetic: true
      data.synthetic_train_per_class: 10
      data.synthetic_test_per_class: 1
      data.image_size: 16
      data.augment: crop_flip
      model.backbone: resnet_tiny
      optim.batch_size: 10
      optim.warmup_epochs: 0
      optim.cosine: false
      schedule.epochs: 2
"""


def _train(root, run, monkeypatch, workers: int, stop_after: int | None = None) -> tuple[dict, dict]:
    monkeypatch.setenv("SEMCL_LOADER_WORKERS", str(workers))
    store = Store(root)
    prepare_synthetic_data([run], store)
    if stop_after is not None:
        beats = []

        def beat_then_signal(force: bool = False) -> None:
            beats.append(1)
            if len(beats) == stop_after:
                os.kill(os.getpid(), signal.SIGTERM)

        monkeypatch.setattr(train_mod, "heartbeat", beat_then_signal)
        assert "interrupted" in RunBatch([run], root, root / "unused", 1)()[run.run_id]
        monkeypatch.setattr(train_mod, "heartbeat", lambda force=False: None)
    assert RunBatch([run], root, root / "unused", 1)() == {run.run_id: "done"}
    folder = store.run_dir(run.run_id)
    metrics = json.loads((folder / "metrics.json").read_text())
    state = torch.load(folder / "checkpoints" / "last.pt", map_location="cpu", weights_only=False)
    return metrics, state


@pytest.mark.slow
def test_file_backed_training_does_not_depend_on_workers_or_a_resume(tmp_path, registry_copy, monkeypatch,
                                                                     single_thread):
    (registry_copy / "test").mkdir(exist_ok=True)
    (registry_copy / "test" / "files.yaml").write_text(TABLE)
    run = plan_runs(get_table("test/files"), "smoke")[0]
    epochs_through_loader = []
    real = train_mod.step_views
    monkeypatch.setattr(train_mod, "step_views", lambda *a, **kw: epochs_through_loader.append(kw) or real(*a, **kw))
    ref_metrics, ref_state = _train(tmp_path / "a", run, monkeypatch, workers=0)
    assert [kw["epoch"] for kw in epochs_through_loader] == [0, 1]  # the views came through the loader
    for name, kw in {"2 workers": dict(workers=2), "resumed at epoch 1 step 2": dict(workers=1, stop_after=8)}.items():
        metrics, state = _train(tmp_path / name.replace(" ", "_"), run, monkeypatch, **kw)
        assert metrics["metrics"] == ref_metrics["metrics"], name
        assert [h["loss"] for h in metrics["history"]] == [h["loss"] for h in ref_metrics["history"]], name
        for key, value in ref_state["method"].items():
            assert torch.equal(state["method"][key], value), (name, key)
