"""The preflight's plan (semcl.preflight.plan): one real step per code path, one fake step per memory shape,
and a memory figure on every row."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensor

from semcl.methods.base import Batch, Method
from semcl.methods.registry import METHODS
from semcl.methods.spec import MethodSpec
from semcl.models import LinearClassifier, build_backbone
from semcl.preflight import fake as fake_module
from semcl.preflight.plan import check_tables
from semcl.preflight.report import render
from semcl.preflight.shapes import code_key, memory_key
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table


@dataclass
class ToyPlan:
    name: str = "toy_plan"
    scale: float = 1.0


REAL_STEPS: list[int] = []
REAL_SIDES: list[int] = []  # the image side of each real step


class ToyPlanMethod(Method):
    has_classifier = True

    def __init__(self, cfg, info):
        super().__init__(cfg, info)
        self.backbone = build_backbone(cfg.model.backbone, in_channels=info.in_channels)
        self.classifier = LinearClassifier(self.backbone.out_dim, info.num_classes)

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        if not isinstance(batch.views[0], FakeTensor):
            REAL_STEPS.append(len(batch.labels))
            REAL_SIDES.append(batch.views[0].shape[-1])
        logits = self.classifier(self.backbone(batch.views[0])) * self.cfg.method.scale
        return {"loss": F.cross_entropy(logits.float(), batch.labels)}

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.backbone(x))


ROWS = {
    "plain": "{model.backbone: resnet_tiny, optim.batch_size: 4}",
    # a loss weight and the lr: everything shared
    "weighted": "{model.backbone: resnet_tiny, optim.batch_size: 4, method.scale: 3.0, optim.lr: 0.01}",
    "wide": "{model.backbone: resnet18, optim.batch_size: 4}",  # another network: the real step shared, its own fake step
    # another batch: the real step shared (at 4), its own fake step
    "batch 16": "{model.backbone: resnet_tiny, optim.batch_size: 16}",
}
TABLE = """\
id: toy/plan
paper: toy
source: "test"
title: preflight plan
seeds: [7]
columns:
  - {key: top1, label: "Top-1", eval: accuracy, group: overall}
rows:
""" + "".join(f"  - {{label: {label}, method: toy_plan, overrides: {ov}}}\n" for label, ov in ROWS.items()) + """\
profiles:
  smoke:
    overrides:
      data.name: imagenet100
      data.synthetic: true
      data.image_size: 32
      data.augment: crop_flip
      optim.warmup_epochs: 0
      schedule.epochs: 2
      eval.linear_probe: false
