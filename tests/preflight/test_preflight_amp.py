"""The preflight's step of an fp16 row runs its autocast as bf16 on the CPU (fp16 CPU kernels are ~100x
slower: PaCo ResNet-200's check took 15 min), while the fp16 GradScaler still runs and is checkpointed;
outside the preflight's step context the engine's fp16 autocast is left as it is."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensor

from semcl.methods.base import Batch, Method
from semcl.methods.registry import METHODS
from semcl.methods.spec import MethodSpec
from semcl.models import LinearClassifier, build_backbone
from semcl.preflight.check import StepMeter, check_run, distinct_runs
from semcl.registry.tables import get_table
from semcl.runtime.checkpoint import load
from semcl.store import Store


@dataclass
class AmpToy:
    name: str = "toy_amp"


SEEN: list[tuple[bool, torch.dtype, torch.dtype]] = []


class AmpToyMethod(Method):
    """Cross-entropy; records the autocast state and the dtype its backbone's output has."""

    has_classifier = True

    def __init__(self, cfg, info):
        super().__init__(cfg, info)
        self.backbone = build_backbone(cfg.model.backbone, in_channels=info.in_channels)
        self.classifier = LinearClassifier(self.backbone.out_dim, info.num_classes)

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        feats = self.backbone(batch.views[0])
        if not isinstance(feats, FakeTensor):  # the memory probe's fake step (semcl.preflight.fake) is not counted
            SEEN.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"), feats.dtype))
        return {"loss": F.cross_entropy(self.classifier(feats).float(), batch.labels)}

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.backbone(x))


TABLE = """\
id: toy/amp
paper: toy
source: "test"
title: an fp16 row through the preflight
seeds: [7]
columns:
  - {key: top1, label: "Top-1", eval: accuracy, group: overall}
rows:
  - {label: fp16, method: toy_amp, overrides: {optim.amp: fp16}}
profiles:
  smoke:
    overrides:
      data.name: cifar100
      data.synthetic: true
      data.augment: crop_flip
      model.backbone: resnet_tiny
      optim.batch_size: 4
      optim.warmup_epochs: 0
      schedule.epochs: 2
      eval.linear_probe: false
"""


@pytest.fixture
def amp_table(tmp_path, monkeypatch):
    monkeypatch.setitem(METHODS, "toy_amp", MethodSpec("toy_amp", AmpToy, AmpToyMethod, train_cost=1.0))
    root = tmp_path / "experiments"
    (root / "toy").mkdir(parents=True)
    (root / "toy" / "amp.yaml").write_text(TABLE)
    monkeypatch.setenv("SEMCL_REGISTRY", str(root))
    monkeypatch.setenv("SEMCL_LOADER_WORKERS", "0")
    return get_table("toy/amp")


@pytest.mark.usefixtures("single_thread")
def test_an_fp16_row_steps_in_bf16_with_the_scaler_on_the_cpu(amp_table, tmp_path):
    (run,) = distinct_runs(amp_table, "smoke")
    assert run.config.optim.amp == "fp16"
    SEEN.clear()
    store = Store(tmp_path / "work")
    res = check_run(run, amp_table, store, amp_table.resources_for(run.row_label, "smoke"), 80.0)
    assert res.error is None
    # the one step: under autocast, bf16 (not fp16), and the backbone's activations in bf16
    assert SEEN == [(True, torch.bfloat16, torch.bfloat16)]
    # the fp16 GradScaler ran the step: its state is in the engine's checkpoint at the initial scale
    # (2**16; one step without an inf neither grows nor backs it off)
    state = load(store.run_dir(run.run_id) / "checkpoints" / "last.pt")
    assert state["scaler"]["scale"] == 2.0**16


def test_the_step_context_swaps_only_the_cpu_fp16_autocast():
    meter = StepMeter()
    batch = Batch.of([torch.zeros(3, 2)], torch.zeros(3, dtype=torch.long))
    seen = []
    with torch.autocast("cpu", dtype=torch.float16):
        for _ in range(2):  # the measured first step and a pass-through second one
            with meter.step(batch):
                seen.append(torch.get_autocast_dtype("cpu"))
        seen.append(torch.get_autocast_dtype("cpu"))  # the engine's own context is back to fp16 after
    with torch.autocast("cpu", dtype=torch.bfloat16), meter.step(batch):
        seen.append(torch.get_autocast_dtype("cpu"))
    with meter.step(batch):
        seen.append(torch.is_autocast_enabled("cpu"))
    assert seen == [torch.bfloat16, torch.bfloat16, torch.float16, torch.bfloat16, False]
    assert meter.batch == 3
