"""Training on a file-backed set: the same weights with 0 or 2 loader workers, and after a mid-epoch resume
(CE on ImageNet-LT's layout; HSA with two kNN positives each, and with a small crop, on ImageNet's)."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch

import semcl.engine.train as train_mod
import semcl.engine.view_source as view_source_mod
from semcl.launch.backends import prepare_synthetic_data
from semcl.launch.local import RunBatch
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.store import Store

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


# HSA on synthetic ImageNet synset folders: the loader picks the neighbours and makes their views
HSA_TABLE = """\
id: test/hsa-files
paper: hsa
source: "test"
title: HSA on files
preset: hsa_imagenet_resnet50
seeds: [5]
columns:
  - {key: knn, label: "k-NN", eval: knn, k: 3}
rows:
  - {label: "two positives", method: hsa, overrides: {method.positives: 2}}
  - {label: "small crop", method: hsa, overrides: {method.multicrop: 1, method.multicrop_size: 0.5}}
profiles:
  smoke:
    overrides:
      data.synthetic: true
      data.synthetic_train_per_class: 20
      data.synthetic_test_per_class: 1
      data.image_size: 16
      data.augment: supcon
      model.backbone: resnet_tiny
      model.head_hidden: 32
      model.head_dim: 16
      optim.batch_size: 50
      optim.warmup_epochs: 0
      optim.cosine: false
      schedule.epochs: 2
      method.queue_size: 100
      method.refresh: 1
      method.k: 3
      method.stages: [layer1, layer2]
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
@pytest.mark.parametrize(("yaml", "table", "row", "stop_after"), [
    (TABLE, "test/files", 0, 8),  # 6 steps an epoch: stopped at epoch 1 step 2
    (HSA_TABLE, "test/hsa-files", 0, 6),  # 10 synthetic synsets x 20: 4 steps an epoch, stopped at epoch 1 step 2
    (HSA_TABLE, "test/hsa-files", 1, 6),
])
def test_file_backed_training_does_not_depend_on_workers_or_a_resume(tmp_path, registry_copy, monkeypatch,
                                                                     single_thread, yaml, table, row, stop_after):
    (registry_copy / "test").mkdir(exist_ok=True)
    (registry_copy / "test" / f"{table.split('/')[1]}.yaml").write_text(yaml)
    run = plan_runs(get_table(table), "smoke")[row]
    epochs_through_loader = []
    real = view_source_mod.step_views
    monkeypatch.setattr(view_source_mod, "step_views", lambda *a, **kw: epochs_through_loader.append(kw) or real(*a, **kw))
    ref_metrics, ref_state = _train(tmp_path / "a", run, monkeypatch, workers=0)
    assert [kw["epoch"] for kw in epochs_through_loader] == [0, 1]  # the views came through the loader
    if table == "test/hsa-files":  # the kNN positives (2, or 1 with the small crop) came with them
        assert all(kw["partners"] is not None and len(kw["partner_recipes"]) == 2 for kw in epochs_through_loader)
    for name, kw in {"2 workers": dict(workers=2), "resumed": dict(workers=1, stop_after=stop_after)}.items():
        metrics, state = _train(tmp_path / name.replace(" ", "_"), run, monkeypatch, **kw)
        assert metrics["metrics"] == ref_metrics["metrics"], name
        assert [h["loss"] for h in metrics["history"]] == [h["loss"] for h in ref_metrics["history"]], name
        for key, value in ref_state["method"].items():
            assert torch.equal(state["method"][key], value), (name, key)