"""


@pytest.fixture
def toy_table(tmp_path, monkeypatch):
    return _toy_table(tmp_path, monkeypatch, 32)


def _toy_table(tmp_path, monkeypatch, side: int, extra: str = "", first: str | None = None):
    """The toy table with the smoke profile at `side` px; `extra`: more profile overrides (YAML lines); `first`: the
    row listed first."""
    monkeypatch.setitem(METHODS, "toy_plan", MethodSpec("toy_plan", ToyPlan, ToyPlanMethod, train_cost=1.0))
    root = tmp_path / "experiments"
    (root / "toy").mkdir(parents=True)
    text = TABLE.replace("data.image_size: 32", f"data.image_size: {side}{extra}")
    if first is not None:
        line = f"  - {{label: {first}, method: toy_plan, overrides: {ROWS[first]}}}\n"
        text = text.replace(line, "").replace("rows:\n", "rows:\n" + line)
    (root / "toy" / "plan.yaml").write_text(text)
    monkeypatch.setenv("SEMCL_REGISTRY", str(root))
    monkeypatch.setenv("SEMCL_LOADER_WORKERS", "0")
    return get_table("toy/plan")


@pytest.mark.usefixtures("single_thread")
def test_one_real_step_per_code_path_and_one_fake_step_per_memory_shape(toy_table, tmp_path, monkeypatch):
    fake_sizes: list[int] = []
    real_fake_peak = fake_module.fake_peak

    def counted(method, cfg, opt, batch, size, n_train):
        fake_sizes.append(size)
        return real_fake_peak(method, cfg, opt, batch, size, n_train)

    monkeypatch.setattr(fake_module, "fake_peak", counted)
    REAL_STEPS.clear()
    res = {r.row: r for r in check_tables([toy_table], "smoke", tmp_path / "w", 80.0)}
    assert all(r.error is None for r in res.values()), res
    # the four rows have one code path: one real step, at the small batch (the table's default batch 4 is 4)
    assert REAL_STEPS == [4]
    assert [res[k].step_as for k in ROWS] == [None, "toy/plan / plain", "toy/plan / plain", "toy/plan / plain"]
    # three memory shapes: plain (shared by weighted), wide and batch 16, each faked at its own batch
    assert sorted(fake_sizes) == [4, 4, 16]
    assert res["weighted"].same_shape_as == "toy/plan / plain" and res["wide"].same_shape_as is None
    assert res["weighted"].fake_gpu_gb == res["plain"].fake_gpu_gb
    # every row has its own figure from a fake step, and the bigger network or batch needs more memory
    assert all(r.fake_gpu_gb is not None and r.est_gpu_gb == r.fake_gpu_gb for r in res.values())
    assert res["wide"].fake_gpu_gb > res["plain"].fake_gpu_gb
    assert res["batch 16"].fake_gpu_gb > res["plain"].fake_gpu_gb
    assert res["wide"].params > res["plain"].params == res["batch 16"].params
    assert res["batch 16"].batch_per_gpu == 16 and res["plain"].batch_per_gpu == 4


@pytest.mark.usefixtures("single_thread")
def test_rows_larger_than_the_real_step_side_step_at_64_px_and_are_faked_at_their_own(tmp_path, monkeypatch):
    """At 160 px (larger than REAL_STEP_SIZE) the one real step runs at 64 px, and each memory shape gets a memory
    check whose fake step takes a batch at the rows' own 160 px: the same figures as rows checked whole at 160 px."""
    from semcl.preflight import check as check_module

    table = _toy_table(tmp_path, monkeypatch, 160)
    faked: list[tuple[int, int]] = []  # (batch, side) of each fake step
    real_fake_peak = fake_module.fake_peak

    def counted(method, cfg, opt, batch, size, n_train):
        faked.append((size, batch.views[0].shape[-1]))
        return real_fake_peak(method, cfg, opt, batch, size, n_train)

    monkeypatch.setattr(fake_module, "fake_peak", counted)
    REAL_STEPS.clear()
    REAL_SIDES.clear()
    res = {r.row: r for r in check_tables([table], "smoke", tmp_path / "w", 80.0)}
    assert all(r.error is None for r in res.values()), res
    assert REAL_STEPS == [4] and REAL_SIDES == [check_module.REAL_STEP_SIZE] == [64]
    assert sorted(faked) == [(4, 160), (4, 160), (16, 160)]  # plain (and weighted), wide, batch 16
    assert all(r.real_step_px == 64 and r.fake_gpu_gb is not None and r.est_gpu_gb == r.fake_gpu_gb
               for r in res.values())
    assert "reduced: input 160→64 px for the real step and evaluations" in render(list(res.values()))
    assert all(r.input_px == 160 for r in res.values())
    # the same figures as a check whose real step runs at 160 px and covers its memory shape
    monkeypatch.setattr(check_module, "REAL_STEP_SIZE", 1000)
    whole = {r.row: r for r in check_tables([table], "smoke", tmp_path / "w2", 80.0)}
    assert REAL_SIDES[-1] == 160 and all(r.real_step_px is None for r in whole.values())
    assert {k: r.fake_gpu_gb for k, r in whole.items()} == {k: r.fake_gpu_gb for k, r in res.items()}


def _with(run, **dotted):
    """`run` with dotted config keys replaced (a stand-in for another row of the same table)."""
    cfg = run.config
    for key, value in dotted.items():
        section, name = key.split(".")
        cfg = dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), **{name: value})})
    return dataclasses.replace(run, config=cfg)


def test_a_loss_weight_or_a_teacher_of_the_same_network_shares_both_keys_another_network_only_the_code():
    runs = {r.row_label: r for r in plan_runs(get_table("scns/kd-cifar100"), "paper") if r.seed == 123}
    teacher, student = runs["Teacher resnet56"], runs["KD resnet56 to resnet20"]
    other_student = runs["KD resnet110 to resnet20"]
    extra = {"reduce": None, "batch": 4}
    t_code = code_key(teacher, [], extra)
    s_code, s_mem = code_key(student, [t_code], extra), memory_key(student, 1, extra)
    # a teacher trained at another lr (same network): the same code key, so its students' keys do not move
    assert code_key(_with(teacher, **{"optim.lr": 0.01}), [], extra) == t_code
    # another loss weight: one real step and one fake step for both
    weighted = _with(student, **{"method.alpha": 0.5})
    assert weighted.config.method.alpha != student.config.method.alpha
    assert (code_key(weighted, [t_code], extra), memory_key(weighted, 1, extra)) == (s_code, s_mem)
    # a teacher of another network: the same code path, another memory shape
    t110 = code_key(runs["Teacher resnet110"], [], extra)
    assert t110 == t_code and code_key(other_student, [t110], extra) == s_code
    assert memory_key(other_student, 1, extra) != s_mem
    # another batch per GPU or GPU count: another memory shape, the same code path
    big = _with(student, **{"optim.batch_size": 128})
    assert code_key(big, [t_code], extra) == s_code and memory_key(big, 1, extra) != s_mem
    assert memory_key(student, 2, extra) != s_mem


@pytest.mark.usefixtures("single_thread")
def test_a_missing_user_weights_file_is_the_rows_error_and_the_row_keeps_its_memory_figure(tmp_path, monkeypatch):
    """A row whose `model.pretrained` file is absent (user-supplied weights, never downloaded) fails the preflight
    naming the key and the file, and is still checked on random weights: its memory figure is there."""
    missing = tmp_path / "pretrained" / "resnet101-63fe2227.pth"
    table = _toy_table(tmp_path, monkeypatch, 32, f"\n      model.pretrained: {missing}")
    res = {r.row: r for r in check_tables([table], "smoke", tmp_path / "w", 80.0)}
    for r in res.values():
        assert r.error.startswith(f"{table.path}: key 'model.pretrained': {missing} is not there"), r.error
        assert r.fake_gpu_gb is not None and r.est_gpu_gb == r.fake_gpu_gb and not r.ok
    # with the file there, the row passes (the toy method reads no weights)
    missing.parent.mkdir()
    missing.write_bytes(b"")
    assert all(r.ok for r in check_tables([table], "smoke", tmp_path / "w2", 80.0))


def test_accumulation_counts_above_two_share_a_real_step():
    # the real step runs one cycle of at most 2 batches: GPaCo ViT-B (accum 4) and ViT-L (accum 8) run one code path
    runs = {r.row_label: r for r in plan_runs(get_table("gpaco/mae-robustness"), "paper") if r.seed == 123}
    vit_b, vit_l = runs["GPaCo ViT-B"], runs["GPaCo ViT-L"]
    assert (vit_b.config.optim.accum_steps, vit_l.config.optim.accum_steps) == (4, 8)
    extra = {"reduce": None, "batch": 4}
    assert code_key(vit_b, [], extra) == code_key(vit_l, [], extra)
    assert memory_key(vit_b, 1, extra) != memory_key(vit_l, 1, extra)
    # one batch per step is another code path; two or more run the same cycle of two
    one, two, three = (code_key(_with(vit_b, **{"optim.accum_steps": n}), [], extra) for n in (1, 2, 3))
    assert one != two == three == code_key(vit_b, [], extra)


@pytest.mark.usefixtures("single_thread")
def test_a_code_paths_real_step_runs_on_its_cheapest_network(tmp_path, monkeypatch):
    # the ResNet-18 row listed first: the real step (with its checkpoint and evaluations) runs on resnet_tiny all the same
    table = _toy_table(tmp_path, monkeypatch, 32, first="wide")
    assert [r.label for r in table.rows][0] == "wide"
    REAL_STEPS.clear()
    res = {r.row: r for r in check_tables([table], "smoke", tmp_path / "w", 80.0)}
    assert all(r.error is None for r in res.values()), res
    assert REAL_STEPS == [4]
    assert res["plain"].step_as is None and res["wide"].step_as == "toy/plan / plain"
    # ResNet-18 still has its own fake step and figure, larger than resnet_tiny's
    assert res["wide"].same_shape_as is None and res["wide"].fake_gpu_gb > res["plain"].fake_gpu_gb


def test_the_memory_key_leaves_out_evaluations_but_the_per_stage_probes():
    run = plan_runs(get_table("hsa/linear"), "paper")[0]
    knn = [1, 20] if run.config.eval.knn != [1, 20] else [200]
    extra = {"reduce": None, "batch": 4}
    key = memory_key(run, 8, extra)
    assert memory_key(_with(run, **{"probe.batch_size": 4096}), 8, extra) == key  # the probe's batch
    assert memory_key(_with(run, **{"eval.knn": knn}), 8, extra) == key
    staged = _with(run, **{"eval.stage_probe": ["layer1", "layer2"]})
    assert memory_key(staged, 8, extra) != key  # the per-stage probes' peak is in the figure, at the probe's batch
    assert memory_key(_with(staged, **{"probe.batch_size": 4096}), 8, extra) != memory_key(staged, 8, extra)
    assert code_key(_with(run, **{"eval.knn": knn}), [], extra) != code_key(run, [], extra)  # evaluations are code
